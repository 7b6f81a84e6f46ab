"""The native backend's lane loops (netsum/switch/native/cvec.py) against hand-worked results
and the Python path: each lane run lanes.py accepts becomes one loop over the packet's value
bytes and the fused register row; a run that declines, an index outside the arrays, a
temporary left after the run, masking to narrower destinations, and multicast copies whose
egress rewrites the values each from the original bytes.

The expected values are worked out here from the programs' primitives (bmv2 semantics:
unbounded arithmetic truncated to the destination's width on every write; an out-of-range
register access is skipped and counted), not from either switch."""
from __future__ import annotations

import json
import random
import struct
from typing import Any

import pytest

from netsum.switch.device import Device
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline
from netsum.switch.replication import Replica
from test_switch_lanes import H, _ex, _fld, _hx, _reg, _wrap

WHY = build.available()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
LANES = 6


def _devices(j: dict[str, Any]) -> tuple[Device, Device]:
    """(Python path, native) of one program."""
    out = []
    for native in (False, True):
        d = Device(seed=1)
        d.install(Pipeline(json.loads(json.dumps(j)), native=native))
        out.append(d)
    py, nat = out
    assert nat.pipeline is not None and nat.pipeline.native is not None, \
        nat.pipeline and nat.pipeline.native_status
    return py, nat


def _loops(dev: Device) -> int:
    """Lane loop functions in the native module's source."""
    assert dev.pipeline is not None and dev.pipeline.native is not None
    return int(dev.pipeline.native.prog.source.count("static VEC_FN void"))


def _frame(a: int, c: int, vals: list[int], width: int) -> bytes:
    return H.pack(a, 0, c, 0) + b"\x07" + \
        b"".join(v.to_bytes(width // 8, "big") for v in vals) + b"\x12\x34"


def _vals(frame: bytes, width: int, n: int = LANES) -> list[int]:
    at = H.size + 1
    wb = width // 8
    return [int.from_bytes(frame[at + i * wb:at + (i + 1) * wb], "big") for i in range(n)]


def _accumulate(lanes: int, mask: bool) -> list[dict[str, Any]]:
    """t0 = q_i[h.a]; v_i = v_i + t0 (masked by p4c, or left to the write); q_i[h.a] = v_i;
    then h.c = t0 (the temporary after the run: the last lane's)."""
    prims = []
    for i in range(lanes):
        s = _ex("+", _fld("vals", f"v{i}"), _fld("scalars", "t0"))
        prims.append({"op": "register_read", "parameters": [
            _fld("scalars", "t0"), _reg(f"q{i}"), _fld("h", "a")]})
        prims.append({"op": "assign", "parameters": [
            _fld("vals", f"v{i}"), _ex("&", s, _hx(0xFFFF)) if mask else s]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("vals", f"v{i}")]})
    return prims + [
        {"op": "assign", "parameters": [_fld("h", "c"), _fld("scalars", "t0")]},
        {"op": "assign", "parameters": [_fld("standard_metadata", "egress_spec"), _hx(1)]}]


@pytest.mark.parametrize("mask", [False, True])
def test_a_run_accumulates_masks_and_leaves_the_last_lanes_temporary(mask: bool) -> None:
    """16-bit lane fields, 8-bit lane registers: v' = (v + q) mod 2^16, q' = v' mod 2^8 (the
    write truncates to the register's width), h.c = the last lane's q before the packet."""
    py, nat = _devices(_wrap(_accumulate(LANES, mask), LANES, 16, 8, 0))
    assert _loops(nat) == 1
    regs = {i: [0] * 8 for i in range(LANES)}       # hand-kept: q_i[a]
    rng = random.Random(4)
    for n in range(40):
        a = rng.randrange(8)
        vals = [rng.choice([0, 0xFFFF, 0xFF, 0x1FF]) if rng.random() < 0.3 else
                rng.randrange(1 << 16) for _ in range(LANES)]
        want_vals = [(v + regs[i][a]) & 0xFFFF for i, v in enumerate(vals)]
        want_c = regs[LANES - 1][a]
        for i in range(LANES):
            regs[i][a] = want_vals[i] & 0xFF
        frame = _frame(a, 0xABCDEF01, vals, 16)
        got = nat.process(2, frame)
        assert got == py.process(2, frame), n
        assert len(got) == 1 and got[0][0] == 1
        out = got[0][1]
        assert _vals(out, 16) == want_vals, n
        assert struct.unpack_from(">I", out, 3)[0] == want_c, n
        assert out[:3] == frame[:3] and out[H.size] == 7 and out[-2:] == b"\x12\x34"
    for d in (py, nat):
        assert d.pipeline is not None
        assert [d.pipeline.registers[f"q{i}"].read_range(0, 8) for i in range(LANES)] == \
            [regs[i] for i in range(LANES)]
        assert d.stats.register_oob == 0 and d.stats.internal_errors == 0


def test_a_narrow_temporary_is_masked_in_every_lane() -> None:
    """32-bit lanes, a 16-bit temporary: t1 = v_i * 3 + 0x10001 keeps its low 16 bits, then
    v_i = t1 and q_i[a] = t1; after the run h.c = the last lane's t1."""
    prims = []
    for i in range(LANES):
        prims.append({"op": "assign", "parameters": [_fld("scalars", "t1"), _ex(
            "+", _ex("*", _fld("vals", f"v{i}"), _hx(3)), _hx(0x10001))]})
        prims.append({"op": "assign", "parameters": [_fld("vals", f"v{i}"),
                                                     _fld("scalars", "t1")]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("scalars", "t1")]})
    prims += [{"op": "assign", "parameters": [_fld("h", "c"), _fld("scalars", "t1")]},
              {"op": "assign", "parameters": [_fld("standard_metadata", "egress_spec"),
                                              _hx(1)]}]
    py, nat = _devices(_wrap(prims, LANES, 32, 32, 0))
    assert _loops(nat) == 1
    vals = [0, 1, 0xFFFF, 0x5555, 0xFFFFFFFF, 0x12345678]
    want = [(3 * v + 0x10001) & 0xFFFF for v in vals]
    frame = _frame(6, 0, vals, 32)
    got = nat.process(2, frame)
    assert got == py.process(2, frame)
    assert _vals(got[0][1], 32) == want
    assert struct.unpack_from(">I", got[0][1], 3)[0] == want[-1]
    for d in (py, nat):
        assert d.pipeline is not None
        assert [d.pipeline.registers[f"q{i}"].read(6) for i in range(LANES)] == want


def test_an_index_outside_the_arrays_runs_the_scalar_code_and_counts_skips() -> None:
    """h.a >= 8 (the arrays' size): every access is skipped (2 per lane, counted), t0 keeps
    its per-packet 0, so the values go out unchanged and h.c = 0; in range again, the cells
    written before are still there."""
    py, nat = _devices(_wrap(_accumulate(LANES, True), LANES, 16, 8, 0))
    assert _loops(nat) == 1
    first = _frame(3, 0, [10, 20, 30, 40, 50, 60], 16)
    for d in (py, nat):
        d.process(2, first)
    for n, a in enumerate([8, 9, 200, 255]):
        vals = [1000 + n, 2, 3, 4, 5, 0xFFFF]
        frame = _frame(a, 0x55555555, vals, 16)
        got = nat.process(2, frame)
        assert got == py.process(2, frame)
        assert _vals(got[0][1], 16) == vals
        assert struct.unpack_from(">I", got[0][1], 3)[0] == 0
    for d in (py, nat):
        assert d.stats.register_oob == 4 * 2 * LANES
    got = nat.process(2, _frame(3, 0, [1] * LANES, 16))
    assert _vals(got[0][1], 16) == [11, 21, 31, 41, 51, 61]
    assert struct.unpack_from(">I", got[0][1], 3)[0] == 60


def test_a_run_that_reads_another_runs_lane_field_declines_on_both_paths() -> None:
    """Two runs over v0..v3 and v4..v7 of one header, the second adding v0 (a field of the
    first run's lanes, the same in each of its blocks) to each of its lanes: no vector range
    may hold v0 then, or the second run would read a field never parsed.  Worked by hand:
    v_i += q_i for the first four lanes, v_i += q_i + v0' for the others (v0' the new v0)."""
    n = 8
    prims = []
    for i in range(n):
        s = _ex("+", _fld("vals", f"v{i}"), _fld("scalars", "t0"))
        if i >= 4:
            s = _ex("+", s, _fld("vals", "v0"))
        prims.append({"op": "register_read", "parameters": [
            _fld("scalars", "t0"), _reg(f"q{i}"), _fld("h", "a")]})
        prims.append({"op": "assign", "parameters": [_fld("vals", f"v{i}"),
                                                     _ex("&", s, _hx(0xFFFFFFFF))]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("vals", f"v{i}")]})
    prims.append({"op": "assign", "parameters": [_fld("standard_metadata", "egress_spec"),
                                                 _hx(1)]})
    j = _wrap(prims, n, 32, 32, 0)
    py, nat = _devices(j)
    assert nat.pipeline is not None and nat.pipeline.layout.headers["vals"].vector is None
    assert _loops(nat) == 0
    regs = [0] * n
    rng = random.Random(9)
    for k in range(20):
        vals = [rng.randrange(1 << 32) for _ in range(n)]
        want: list[int] = []
        for i, v in enumerate(vals):
            x = (v + regs[i] + (want[0] if i >= 4 else 0)) & 0xFFFFFFFF
            want.append(x)
            regs[i] = x
        frame = _frame(0, 0, vals, 32)
        got = nat.process(2, frame)
        assert got == py.process(2, frame), k
        assert _vals(got[0][1], 32, n) == want, k


def test_a_carried_value_declines_and_runs_as_written() -> None:
    """t0 accumulates across the lanes (lane i reads lane i-1's t0): not a lane run; the
    native switch runs the scalar code: q_i = v_0 + ... + v_i (mod 2^32)."""
    prims = []
    for i in range(LANES):
        prims.append({"op": "assign", "parameters": [_fld("scalars", "t0"), _ex(
            "&", _ex("+", _fld("scalars", "t0"), _fld("vals", f"v{i}")), _hx(0xFFFFFFFF))]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("scalars", "t0")]})
    prims.append({"op": "assign", "parameters": [_fld("standard_metadata", "egress_spec"),
                                                 _hx(1)]})
    py, nat = _devices(_wrap(prims, LANES, 32, 32, 0))
    assert nat.pipeline is not None and nat.pipeline.lanes.lanes_fused() == 0
    assert _loops(nat) == 0
    vals = [0xFFFFFFFF, 2, 3, 0x80000000, 0x80000000, 7]
    frame = _frame(5, 0, vals, 32)
    assert nat.process(2, frame) == py.process(2, frame)
    acc, want = 0, []
    for v in vals:
        acc = (acc + v) & 0xFFFFFFFF
        want.append(acc)
    for d in (py, nat):
        assert d.pipeline is not None
        assert [d.pipeline.registers[f"q{i}"].read(5) for i in range(LANES)] == want


def _egress_program() -> dict[str, Any]:
    """Ingress multicasts to group 1; egress runs a lane run per copy: t0 = q_i[h.a];
    v_i = v_i + t0 + egress_port."""
    ing = [{"op": "assign", "parameters": [_fld("standard_metadata", "mcast_grp"), _hx(1)]}]
    eg = []
    for i in range(LANES):
        eg.append({"op": "register_read", "parameters": [
            _fld("scalars", "t0"), _reg(f"q{i}"), _fld("h", "a")]})
        eg.append({"op": "assign", "parameters": [_fld("vals", f"v{i}"), _ex("&", _ex(
            "+", _ex("+", _fld("vals", f"v{i}"), _fld("scalars", "t0")),
            _fld("standard_metadata", "egress_port")), _hx(0xFFFFFFFF))]})
    j = _wrap(ing, LANES, 32, 32, 0)
    j["actions"].append({"name": "eg", "id": 1, "runtime_data": [], "primitives": eg})
    j["pipelines"][1].update(init_table="e", tables=[{
        "name": "e", "id": 1, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": False, "support_timeout": False,
        "direct_meters": None, "action_ids": [1], "actions": ["eg"],
        "base_default_next": None, "next_tables": {"eg": None},
        "default_entry": {"action_id": 1, "action_const": True, "action_data": [],
                          "action_entry_const": True}}])
    return j


def test_multicast_copies_each_rewrite_the_original_values_in_egress() -> None:
    """Three copies (ports 3, 5, 9): each goes out with v_i + q_i[a] + its port, computed from
    the frame's values, not from another copy's."""
    py, nat = _devices(_egress_program())
    assert _loops(nat) == 1
    q = [0, 100, 0xFFFFFFFF, 7, 0, 1 << 31]
    for d in (py, nat):
        assert d.pipeline is not None
        d.pipeline.pre.mc_group_insert(1, [Replica(p, p) for p in (3, 5, 9)])
        for i, v in enumerate(q):
            d.pipeline.registers[f"q{i}"].write(2, v)
    vals = [1, 2, 3, 0xFFFFFFFF, 0x7FFFFFFF, 0]
    frame = _frame(2, 0, vals, 32)
    got = nat.process(4, frame)
    assert got == py.process(4, frame)
    assert [p for p, _f in got] == [3, 5, 9]
    for port, out in got:
        assert _vals(out, 32) == [(v + q[i] + port) & 0xFFFFFFFF for i, v in enumerate(vals)]


@pytest.mark.parametrize("k", [32, 256, pytest.param(1024, marks=pytest.mark.slow)])
def test_netsum_p4_aggregates_through_the_lane_loops(k: int) -> None:
    """netsum.p4 at K: every lane run is a loop; four members' contributions of one slot
    come back as their sum wrapped to int32, from the native and the Python switch alike."""
    import p4helpers as helpers
    from test_switch_native import _netsum

    py, nat = _netsum(k, False), _netsum(k, True)
    assert nat.pipeline.native is not None, nat.pipeline.native_status
    runs = sum(len(r) for r in nat.pipeline.lanes.runs.values())
    assert runs >= 5 and _loops(nat.device) == runs
    assert "for (long long _rl" not in nat.pipeline.native.prog.source.split(
        "static void parse")[1].split("static Py_ssize_t deparse")[0]   # values not parsed
    rng = random.Random(k)
    hosts = [helpers.worker_host(i) for i in range(4)]
    for slot, rnd in ((0, 0), (5, 0), (0, 1)):
        contrib = [[rng.choice([-(1 << 31), (1 << 31) - 1, -1]) if rng.random() < 0.2 else
                    rng.randrange(-(1 << 31), 1 << 31) for _ in range(k)] for _h in hosts]
        want = [helpers.wrap32(sum(col)) for col in zip(*contrib)]
        outs = []
        for h, vals in zip(hosts, contrib):
            frame = helpers.netsum_frame(h, job_id=3, slot=slot, round=rnd, values=vals)
            got = nat.device.process(h.port, frame)
            assert got == py.device.process(h.port, frame)
            outs += got
        assert len(outs) == 4, (slot, rnd)
        for _port, out in outs:
            assert list(helpers.parse_frame(out, k).values) == want
    assert nat.device.stats.internal_errors == 0
