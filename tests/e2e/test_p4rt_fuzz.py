"""Write fuzz: thousands of random and malformed WriteRequests against a live server.

An independent model of l2_mcast's `dmac` table, its default action and the multicast groups
predicts which updates must succeed; after every batch the test checks each update's outcome
and that the server's state (read back over P4Runtime) equals the model's.  Updates whose
outcome the model does not predict (random bytes decoding to other entities) are still sent:
they must not crash the server nor touch the modelled state.

Size: NETSUM_FUZZ_EXAMPLES (default 800) batches of 5 to 30 updates: about 5000 updates, ~10 s.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from netsum.switch.device import Device  # noqa: E402
from netsum.switch.p4rt import P4RuntimeServer  # noqa: E402
from helpers import p4rt_client  # noqa: E402
from netsum.p4rt.client import SwitchClient  # noqa: E402
from netsum.p4rt.errors import ClientError  # noqa: E402

DMAC, ACL, REWRITE = 36472220, 43605182, 38207029
FORWARD, FLOOD, NOACTION, SET_VLAN = 25122418, 17556812, 21257015, 23871574
#: action id -> parameter widths (id 1..n), as the P4Info says
DMAC_ACTIONS = {FORWARD: (9,), FLOOD: (16,), NOACTION: ()}
EXAMPLES = int(os.environ.get("NETSUM_FUZZ_EXAMPLES", "800"))


@dataclass
class Model:
    entries: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    default: tuple[int, tuple[int, ...]] = (NOACTION, ())
    groups: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)


# ---------------------------------------------------------------- strategies

def value_bytes(max_value: int) -> st.SearchStrategy[bytes]:
    """Canonical, padded, empty and too-wide encodings of small values."""
    small = st.integers(0, 3).flatmap(
        lambda v: st.integers(0, 7).map(lambda pad: v.to_bytes(max(1, (v.bit_length() + 7) // 8)
                                                               + pad, "big")))
    return st.one_of(small, small, small, st.just(b""), st.binary(min_size=1, max_size=8),
                     st.just((max_value + 1).to_bytes(8, "big")))


@st.composite
def table_entry(draw: st.DrawFn) -> pb.TableEntry:
    te = pb.TableEntry(table_id=draw(st.sampled_from([DMAC] * 8 + [0, 1, ACL])))
    te.is_default_action = draw(st.booleans()) and draw(st.booleans())
    for _ in range(draw(st.sampled_from([1] * 6 + [0, 2]))):
        m = te.match.add(field_id=draw(st.sampled_from([1] * 8 + [0, 2])))
        kind = draw(st.sampled_from(["exact"] * 8 + ["ternary", "lpm"]))
        if kind == "exact":
            m.exact.value = draw(value_bytes((1 << 48) - 1))
        elif kind == "ternary":
            m.ternary.value, m.ternary.mask = b"\x01", b"\x01"
        else:
            m.lpm.value, m.lpm.prefix_len = b"\x01", 48
    te.priority = draw(st.sampled_from([0] * 8 + [1, -1]))
    if draw(st.integers(0, 9)):
        te.action.action.action_id = draw(st.sampled_from(
            [FORWARD, FORWARD, FLOOD, FLOOD, NOACTION, SET_VLAN, 0, 99]))
        for _ in range(draw(st.sampled_from([1] * 6 + [0, 2]))):
            te.action.action.params.add(param_id=draw(st.sampled_from([1] * 6 + [0, 2])),
                                        value=draw(value_bytes(1 << 16)))
    return te


@st.composite
def good_entry(draw: st.DrawFn) -> pb.TableEntry:
    """A well-formed dmac entry on a small key space (so inserts, modifies and deletes collide)."""
    te = pb.TableEntry(table_id=DMAC)
    key = draw(st.integers(0, 15))
    te.match.add(field_id=1).exact.value = key.to_bytes(draw(st.integers(1, 6)), "big")
    action = draw(st.sampled_from([FORWARD, FLOOD, NOACTION]))
    te.action.action.action_id = action
    for i, width in enumerate(DMAC_ACTIONS[action], 1):
        te.action.action.params.add(param_id=i, value=draw(st.integers(0, (1 << width) - 1))
                                    .to_bytes(2, "big"))
    return te


@st.composite
def group(draw: st.DrawFn) -> pb.PacketReplicationEngineEntry:
    pre = pb.PacketReplicationEngineEntry()
    g = pre.multicast_group_entry
    g.multicast_group_id = draw(st.sampled_from([1, 2, 3, 1, 2, 3, 0, 32768]))
    for _ in range(draw(st.integers(0, 3))):
        g.replicas.add(egress_port=draw(st.sampled_from([1, 2, 3, 600])),
                       instance=draw(st.integers(0, 2)))
    return pre


@st.composite
def any_update(draw: st.DrawFn) -> pb.Update:
    u = pb.Update(type=draw(st.sampled_from([1] * 6 + [2] * 3 + [3] * 3 + [0, 9])))
    kind = draw(st.sampled_from(["good"] * 6 + ["table"] * 4 + ["group"] * 3 + ["default"] * 2
                                + ["empty", "bytes"]))
    if kind in ("good", "default"):
        te = draw(good_entry())
        if kind == "default":
            te.ClearField("match")
            te.is_default_action = True
        u.entity.table_entry.CopyFrom(te)
    elif kind == "table":
        u.entity.table_entry.CopyFrom(draw(table_entry()))
    elif kind == "group":
        u.entity.packet_replication_engine_entry.CopyFrom(draw(group()))
    elif kind == "bytes":
        try:
            u.entity.MergeFromString(draw(st.binary(max_size=40)))
        except DecodeError:
            pass
    return u


# ---------------------------------------------------------------- the model

def fits(data: bytes, width: int) -> bool:
    return bool(data) and int.from_bytes(data, "big") < (1 << width)


def action_ok(te: pb.TableEntry) -> tuple[int, tuple[int, ...]] | None:
    if te.action.WhichOneof("type") != "action":
        return None
    widths = DMAC_ACTIONS.get(te.action.action.action_id)
    if widths is None:
        return None
    params = list(te.action.action.params)
    if sorted(p.param_id for p in params) != list(range(1, len(widths) + 1)):
        return None
    values = [0] * len(widths)
    for p in params:
        if not fits(p.value, widths[p.param_id - 1]):
            return None
        values[p.param_id - 1] = int.from_bytes(p.value, "big")
    return te.action.action.action_id, tuple(values)


def predict(model: Model, u: pb.Update) -> bool | None:
    """True/False: must succeed/fail (and the model is updated); None: not predicted."""
    kind = u.entity.WhichOneof("entity")
    if kind == "table_entry":
        te = u.entity.table_entry
        if te.table_id in (ACL, REWRITE):
            return None                                # other tables: not modelled
        if u.type not in (1, 2, 3) or te.table_id != DMAC:
            return False
        if te.is_default_action:
            if u.type != 2 or te.match or te.priority:
                return False
            if not te.HasField("action"):
                # P4Runtime 9.1.4: a MODIFY without an action resets the program's default
                model.default = (NOACTION, ())
                return True
            call = action_ok(te)
            if call is None:
                return False
            model.default = call
            return True
        if len(te.match) != 1 or te.match[0].field_id != 1 or \
                te.match[0].WhichOneof("field_match_type") != "exact" or te.priority != 0 or \
                not fits(te.match[0].exact.value, 48):
            return False
        key = int.from_bytes(te.match[0].exact.value, "big")
        if u.type == 3:
            return model.entries.pop(key, None) is not None
        call = action_ok(te)
        if call is None or (u.type == 1) == (key in model.entries):
            return False
        model.entries[key] = call
        return True
    if kind == "packet_replication_engine_entry":
        if u.entity.packet_replication_engine_entry.WhichOneof("type") != "multicast_group_entry":
            return None
        g = u.entity.packet_replication_engine_entry.multicast_group_entry
        if u.type not in (1, 2, 3) or not 1 <= g.multicast_group_id <= 32767:
            return False
        mgid = g.multicast_group_id
        if u.type == 3:
            return model.groups.pop(mgid, None) is not None
        reps = tuple((r.egress_port if r.WhichOneof("port_kind") != "port"
                      else int.from_bytes(r.port, "big"), r.instance) for r in g.replicas)
        if any(r.WhichOneof("port_kind") is None for r in g.replicas) or \
                len(set(reps)) != len(reps) or any(p > 511 for p, _ in reps) or \
                (u.type == 1) == (mgid in model.groups):
            return False
        model.groups[mgid] = reps
        return True
    if kind is None:
        return False
    return None


def server_state(c: SwitchClient) -> Model:
    out = Model()
    dmac = pb.Entity()
    dmac.table_entry.table_id = DMAC
    default = pb.Entity()
    default.table_entry.table_id = DMAC
    default.table_entry.is_default_action = True
    groups = pb.Entity()
    groups.packet_replication_engine_entry.multicast_group_entry.SetInParent()
    for e in c.read([dmac, default, groups]):
        if e.HasField("table_entry"):
            te = e.table_entry
            call = (te.action.action.action_id,
                    tuple(int.from_bytes(p.value, "big") for p in te.action.action.params))
            if te.is_default_action:
                out.default = call
            else:
                out.entries[int.from_bytes(te.match[0].exact.value, "big")] = call
        else:
            g = e.packet_replication_engine_entry.multicast_group_entry
            out.groups[g.multicast_group_id] = tuple((r.egress_port, r.instance)
                                                     for r in g.replicas)
    return out


@pytest.fixture(scope="module")
def live(request: pytest.FixtureRequest) -> Iterator[SwitchClient]:
    fixtures: Path = request.getfixturevalue("p4c_fixtures")
    dev = Device(device_id=0)
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    c = p4rt_client(f"127.0.0.1:{srv.port}", 0, election_id=1)
    try:
        c.connect()
        info = text_format.Parse((fixtures / "l2_mcast.p4info.txtpb").read_text(),
                                 p4info_pb2.P4Info())
        c.set_pipeline(info, (fixtures / "l2_mcast.json").read_bytes())
        yield c
    finally:
        c.close()
        srv.stop(None)


@pytest.mark.slow
def test_write_fuzz_keeps_server_up_and_state_consistent(live: SwitchClient) -> None:
    model = Model()
    stats = {"ok": 0, "err": 0, "unpredicted": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(updates=st.lists(any_update(), min_size=5, max_size=30),
           atomicity=st.sampled_from([0] * 12 + [1, 2]))
    def batch(updates: list[pb.Update], atomicity: int) -> None:
        if atomicity:
            with pytest.raises(ClientError) as err:
                live.write(updates, atomicity=atomicity)
            assert err.value.code == "UNIMPLEMENTED"
        else:
            expected = [predict(model, u) for u in updates]
            try:
                live.write(updates)
                got = [True] * len(updates)
            except ClientError as exc:
                assert exc.code == "UNKNOWN", exc
                errs = exc.statuses
                assert len(errs) == len(updates)
                assert all(e.message for e in errs if e.code)
                assert all(e.code != 13 for e in errs), [e for e in errs if e.code == 13]
                got = [e.code == 0 for e in errs]
            for u, want, have in zip(updates, expected, got):
                if want is None:
                    stats["unpredicted"] += 1
                    continue
                stats["ok" if have else "err"] += 1
                assert want == have, f"expected {'success' if want else 'failure'} for {u}"
        assert server_state(live) == model

    batch()
    # The generator must exercise both outcomes, or the test proves little.
    assert stats["ok"] > EXAMPLES // 2 and stats["err"] > EXAMPLES // 2, stats
    print("fuzz outcomes:", stats)
