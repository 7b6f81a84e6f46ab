"""The programs and traffic of benchmarks/switch_pps.py: the router, the stand-in
aggregation program (the per-packet work of netsum.p4 in a hand-built JSON) and netsum.p4
configured like the controller does, with a replayable stream of contributions."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, Replica, TableEntry

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROUTER_JSON", "standin_json", "agg_frame", "router_frame", "netsum_traffic",
           "make_device"]

ROUTER_JSON = ROOT / "tests" / "switch_json" / "router.json"
STD_FIELDS = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
              ["instance_type", 32, False], ["packet_length", 32, False],
              ["enq_timestamp", 32, False], ["enq_qdepth", 19, False],
              ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
              ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
              ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
              ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False]]
AGG_PORT = 0x6E73
#: The stand-in's own header (netsum's v1 layout, 16 bytes: not the v2 protocol, whose codec
#: is netsum.workers.wire): its parser's `ns_t` and what `agg_frame` packs.
STANDIN_HEADER = (("msg_type", 8), ("flags", 8), ("job_id", 16), ("slot", 16), ("exp", 8),
                  ("count", 8), ("round", 32), ("offset", 32))


# -- the stand-in aggregation program ---------------------------------------------------------
def _f(h: str, f: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, f]}


def _hx(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(v)}


def _ex(op: str, left: Any, right: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def _assign(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    return {"op": "assign", "parameters": [dst, src]}


def standin_json(k: int) -> dict[str, Any]:
    """Same per-packet shape as netsum.p4: Ethernet/IPv4/UDP/16-byte header/K x bit<32>; exact
    job and member tables; one action with K register RMWs plus bitmap and count registers;
    multicast with an egress table on egress_rid; IPv4 checksum update."""
    r = json.loads(ROUTER_JSON.read_text())
    r["header_types"][0]["fields"] = [["idx", 32, False], ["acc", 32, False],
                                      ["bm", 32, False], ["cnt", 8, False],
                                      ["worker_bit", 32, False]]
    r["header_types"] += [
        {"name": "udp_t", "id": 4, "fields": [["sport", 16, False], ["dport", 16, False],
                                              ["len", 16, False], ["csum", 16, False]]},
        {"name": "ns_t", "id": 5, "fields": [[name, bits, False]
                                             for name, bits in STANDIN_HEADER]},
        {"name": "vals_t", "id": 6, "fields": [[f"v{i}", 32, False] for i in range(k)]},
    ]
    r["headers"] += [
        {"name": "udp", "id": 4, "header_type": "udp_t", "metadata": False},
        {"name": "ns", "id": 5, "header_type": "ns_t", "metadata": False},
        {"name": "vals", "id": 6, "header_type": "vals_t", "metadata": False},
    ]
    states = r["parsers"][0]["parse_states"]
    states[1]["transition_key"] = [_f("ipv4", "protocol")]
    states[1]["transitions"] = [{"type": "hexstr", "value": "0x11", "mask": None,
                                 "next_state": "parse_udp"},
                                {"type": "default", "value": None, "mask": None,
                                 "next_state": None}]
    states += [
        {"name": "parse_udp", "id": 2,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "udp"}]}],
         "transition_key": [_f("udp", "dport")],
         "transitions": [{"type": "hexstr", "value": hex(AGG_PORT), "mask": None,
                          "next_state": "parse_ns"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_ns", "id": 3,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ns"}]},
                        {"op": "extract", "parameters": [{"type": "regular", "value": "vals"}]}],
         "transition_key": [], "transitions": [{"type": "default", "value": None, "mask": None,
                                                "next_state": None}]},
    ]
    r["deparsers"][0]["order"] = ["ethernet", "ipv4", "udp", "ns", "vals"]
    size = 4096
    r["register_arrays"] = [{"name": f"r{i}", "id": i, "size": size, "bitwidth": 32}
                            for i in range(k)]
    r["register_arrays"] += [{"name": "bitmap", "id": k, "size": size, "bitwidth": 32},
                             {"name": "contrib", "id": k + 1, "size": size, "bitwidth": 8}]
    reg = lambda n: {"type": "register_array", "value": n}  # noqa: E731
    idx = _f("scalars", "idx")
    prims = [_assign(idx, _ex("&", _ex("|", _ex("<<", _f("ns", "slot"), _hx(1)),
                                       _ex("&", _f("ns", "round"), _hx(1))), _hx(0xFFFFFFFF))),
             {"op": "register_read", "parameters": [_f("scalars", "bm"), reg("bitmap"), idx]},
             {"op": "register_write", "parameters": [reg("bitmap"), idx,
                                                     _ex("|", _f("scalars", "bm"),
                                                         _f("scalars", "worker_bit"))]},
             {"op": "register_read", "parameters": [_f("scalars", "cnt"), reg("contrib"), idx]},
             _assign(_f("scalars", "cnt"), _ex("&", _ex("+", _f("scalars", "cnt"), _hx(1)),
                                               _hx(0xFF))),
             {"op": "register_write", "parameters": [reg("contrib"), idx, _f("scalars", "cnt")]}]
    for i in range(k):
        v = _f("vals", f"v{i}")
        prims += [{"op": "register_read", "parameters": [_f("scalars", "acc"), reg(f"r{i}"),
                                                          idx]},
                  _assign(v, _ex("&", _ex("+", _f("scalars", "acc"), v), _hx(0xFFFFFFFF))),
                  {"op": "register_write", "parameters": [reg(f"r{i}"), idx, v]}]
    prims.append(_assign(_f("standard_metadata", "mcast_grp"), _hx(1)))
    r["actions"] = [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "drop", "id": 1, "runtime_data": [], "primitives": [
            {"op": "mark_to_drop", "parameters": [{"type": "header",
                                                   "value": "standard_metadata"}]}]},
        {"name": "set_member", "id": 2, "runtime_data": [{"name": "bit", "bitwidth": 32}],
         "primitives": [_assign(_f("scalars", "worker_bit"),
                                {"type": "runtime_data", "value": 0})]},
        {"name": "aggregate", "id": 3, "runtime_data": [], "primitives": prims},
        {"name": "rewrite", "id": 4, "runtime_data": [{"name": "mac", "bitwidth": 48},
                                                      {"name": "ip", "bitwidth": 32}],
         "primitives": [_assign(_f("ethernet", "dstAddr"), {"type": "runtime_data", "value": 0}),
                        _assign(_f("ipv4", "dstAddr"), {"type": "runtime_data", "value": 1}),
                        _assign(_f("udp", "csum"), _hx(0))]},
    ]

    def tbl(name: str, tid: int, key: list[Any], actions: list[tuple[str, int]], nxt: Any,
            default: tuple[int, list[str]]) -> dict[str, Any]:
        return {"name": name, "id": tid, "key": key, "match_type": "exact", "type": "simple",
                "max_size": 1024, "with_counters": False, "support_timeout": False,
                "direct_meters": None, "action_ids": [a[1] for a in actions],
                "actions": [a[0] for a in actions], "base_default_next": nxt,
                "next_tables": {a[0]: nxt for a in actions},
                "default_entry": {"action_id": default[0], "action_const": False,
                                  "action_data": default[1], "action_entry_const": False}}
    r["pipelines"][0] = {
        "name": "ingress", "id": 0, "init_table": "node_0", "action_profiles": [],
        "tables": [
            tbl("member", 0, [{"match_type": "exact", "name": "src", "target": ["ipv4",
                                                                                "srcAddr"],
                               "mask": None}], [("set_member", 2), ("drop", 1)], "job",
                (2, ["0x1"])),
            tbl("job", 1, [{"match_type": "exact", "name": "job", "target": ["ns", "job_id"],
                            "mask": None}], [("aggregate", 3), ("drop", 1)], None, (3, [])),
        ],
        "conditionals": [{"name": "node_0", "id": 0, "expression": _ex(
            "d2b", None, _f("ns", "$valid$")), "true_next": "member", "false_next": None}]}
    r["pipelines"][1] = {
        "name": "egress", "id": 1, "init_table": "replica", "action_profiles": [],
        "conditionals": [],
        "tables": [tbl("replica", 2, [{"match_type": "exact", "name": "rid",
                                       "target": ["standard_metadata", "egress_rid"],
                                       "mask": None}],
                       [("rewrite", 4), ("NoAction", 0)], None,
                       (4, ["0x020000000001", "0x0a000001"]))]}
    return r


def agg_frame(k: int, src: str = "10.0.0.2") -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    given = {"msg_type": 1, "job_id": 7, "slot": 5}
    word = 0
    for name, bits in STANDIN_HEADER:
        word = word << bits | given.get(name, 0)
    hdr = word.to_bytes(sum(bits for _, bits in STANDIN_HEADER) // 8, "big")
    vals = np.arange(k, dtype=">u4").tobytes()
    return bytes(Ether(dst="02:00:00:00:00:fe", src="02:00:00:00:00:02") /
                 IP(src=src, dst="10.0.0.254") / UDP(sport=AGG_PORT, dport=AGG_PORT) /
                 (hdr + vals))


def router_frame() -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether(dst="02:00:00:00:00:fe", src="02:00:00:00:00:02") /
                 IP(src="10.1.0.2", dst="10.0.0.5") / UDP(sport=1, dport=2) / (b"r" * 64))


def netsum_traffic(k: int, workers: int, fuse: bool = True, native: bool | None = None
                   ) -> tuple[Device, list[tuple[int, bytes]]] | None:
    """netsum.p4 (built by netsum.build with netsum's compiler) configured with two jobs of
    `workers` members on the same 64 slots, and a round-robin stream of contributions, as
    workers send them: rounds 0 and 1 of every slot for job 3, then for job 4.  The stream can
    be replayed any number of times (here or through the daemon): each job finds the sets
    owned by the other, so its rounds 0 and 1 start fresh rounds again instead of being
    duplicates of finished ones.  `native`: None = as the daemon chooses (the native backend
    when it builds here), False = the Python path.  None when the program cannot be built.

    Configured as the controller does it: its job plan (netsum.controller.jobs) written
    through the switch's own P4Runtime service, in process (no gRPC)."""
    from p4.v1 import p4runtime_pb2 as pb

    from netsum.build import ensure_built
    from netsum.controller.jobs import place_job, plan_job
    from netsum.controller.slots import SlotRange
    from netsum.controller.topology import JobSpec, parse_topology
    from netsum.p4rt.entities import update
    from netsum.p4rt.schema import Schema, load_p4info
    from netsum.switch.p4rt.service import DeviceService
    from netsum.switch.pipeline import Pipeline
    from netsum.wire import DEST_ALL, MsgType, klog2
    from netsum.workers import wire

    try:
        json_path, info_path = ensure_built(k)
    except Exception as e:           # compiler missing or failing: fall back to the stand-in
        print(f"  (netsum.p4 unavailable: {type(e).__name__}: {str(e)[:120]})")
        return None

    class _Device(Device):           # the pipeline as asked (fuse=False: actions as emitted)
        @staticmethod
        def build_pipeline(config: bytes | str | dict[str, Any]) -> Pipeline:
            doc = json.loads(config) if isinstance(config, (bytes, str)) else config
            return Pipeline(doc, fuse=fuse, native=native)

    slots = 64
    service = ("02:00:00:00:00:fe", "10.0.0.254")
    hosts = [(f"02:00:00:00:{i >> 8:02x}:{i & 0xFF:02x}", f"10.0.{i >> 8}.{(i & 0xFF) + 1}",
              40000 + i) for i in range(workers)]
    topo = parse_topology(json.dumps({
        "switches": [{"name": "s1", "grpc_addr": "127.0.0.1:1", "device_id": 0,
                      "ports": list(range(1, workers + 1)), "slots": 2 * slots,
                      "service": {"mac": service[0], "ipv4": service[1]}}],
        "hosts": [{"name": f"h{i}", "mac": mac, "ipv4": ip, "udp_port": port, "switch": "s1",
                   "port": i + 1} for i, (mac, ip, port) in enumerate(hosts)]}))
    info = load_p4info(info_path)
    schema = Schema(info)
    dev = _Device()
    svc = DeviceService(dev)
    svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     pb.ForwardingPipelineConfig(p4info=info,
                                                 p4_device_config=json_path.read_bytes()))
    for job in (3, 4):
        spec = JobSpec(job, tuple(f"h{i}" for i in range(workers)), slots)
        plan = plan_job(topo, schema, spec, place_job(topo, spec)["s1"], SlotRange(0, slots))
        ups = [update(pb.Update.INSERT, e, schema) for e in (*plan.entries, plan.group)]
        refused = [msg for code, msg in svc.write(ups) if code]
        if refused:
            raise RuntimeError(f"job {job}: the switch refused {refused[0]}")
    to = wire.Endpoint.parse(*service)
    senders = [wire.Endpoint.parse(mac, ip, port) for mac, ip, port in hosts]
    values = np.arange(k, dtype=np.int32)

    def frame(i: int, job: int, slot: int, round_: int) -> bytes:
        head = wire.Header(msg_type=MsgType.DATA, flags=wire.Flags.NONE, job_id=job, slot=slot,
                           exp=130, count=0, round=round_, offset=0, workers=workers,
                           dest=DEST_ALL, klog2=klog2(k), length=1 << 20)
        return wire.build_frame(senders[i], to, wire.encode(head, values, k))

    frames = [(i + 1, frame(i, job, r % slots, r // slots))
              for job in (3, 4) for r in range(2 * slots) for i in range(workers)]
    return dev, frames


def make_device(kind: str, k: int, workers: int, json_path: Path | None) -> Device:
    dev = Device()
    if kind == "router":
        dev.install(Device.build_pipeline(ROUTER_JSON.read_bytes()))
        dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(  # type: ignore[union-attr]
            (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 2))))
        return dev
    cfg: Any = json_path.read_bytes() if json_path else standin_json(k)
    dev.install(Device.build_pipeline(cfg))
    if json_path is None:
        dev.pipeline.pre.mc_group_insert(  # type: ignore[union-attr]
            1, [Replica(p, p) for p in range(1, workers + 1)])
    return dev
