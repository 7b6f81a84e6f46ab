"""Register lanes (netsum/switch/lanes.py, netsum/switch/lanecode.py): random programs with lane runs of
random shape, run through the vectorised pipeline and through `fuse=False` (every primitive as
emitted, one lane at a time), must agree on every output frame, register, counter and stat.
Plus netsum.p4 at every K under a random stream, the runs that must be declined, out-of-range
indices, and registers read and written one array at a time through the fused storage."""
from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netsum.switch.device import Device
from netsum.switch.pipeline import Pipeline
from netsum.wire import K_SUPPORTED

ROUTER_JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
SCALARS = [("m0", 32), ("m1", 16), ("t0", 32), ("t1", 16)]
H = struct.Struct(">BHII")


def _fld(h: str, f: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, f]}


def _hx(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(v)}


def _ex(op: str, left: Any, right: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def _reg(name: str) -> dict[str, Any]:
    return {"type": "register_array", "value": name}


class Gen:
    """One random program: a lane run of `lanes` blocks over lane fields vals.v<i> and lane
    registers q<i> / p<i>, scalar primitives around it, sometimes a deliberate defect."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.lanes = rng.randrange(4, 13)
        self.width = rng.choice([32, 32, 16, 8])           # lane field width
        self.rwidth = rng.choice([32, 32, 16, 8])          # lane register width
        self.defect = rng.choice([None, None, None, "carry", "shared", "named", "shift"])

    def index(self) -> dict[str, Any]:
        rng = self.rng
        return rng.choice([_fld("h", "a"), _ex("&", _fld("h", "a"), _hx(7)),
                           _ex("+", _fld("h", "b"), _hx(1)), _hx(rng.randrange(10)),
                           {"type": "runtime_data", "value": 0}])

    def operand(self, lane: str, temps: list[str]) -> dict[str, Any]:
        rng = self.rng
        choices = [_fld("vals", lane), _hx(rng.randrange(1 << 33)), _fld("h", "c"),
                   _fld("scalars", "m0"), {"type": "runtime_data", "value": 0}]
        choices += [_fld("scalars", t) for t in temps]
        return rng.choice(choices)

    def expr(self, lane: str, temps: list[str], depth: int = 0) -> dict[str, Any]:
        rng = self.rng
        if depth > 2 or rng.random() < 0.3:
            return self.operand(lane, temps)
        op = rng.choice(["+", "-", "*", "&", "|", "^", "~", "<<", "+", "&"])
        if op == "~":
            return {"type": "expression", "value": {"op": "~", "left": None,
                                                    "right": self.expr(lane, temps, depth + 1)}}
        if op == "<<":
            return _ex("<<", self.expr(lane, temps, depth + 1), _hx(rng.choice([0, 1, 5, 40])))
        return _ex(op, self.expr(lane, temps, depth + 1), self.expr(lane, temps, depth + 1))

    def block_template(self) -> list[tuple[str, ...]]:
        rng = self.rng
        kinds = []
        temps: list[str] = []
        for _ in range(rng.randrange(1, 5)):
            k = rng.choice(["read_t", "read_v", "assign_v", "write_q", "write_p", "assign_t"])
            if k in ("read_t", "assign_t"):
                t = rng.choice(["t0", "t1"])
                kinds.append((k, t))
                temps.append(t)
            else:
                kinds.append((k,))
        if not any(k[0].startswith(("read", "write")) for k in kinds):
            kinds.append(("write_q",))
        return kinds

    def block(self, kinds: list[tuple[str, ...]], i: int, index: dict[str, Any],
              exprs: dict[int, Any]) -> list[dict[str, Any]]:
        lane, q, p = f"v{i}", f"q{i}", f"p{i}"
        out = []
        for n, k in enumerate(kinds):
            e = json.loads(json.dumps(exprs[n]).replace('"vals", "LANE"', f'"vals", "{lane}"'))
            if k[0] == "read_t":
                out.append({"op": "register_read", "parameters": [
                    _fld("scalars", k[1]), _reg(q), index]})
            elif k[0] == "read_v":
                out.append({"op": "register_read", "parameters": [
                    _fld("vals", lane), _reg(q), index]})
            elif k[0] == "assign_v":
                out.append({"op": "assign", "parameters": [_fld("vals", lane), e]})
            elif k[0] == "assign_t":
                out.append({"op": "assign", "parameters": [_fld("scalars", k[1]), e]})
            elif k[0] == "write_q":
                out.append({"op": "register_write", "parameters": [_reg(q), index, e]})
            else:
                reg = "shared" if self.defect == "shared" else p
                out.append({"op": "register_write", "parameters": [_reg(reg), index, e]})
        return out

    def program(self) -> dict[str, Any]:
        rng = self.rng
        kinds = self.block_template()
        index = self.index()
        exprs: dict[int, Any] = {}
        defined: list[str] = []
        for n, k in enumerate(kinds):
            # temporaries read only after their definition in the block, unless the defect
            # is a value carried from one lane to the next
            avail = list({"t0", "t1"}) if self.defect == "carry" else list(defined)
            exprs[n] = self.expr("LANE", avail)
            if self.defect == "shift" and n == 0:
                exprs[n] = _ex(">>", exprs[n], _hx(1))
            if k[0] in ("read_t", "assign_t"):
                defined.append(k[1])
        prims: list[dict[str, Any]] = []
        prims.append({"op": "assign", "parameters": [_fld("scalars", "m0"),
                                                    _ex("+", _fld("h", "d"), _hx(3))]})
        for i in range(self.lanes):
            prims += self.block(kinds, i, index, exprs)
        if self.defect == "named":      # a lane field read outside the run: no vector range
            prims.append({"op": "assign", "parameters": [_fld("h", "d"), _fld("vals", "v1")]})
        prims.append({"op": "assign", "parameters": [_fld("h", "c"), _fld("scalars", "t0")]})
        prims.append({"op": "assign", "parameters": [
            _fld("standard_metadata", "egress_spec"), _hx(1)]})
        return _wrap(prims, self.lanes, self.width, self.rwidth, rng.randrange(12))


def _wrap(prims: list[dict[str, Any]], lanes: int, width: int, rwidth: int,
          param: int) -> dict[str, Any]:
    router = json.loads(ROUTER_JSON.read_text())
    std = next(t for t in router["header_types"] if t["name"] == "standard_metadata")
    regs = [(f"q{i}", 8, rwidth) for i in range(lanes)] + \
        [(f"p{i}", 8, 32) for i in range(lanes)] + [("shared", 8, 32)]
    return {
        "header_types": [
            {"name": "scalars_0", "id": 0, "fields": [[n, w, False] for n, w in SCALARS]},
            std,
            {"name": "h_t", "id": 2, "fields": [["a", 8, False], ["b", 16, False],
                                                ["c", 32, False], ["d", 32, False]]},
            {"name": "vals_t", "id": 3, "fields": [["pre", 8, False]] +
             [[f"v{i}", width, False] for i in range(lanes)] + [["post", 16, False]]}],
        "headers": [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
             "metadata": True},
            {"name": "h", "id": 2, "header_type": "h_t", "metadata": False},
            {"name": "vals", "id": 3, "header_type": "vals_t", "metadata": False}],
        "errors": router["errors"],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0, "parser_ops": [
                {"op": "extract", "parameters": [{"type": "regular", "value": "h"}]},
                {"op": "extract", "parameters": [{"type": "regular", "value": "vals"}]}],
             "transition_key": [], "transitions": [
                {"type": "default", "value": None, "mask": None, "next_state": None}]}]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["h", "vals"]}],
        "register_arrays": [{"name": n, "id": i, "size": s, "bitwidth": w}
                            for i, (n, s, w) in enumerate(regs)],
        "counter_arrays": [],
        "actions": [{"name": "act", "id": 0, "runtime_data": [{"name": "p", "bitwidth": 16}],
                     "primitives": prims}],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "t", "conditionals": [], "tables": [{
                "name": "t", "id": 0, "key": [], "match_type": "exact", "type": "simple",
                "max_size": 1, "with_counters": False, "support_timeout": False,
                "direct_meters": None, "action_ids": [0], "actions": ["act"],
                "base_default_next": None, "next_tables": {"act": None},
                "default_entry": {"action_id": 0, "action_const": True,
                                  "action_data": [hex(param)], "action_entry_const": True}}]},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "conditionals": []}],
        "__meta__": {"version": [2, 18], "compiler": "test_switch_lanes"},
    }


def _pair(j: dict[str, Any]) -> tuple[Device, Device]:
    out = []
    for fuse in (False, True):
        d = Device(seed=5)
        d.install(Pipeline(json.loads(json.dumps(j)), fuse=fuse))
        out.append(d)
    return out[0], out[1]


def _state(pl: Pipeline) -> tuple[Any, ...]:
    return (tuple((n, tuple(int(x) for x in r.values)) for n, r in pl.registers.items()),
            tuple((tuple(c.packets), tuple(c.bytes)) for c in pl.counters.values()))


def _frame(rng: random.Random, lanes: int, width: int) -> bytes:
    small = [rng.randrange(12) if rng.random() < 0.8 else rng.randrange(1 << 8) for _ in "ab"]
    vals = b"".join(rng.getrandbits(width).to_bytes(width // 8, "big") for _ in range(lanes))
    frame = H.pack(small[0], small[1], rng.getrandbits(32), rng.getrandbits(32)) + \
        bytes([rng.randrange(256)]) + vals + b"\x12\x34"
    return frame if rng.random() < 0.9 else frame[:rng.randrange(len(frame))]


def test_random_lane_programs_agree_with_the_scalar_reference() -> None:
    vectorised, declined = 0, 0
    for seed in range(60):
        g = Gen(seed)
        ref, opt = _pair(g.program())
        assert ref.pipeline is not None and opt.pipeline is not None
        assert ref.pipeline.lanes.lanes_fused() == 0
        fused = opt.pipeline.lanes.lanes_fused()
        if g.defect is None:
            assert fused == g.lanes, seed           # a clean run is always taken
        if g.defect in ("carry", "named", "shared"):
            pass                                    # may or may not decline, must agree
        vectorised += fused > 0
        declined += fused == 0
        rng = random.Random(seed)
        for _ in range(25):
            frame = _frame(rng, g.lanes, g.width)
            assert ref.process(2, frame) == opt.process(2, frame), seed
            assert _state(ref.pipeline) == _state(opt.pipeline), seed
        assert ref.stats.as_dict() == opt.stats.as_dict(), seed
        assert opt.stats.internal_errors == 0, seed
    assert vectorised >= 30 and declined >= 5       # both paths really exercised


def _clean_run(lanes: int, op: str = "+") -> list[dict[str, Any]]:
    prims = []
    for i in range(lanes):    # v_i += q_i[a]; q_i[a] = v_i
        prims.append({"op": "register_read", "parameters": [
            _fld("scalars", "t0"), _reg(f"q{i}"), _fld("h", "a")]})
        prims.append({"op": "assign", "parameters": [_fld("vals", f"v{i}"), _ex(
            "&", _ex(op, _fld("vals", f"v{i}"), _fld("scalars", "t0")), _hx(0xFFFFFFFF))]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("vals", f"v{i}")]})
    return prims


@pytest.mark.parametrize("change, fused", [
    ("none", 6),
    ("named", 0),        # a lane field read outside the run: the header keeps its fields
    ("shift", 0),        # >> is not a ring operation
    ("index", 0),        # the run writes a field its index reads
    ("order", 0),        # another action names the registers in a different column order
])
def test_what_is_vectorised(change: str, fused: int) -> None:
    prims = _clean_run(6, ">>" if change == "shift" else "+")
    extra: list[dict[str, Any]] = []
    if change == "named":
        prims.append({"op": "assign", "parameters": [_fld("h", "d"), _fld("vals", "v1")]})
    if change == "index":
        for i in range(6):
            prims[3 * i + 1] = {"op": "assign", "parameters": [_fld("h", "a"),
                                                               _fld("vals", f"v{i}")]}
    j = _wrap(prims + [{"op": "assign", "parameters": [
        _fld("standard_metadata", "egress_spec"), _hx(1)]}], 6, 32, 32, 0)
    if change == "order":
        other = _clean_run(6)
        blocks = [other[i:i + 3] for i in range(0, 18, 3)]
        blocks[0], blocks[1] = blocks[1], blocks[0]
        extra = [p for b in blocks for p in b]
        j["actions"].append({"name": "act2", "id": 1, "runtime_data": [], "primitives": extra})
    ref, opt = _pair(j)
    assert opt.pipeline is not None and opt.pipeline.lanes.lanes_fused() == fused
    assert (opt.pipeline.layout.headers["vals"].vector is not None) == bool(fused)
    rng = random.Random(3)
    for _ in range(20):
        f = _frame(rng, 6, 32)
        assert ref.process(1, f) == opt.process(1, f)
    assert ref.pipeline is not None and _state(ref.pipeline) == _state(opt.pipeline)


def test_carried_value_declines() -> None:
    prims = []
    for i in range(6):      # acc accumulates across lanes: lane i reads lane i-1's value
        prims.append({"op": "assign", "parameters": [
            _fld("scalars", "t0"), _ex("&", _ex("+", _fld("scalars", "t0"), _fld("vals", f"v{i}")),
                                      _hx(0xFFFFFFFF))]})
        prims.append({"op": "register_write", "parameters": [
            _reg(f"q{i}"), _fld("h", "a"), _fld("scalars", "t0")]})
    ref, opt = _pair(_wrap(prims, 6, 32, 32, 0))
    assert opt.pipeline is not None and opt.pipeline.lanes.lanes_fused() == 0
    rng = random.Random(1)
    for _ in range(20):
        f = _frame(rng, 6, 32)
        assert ref.process(1, f) == opt.process(1, f)
    assert ref.pipeline is not None and _state(ref.pipeline) == _state(opt.pipeline)


def _netsum_pair(k: int) -> list[Any]:
    import p4helpers as helpers
    cfg = helpers.netsum_config(k)
    switches = []
    for fuse in (False, True):
        sw = helpers.NetsumSwitch(cfg, pipeline=Pipeline(json.loads(cfg), fuse=fuse))
        sw.add_job(3, [helpers.worker_host(i) for i in range(4)], num_slots=8)
        switches.append(sw)
    return switches


@pytest.mark.parametrize("k", [k for k in K_SUPPORTED if k in (32, 256)])
def test_netsum_p4_random_stream_at_k(k: int) -> None:
    import p4helpers as helpers
    switches = _netsum_pair(k)
    fused = switches[1].pipeline.lanes.lanes_fused()
    assert fused >= 5 * k and fused % k == 0     # every lane action, all K lanes
    assert switches[1].pipeline.layout.headers["values"].vector is not None
    rng = random.Random(k)
    hosts = [helpers.worker_host(i) for i in range(5)]           # the fifth is no member
    extremes = [-(1 << 31), (1 << 31) - 1, -1, 0, 1]
    for _ in range(300):
        h = rng.choice(hosts)
        vals = [rng.choice(extremes) if rng.random() < 0.3 else
                rng.randrange(-(1 << 31), 1 << 31) for _ in range(k)]
        frame = helpers.netsum_frame(h, job_id=rng.choice([3, 3, 3, 4]), slot=rng.randrange(10),
                                     round=rng.randrange(4), values=vals, exp=rng.randrange(256),
                                     flags=rng.choice([0, 1]))
        if rng.random() < 0.1:
            frame = frame[:rng.randrange(len(frame))]
        outs = [sw.device.process(h.port, frame) for sw in switches]
        assert outs[0] == outs[1]
    assert _state(switches[0].pipeline) == _state(switches[1].pipeline)
    assert switches[0].device.stats.as_dict() == switches[1].device.stats.as_dict()


def test_planning_netsum_p4_visits_each_lane_a_few_times(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The planner's work grows with K, not K^2: netsum.p4 at K=256 has 7 runs of K lanes;
    each needs one successful check of its K lanes (2,307 lanes visited in all), and the
    candidate just before a run (a statement of the run's shape, whose first two lanes make
    no family) must be declined without a check at every shorter length, which visited
    ~K^2/2 lanes per action (287k here; 20 s at K=2048, on every switch start)."""
    import p4helpers as helpers
    from netsum.switch import lanes
    k = 256
    visited = [0]
    check = lanes._Finder._check

    def counting(self: Any, aidx: int, prims: Any, s: int, m: int, lane_binds: Any,
                 pat: Any) -> Any:
        visited[0] += len(lane_binds)
        return check(self, aidx, prims, s, m, lane_binds, pat)
    monkeypatch.setattr(lanes._Finder, "_check", counting)
    pl = Pipeline(json.loads(helpers.netsum_config(k)))
    assert pl.lanes.lanes_fused() >= 5 * k                    # the runs are still found
    assert visited[0] <= 20 * k, visited[0]


def test_fused_registers_read_and_write_one_array_at_a_time() -> None:
    """The control plane sees each lane register as its own array, and packets see what it
    writes: a write to val003 through RegisterArray lands in column 3 of the fused array."""
    import p4helpers as helpers
    sw = _netsum_pair(32)[1]
    regs = sw.pipeline.registers
    r3 = regs["NetsumIngress.val003"]
    assert r3.fused and isinstance(r3.values, np.ndarray)
    hosts = [helpers.worker_host(i) for i in range(4)]
    for h in hosts[:3]:
        sw.device.process(h.port, helpers.netsum_frame(h, job_id=3, slot=2, values=[5] * 32))
    idx = 2 * 2                       # (slot_base 0 + slot 2) * 2 + set 0
    assert r3.read(idx) == 15 and type(r3.read(idx)) is int
    r3.write(idx, 0xFFFFFFFF)         # -1: the last contribution wraps it to 4
    out = sw.device.process(hosts[3].port, helpers.netsum_frame(hosts[3], job_id=3, slot=2,
                                                                 values=[5] * 32))
    vals = helpers.parse_frame(out[0][1], k=32).values
    assert vals[3] == 4 and vals[2] == vals[4] == 20
    assert regs["NetsumIngress.val004"].read(idx) == 20
    r3.reset()
    assert r3.read(idx) == 0 and regs["NetsumIngress.val004"].read(idx) == 20
