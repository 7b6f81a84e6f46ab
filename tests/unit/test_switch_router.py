"""Hand-written JSON (older p4c's '?' encoding of `if` in an action): an IPv4 router with lpm,
an ACL with ternary/optional/range keys, a hidden keyless table, and csum16 update; plus the
table control API's P4Runtime semantics."""
from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netsum.switch.device import Device
from netsum.switch.entries import (ActionCall, Exact, Lpm, Optional, Range, TableEntry, Ternary)
from netsum.switch.errors import (AlreadyExists, InvalidArgument, NotFound, PermissionDenied,
                           ResourceExhausted)

JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
NH = 0x0000000000AA


def ip(a: str) -> int:
    return int.from_bytes(bytes(int(x) for x in a.split(".")), "big")


@pytest.fixture
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline(JSON.read_bytes()))
    return d


def fwd(dev: Device, prefix: str, plen: int, port: int) -> None:
    dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(ip(prefix), plen),), ActionCall("MyIngress.ipv4_forward", (NH, port))))


def pkt(dst: str, ttl: int = 64, src: str = "10.9.9.9", proto: int = 17) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                 IP(src=src, dst=dst, ttl=ttl, proto=proto) / UDP(sport=5, dport=6) / (b"z" * 30))


@pytest.mark.parametrize("dst, port", [
    ("10.1.2.3", 3),        # /24 beats /16 and /8
    ("10.1.9.9", 2),        # /16
    ("10.7.7.7", 1),        # /8
    ("11.0.0.1", None),     # miss -> default drop
])
def test_lpm_longest_prefix_wins(dev: Device, dst: str, port: int | None) -> None:
    fwd(dev, "10.0.0.0", 8, 1)
    fwd(dev, "10.1.2.0", 24, 3)
    fwd(dev, "10.1.0.0", 16, 2)
    out = dev.process(9, pkt(dst))
    assert [p for p, _ in out] == ([] if port is None else [port])


def test_forward_rewrites_and_checksum(dev: Device) -> None:
    fwd(dev, "10.0.0.0", 8, 4)
    [(port, data)] = dev.process(9, pkt("10.0.0.5", ttl=9))
    e = Ether(data)
    assert port == 4 and e.dst == "00:00:00:00:00:aa" and e.src == "00:00:00:00:00:01"
    assert e[IP].ttl == 8
    csum = e[IP].chksum
    del e[IP].chksum
    assert IP(bytes(e[IP])).chksum == csum


def test_if_in_action_with_question_operator(dev: Device) -> None:
    fwd(dev, "10.0.0.0", 8, 4)
    assert dev.process(9, pkt("10.0.0.5", ttl=3)) != []     # ttl 2 after: not low
    assert dev.process(9, pkt("10.0.0.5", ttl=2)) == []     # ttl 1 -> low -> hidden drop


def test_non_ipv4_goes_to_port_0(dev: Device) -> None:
    f = bytes(Ether(type=0x88B5) / (b"x" * 50))
    assert dev.process(3, f) == [(0, f)]


ANY_SRC = Ternary(0, 0)
ALL_LEN = Range(0, 0xFFFF)


@pytest.mark.parametrize("src, proto, length, tos", [
    ("10.9.9.9", 17, None, 0x10),      # high-priority entry matches
    ("10.9.9.9", 6, None, 0x20),       # optional proto mismatch -> lower entry
    ("10.8.0.1", 17, None, 0x30),      # src outside ternary -> catch-all
])
def test_acl_priorities_ternary_optional(dev: Device, src: str, proto: int, length: None,
                                         tos: int) -> None:
    fwd(dev, "10.0.0.0", 8, 4)
    acl = dev.pipeline.tables["MyIngress.acl"]
    acl.insert(TableEntry((Ternary(ip("10.9.0.0"), 0xFFFF0000), Optional(17), ALL_LEN),
                          ActionCall("MyIngress.set_tos", (0x10,)), priority=30))
    acl.insert(TableEntry((Ternary(ip("10.9.0.0"), 0xFFFF0000), Optional(None), ALL_LEN),
                          ActionCall("MyIngress.set_tos", (0x20,)), priority=20))
    acl.insert(TableEntry((ANY_SRC, Optional(None), ALL_LEN),
                          ActionCall("MyIngress.set_tos", (0x30,)), priority=10))
    [(_, data)] = dev.process(9, pkt("10.0.0.5", src=src, proto=proto))
    assert Ether(data)[IP].tos == tos


def test_acl_range(dev: Device) -> None:
    fwd(dev, "10.0.0.0", 8, 4)
    acl = dev.pipeline.tables["MyIngress.acl"]
    size = len(IP(pkt("10.0.0.5")[14:]))
    acl.insert(TableEntry((ANY_SRC, Optional(None), Range(size, size)),
                          ActionCall("MyIngress.drop"), priority=1))
    assert dev.process(9, pkt("10.0.0.5")) == []
    acl.modify(TableEntry((ANY_SRC, Optional(None), Range(size, size)),
                          ActionCall("NoAction"), priority=1))
    assert len(dev.process(9, pkt("10.0.0.5"))) == 1


def test_table_errors(dev: Device) -> None:
    lpm = dev.pipeline.tables["MyIngress.ipv4_lpm"]
    e = TableEntry((Lpm(ip("10.0.0.0"), 8),), ActionCall("MyIngress.ipv4_forward", (NH, 1)))
    lpm.insert(e)
    with pytest.raises(AlreadyExists):
        lpm.insert(e)
    bad = [
        TableEntry((Lpm(ip("10.0.0.1"), 8),), e.action),             # bits past prefix
        TableEntry((Lpm(0, 33),), e.action),                          # prefix too long
        TableEntry((Exact(1),), e.action),                            # wrong match kind
        TableEntry((Lpm(0, 0), Lpm(0, 0)), e.action),                 # too many fields
        TableEntry((Lpm(0, 0),), ActionCall("MyIngress.set_tos", (1,))),   # not in table
        TableEntry((Lpm(0, 0),), ActionCall("MyIngress.ipv4_forward", (NH,))),  # param count
        TableEntry((Lpm(0, 0),), ActionCall("MyIngress.ipv4_forward", (NH, 512))),  # width
        TableEntry((Lpm(0, 0),), e.action, priority=5),               # lpm: priority 0
    ]
    for b in bad:
        with pytest.raises(InvalidArgument):
            lpm.insert(b)
    with pytest.raises(NotFound):
        lpm.delete((Lpm(ip("11.0.0.0"), 8),))
    with pytest.raises(NotFound):
        lpm.modify(TableEntry((Lpm(ip("11.0.0.0"), 8),), e.action))
    assert lpm.get((Lpm(ip("10.0.0.0"), 8),)).action == e.action
    lpm.delete((Lpm(ip("10.0.0.0"), 8),))
    assert lpm.entries() == []


def test_size_limit_and_priority_rules(dev: Device) -> None:
    acl = dev.pipeline.tables["MyIngress.acl"]
    for p in range(1, 5):
        acl.insert(TableEntry((ANY_SRC, Optional(None), ALL_LEN), ActionCall("NoAction"),
                              priority=p))
    with pytest.raises(ResourceExhausted):
        acl.insert(TableEntry((ANY_SRC, Optional(None), ALL_LEN), ActionCall("NoAction"),
                              priority=9))
    with pytest.raises(InvalidArgument):
        acl.insert(TableEntry((ANY_SRC, Optional(None), ALL_LEN), ActionCall("NoAction")))
    with pytest.raises(InvalidArgument):    # value outside mask
        acl.insert(TableEntry((Ternary(1, 0), Optional(None), ALL_LEN), ActionCall("NoAction"),
                              priority=7))
    with pytest.raises(InvalidArgument):    # empty range
        acl.insert(TableEntry((ANY_SRC, Optional(None), Range(5, 4)), ActionCall("NoAction"),
                              priority=7))


def test_default_action_and_reset(dev: Device) -> None:
    pl = dev.pipeline
    lpm = pl.tables["MyIngress.ipv4_lpm"]
    assert lpm.default == ActionCall("MyIngress.drop")
    lpm.set_default(ActionCall("MyIngress.ipv4_forward", (NH, 7)))
    assert [p for p, _ in dev.process(9, pkt("12.0.0.1"))] == [7]
    with pytest.raises(PermissionDenied):
        pl.tables["tbl_act"].set_default(ActionCall("act"))
    fwd(dev, "10.0.0.0", 8, 4)
    lpm.reset()
    assert lpm.entries() == [] and lpm.default == ActionCall("MyIngress.drop")
    assert pl.actions["MyIngress.ipv4_forward"].runtime_data == (("dstAddr", 48), ("port", 9))


def test_install_gives_fresh_state(dev: Device) -> None:
    fwd(dev, "10.0.0.0", 8, 4)
    pl = dev.pipeline
    dev.install(pl)
    assert pl.tables["MyIngress.ipv4_lpm"].entries() == []


def test_control_from_another_thread_while_packets_flow(dev: Device) -> None:
    """Control calls take device.lock (as the P4Runtime server does); packets never see a
    half-made update and nothing raises."""
    import threading

    fwd(dev, "10.0.0.0", 8, 4)
    lpm = dev.pipeline.tables["MyIngress.ipv4_lpm"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def control() -> None:
        try:
            i = 0
            while not stop.is_set():
                key = (Lpm(ip("10.1.0.0") + (i % 200 << 8), 24),)
                with dev.lock:
                    lpm.insert(TableEntry(key, ActionCall("MyIngress.ipv4_forward", (NH, 5))))
                with dev.lock:
                    lpm.delete(key)
                i += 1
        except BaseException as e:   # surfaced below
            errors.append(e)

    t = threading.Thread(target=control)
    t.start()
    try:
        ports = {dev.process(9, pkt("10.1.3.3"))[0][0] for _ in range(2000)}
    finally:
        stop.set()
        t.join()
    assert not errors and ports <= {4, 5} and dev.stats.internal_errors == 0


def test_direct_meter_colors_entries() -> None:
    """A direct meter bound to the lpm table writes its colour to result_target on a hit."""
    import json

    j = json.loads(JSON.read_text())
    j["meter_arrays"] = [{"name": "MyIngress.lpm_meter", "id": 0, "is_direct": True,
                          "binding": "MyIngress.ipv4_lpm", "rate_count": 2, "type": "packets",
                          "size": 1024, "result_target": ["scalars", "meta.tmp"]}]
    tbl = j["pipelines"][0]["tables"][0]
    tbl["direct_meters"] = "MyIngress.lpm_meter"
    fwd_action = next(a for a in j["actions"] if a["name"] == "MyIngress.ipv4_forward")
    fwd_action["primitives"].append({"op": "assign", "parameters": [
        {"type": "field", "value": ["ipv4", "diffserv"]},
        {"type": "field", "value": ["scalars", "meta.tmp"]}]})
    d = Device()
    d.install(Device.build_pipeline(j))
    lpm = d.pipeline.tables["MyIngress.ipv4_lpm"]
    assert lpm.direct_meter == "MyIngress.lpm_meter"
    key = (Lpm(ip("10.0.0.0"), 8),)
    lpm.insert(TableEntry(key, ActionCall("MyIngress.ipv4_forward", (NH, 4))))

    def tos() -> int:
        [(_, data)] = d.process(9, pkt("10.0.0.5"))
        return Ether(data)[IP].tos
    assert tos() == 0                                           # no config: green
    from netsum.switch.entries import MeterConfig
    lpm.set_meter(key, 0, MeterConfig(cir=1, cburst=1, pir=2, pburst=2))
    assert [tos() for _ in range(3)] == [0, 1, 2]
    assert lpm.get(key).meter == MeterConfig(1, 1, 2, 2)


@pytest.mark.parametrize("with_exit, tos", [(True, 7), (False, 9)])
def test_exit_in_inlined_hidden_table(with_exit: bool, tos: int) -> None:
    """Conditionals inline hidden const tables (switch.control); exit must still stop there."""
    import json

    j = json.loads(JSON.read_text())
    act = next(a for a in j["actions"] if a["name"] == "act")

    def set_tos(v: int) -> dict[str, object]:
        return {"op": "assign", "parameters": [{"type": "field", "value": ["ipv4", "diffserv"]},
                                               {"type": "hexstr", "value": hex(v)}]}
    act["primitives"] = [set_tos(7)] + ([{"op": "exit", "parameters": []}] if with_exit else [])
    j["actions"].append({"name": "act2", "id": 5, "runtime_data": [],
                         "primitives": [set_tos(9)]})
    ing = j["pipelines"][0]
    tbl = next(t for t in ing["tables"] if t["name"] == "tbl_act")
    tbl["next_tables"] = {"act": "tbl_act2"}
    ing["tables"].append(dict(tbl, name="tbl_act2", id=3, action_ids=[5], actions=["act2"],
                              next_tables={"act2": None}, base_default_next=None,
                              default_entry={"action_id": 5, "action_const": True,
                                             "action_data": [], "action_entry_const": True}))
    d = Device()
    d.install(Device.build_pipeline(j))
    d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(ip("10.0.0.0"), 8),), ActionCall("MyIngress.ipv4_forward", (NH, 4))))
    [(_, data)] = d.process(9, pkt("10.0.0.5", ttl=2))    # low ttl -> node_5 -> tbl_act
    assert Ether(data)[IP].tos == tos


def test_trace_logging_names_pipeline_nodes(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    d = Device()
    log = logging.getLogger("netsum.switch.test")
    log.setLevel(5)
    d.set_logger(log)
    d.install(Device.build_pipeline(JSON.read_bytes()))
    with caplog.at_level(5, logger="netsum.switch.test"):
        d.process(9, pkt("10.0.0.5"))
    text = caplog.text
    assert "ingress: valid headers ['ethernet', 'ipv4']" in text
    assert "applying 'node_2'" in text and "applying 'MyIngress.ipv4_lpm'" in text
    assert "done, egress_spec=511" in text                  # lpm miss -> default drop
