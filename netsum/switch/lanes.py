"""Register lanes: runs of identical register read-modify-write statements over many register
arrays with one index, executed as one numpy operation on a fused 2-D array.

An aggregation program spells its K value lanes out one by one (`val000.read(acc, idx);
hdr.v000 = hdr.v000 + acc; val000.write(idx, hdr.v000); val001...`): K copies of one block of
primitives that differ only in which register array and which header field they name.  This
module finds such runs in the BMv2 JSON at load time, knowing nothing of aggregation:

- A *run* is n >= MIN_LANES consecutive blocks of m primitives (assign, register_read,
  register_write) that are equal up to the register arrays and fields they name.  A name that
  differs between blocks is a *lane family*: registers must be distinct arrays of one size and
  width; fields must be consecutive fields of one header, of one width.  Every register access
  of the run uses the same index expression, which reads nothing the run writes.
- A field that is the same in every block is either read-only in the run (a broadcast scalar)
  or written before it is read in each block (a lane temporary; after the run it holds the
  last lane's value, as the sequential code leaves it).  Anything else (a value carried from
  one lane to the next, a register shared by all lanes, control flow, another primitive, an
  operator outside the ring + - * & | ^ ~ <<const) declines the run: it stays scalar code.
- Registers named by lane families are *fused*: one numpy array (size x columns) per group,
  each register's storage a column view (`RegisterArray.bind`), so P4Runtime and the CLI still
  read and write them one array at a time.  A group's column order must be the order of every
  family that names its registers, else its runs decline.
- The header fields named by lane families become one *vector range*: the parser keeps them as
  a big-endian numpy view of the frame (`HeaderInfo.vector`), the deparser emits its bytes.
  A range is taken only when nothing else in the program (conditions, keys, checksums, field
  lists, other actions, header-level primitives, stacks, unions) names its fields.

Why the vector code computes what the scalar code computes: within a run, lane j touches only
its own registers and fields, and temporaries are redefined in each block before use, so
executing statement 1 for all lanes, then statement 2 for all lanes, ... is the same as lane by
lane.  All values and destinations are at most W bits (W = 32 or 64) and every operator allowed
is a ring operation, so evaluating modulo 2**W (numpy unsigned wrap-around) and then masking to
the destination width gives exactly bmv2's unbounded-integer result truncated on write.  An
index outside the arrays runs the run's scalar code as emitted (skipped accesses, counted).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsum.switch.expressions import parse_hexstr, unwrap
from netsum.switch.layout import HeaderInfo, Layout
from netsum.switch.program import Action
from netsum.switch.stateful import RegisterArray

__all__ = ["MIN_LANES", "LanePlan", "LaneRun", "VectorRange", "plan_lanes", "mark_refs"]

MIN_LANES = 4          # fewer lanes are not worth a numpy call
MAX_BLOCK = 8          # primitives per lane block considered
_LANE_OPS = ("assign", "modify_field", "register_read", "register_write")
_RING = ("+", "-", "*", "&", "|", "^")
_DTYPE = {8: "u1", 16: "u2", 32: "u4", 64: "u8"}


@dataclass(frozen=True, slots=True)
class VectorRange:
    """Fields `first .. first+count-1` of a header held as one array in slot `slot` of F."""
    header: str
    first: int            # position in HeaderInfo.fields
    count: int
    width: int            # bits per field: 8, 16, 32 or 64
    byte_offset: int      # of the first field from the header start
    slot: int

    @property
    def dtype(self) -> str:
        return ">" + _DTYPE[self.width]


@dataclass(slots=True)
class _Family:
    kind: str                          # "R" register arrays, "F" header fields
    names: list[Any]                   # per lane: register name, or (header, field)


@dataclass(slots=True)
class LaneRun:
    """Primitives start..stop-1 of action `action` (JSON index): n blocks of m."""
    action: int
    start: int
    stop: int
    m: int
    n: int
    block: list[dict[str, Any]]        # the first block's primitives
    varying: dict[int, int]            # binding position (first block) -> family id
    families: list[_Family]
    index: Any                         # the common register index expression (JSON)


@dataclass(slots=True)
class LanePlan:
    runs: dict[int, list[LaneRun]] = field(default_factory=dict)
    ranges: dict[str, VectorRange] = field(default_factory=dict)
    #: register name -> (group array name in the namespace, column)
    columns: dict[str, tuple[int, int]] = field(default_factory=dict)
    groups: list[np.ndarray] = field(default_factory=list)

    def lanes_fused(self) -> int:
        return sum(r.n for runs in self.runs.values() for r in runs)


# -- canonical form of primitives -------------------------------------------------------------
def mark_refs(node: Any, counter: list[int]) -> Any:
    """`node` with each register and field reference wrapped as {"$pos": k, "ref": node},
    numbered in _canon's traversal order (sorted keys, source_info left out): the k-th
    reference is the k-th entry _canon appends to `binds`.  The code generators (lanecode.py,
    native/cvec.py) read a run's primitives through it."""
    if isinstance(node, dict):
        if node.get("type") in ("register_array", "field"):
            k = counter[0]
            counter[0] += 1
            return {"$pos": k, "ref": node}
        return {k: mark_refs(v, counter) for k, v in sorted(node.items())
                if k != "source_info"}
    if isinstance(node, list):
        return [mark_refs(x, counter) for x in node]
    return node


def _canon(node: Any, binds: list[tuple[Any, ...]]) -> Any:
    """`node` with register and field references replaced by kind markers; the references
    themselves appended to `binds` in traversal order."""
    if isinstance(node, dict):
        t = node.get("type")
        if t == "register_array":
            binds.append(("R", node.get("value")))
            return "$R"
        if t == "field":
            v = node.get("value")
            binds.append(("F",) + (tuple(v) if isinstance(v, list) else (v,)))
            return "$F"
        return {k: _canon(v, binds) for k, v in sorted(node.items()) if k != "source_info"}
    if isinstance(node, list):
        return [_canon(x, binds) for x in node]
    return node


def _prim_forms(prims: list[Any]) -> list[tuple[str, list[tuple[Any, ...]]] | None]:
    out: list[tuple[str, list[tuple[Any, ...]]] | None] = []
    for p in prims:
        if not isinstance(p, dict) or p.get("op") not in _LANE_OPS:
            out.append(None)
            continue
        binds: list[tuple[Any, ...]] = []
        shape = json.dumps(_canon(p, binds), sort_keys=True)
        out.append((shape, binds))
    return out


def _pattern(binds: list[tuple[Any, ...]]) -> list[int]:
    first: dict[tuple[Any, ...], int] = {}
    return [first.setdefault(b, i) for i, b in enumerate(binds)]


# -- finding runs -----------------------------------------------------------------------------
class _Finder:
    def __init__(self, layout: Layout, registers: dict[str, RegisterArray]) -> None:
        self.layout = layout
        self.registers = registers
        self.stacked = {h for s in layout.stacks.values() for h in s.headers} | \
            {h for u in layout.unions.values() for h in u}
        self.positions: dict[str, dict[str, int]] = {}

    def action_runs(self, aidx: int, prims: list[Any]) -> list[LaneRun]:
        forms = _prim_forms(prims)
        cut = self._control_points(prims)
        runs: list[LaneRun] = []
        s = 0
        while s < len(prims):
            best: LaneRun | None = None
            for m in range(1, MAX_BLOCK + 1):
                run = self._try(aidx, prims, forms, cut, s, m)
                if run is not None and (best is None or run.n * run.m > best.n * best.m):
                    best = run
            if best is None:
                s += 1
                continue
            runs.append(best)
            s = best.stop
        return runs

    @staticmethod
    def _control_points(prims: list[Any]) -> set[int]:
        """Indices a run may not span: jumps and jump targets."""
        pts: set[int] = set()
        for i, p in enumerate(prims):
            if isinstance(p, dict) and p.get("op") in ("_jump", "_jump_if_zero"):
                pts.add(i)
                params = p.get("parameters") or []
                tgt = unwrap(params[-1]) if params else None
                if isinstance(tgt, dict) and tgt.get("type") == "hexstr":
                    try:
                        pts.add(parse_hexstr(tgt.get("value"), ""))
                    except Exception:     # noqa: BLE001 - a bad target is block_source's error
                        pass
        return pts

    def _try(self, aidx: int, prims: list[Any], forms: list[Any], cut: set[int], s: int,
             m: int) -> LaneRun | None:
        base = forms[s:s + m]
        if len(base) < m or any(f is None for f in base):
            return None
        shapes = [f[0] for f in base]
        binds0 = [b for f in base for b in f[1]]
        pat = _pattern(binds0)
        lanes = [binds0]
        at = s + m
        while at + m <= len(prims) and not any(c in cut for c in range(at, at + m)):
            blk = forms[at:at + m]
            if any(f is None or f[0] != sh for f, sh in zip(blk, shapes)):
                break
            b = [x for f in blk for x in f[1]]
            if _pattern(b) != pat:
                break
            lanes.append(b)
            at += m
        if any(c in cut for c in range(s + 1, s + m)):
            return None
        # Grow lane by lane while the run stays valid; keep the longest valid prefix.
        n = len(lanes)
        # A run needs a register family: a register binding that differs between its lanes.
        # The lanes of a shorter prefix differ in fewer bindings, never in more, so when all
        # of them differ in no register binding no prefix can (without this, a long block
        # of field assignments was checked at every length: minutes at large K).
        if not any(b[0] == "R" and any(lane[pos] != b for lane in lanes[1:])
                   for pos, b in enumerate(lanes[0])):
            return None
        # The first two lanes decide some failures for every length: a binding in which they
        # differ varies in every prefix, and a family that its first two names cannot make
        # (registers of another shape, another header, fields not consecutive) no longer
        # list of names makes either -- every _family test is of a prefix property.  (A
        # statement just before a run, of the run's shape, was checked at every length.)
        if n >= 2 and any(a != b and self._family([a, b]) is None
                          for a, b in zip(lanes[0], lanes[1])):
            return None
        while n >= MIN_LANES:
            run = self._check(aidx, prims, s, m, lanes[:n], pat)
            if run is not None:
                return run
            n -= 1 if n > MIN_LANES else n
        return None

    def _check(self, aidx: int, prims: list[Any], s: int, m: int,
               lanes: list[list[tuple[Any, ...]]], pat: list[int]) -> LaneRun | None:
        n = len(lanes)
        varying: dict[int, int] = {}
        families: list[_Family] = []
        fixed: set[tuple[Any, ...]] = set()
        fam_of_class: dict[int, int] = {}
        for pos, cls in enumerate(pat):
            vals = [lane[pos] for lane in lanes]
            if all(v == vals[0] for v in vals):
                fixed.add(vals[0])
                continue
            if cls not in fam_of_class:
                fam = self._family(vals)
                if fam is None:
                    return None
                fam_of_class[cls] = len(families)
                families.append(fam)
            varying[pos] = fam_of_class[cls]
        if any(b[0] == "R" for b in fixed):
            return None                  # one register touched by every lane: carried state
        lane_names = {("R", x) if f.kind == "R" else ("F",) + tuple(x)
                      for f in families for x in f.names}
        if lane_names & fixed:
            return None
        seen: set[Any] = set()
        for f in families:           # two families sharing names would link the lanes
            names = {("R", x) if f.kind == "R" else ("F",) + tuple(x) for x in f.names}
            if names & seen:
                return None
            seen |= names
        if not families or not any(f.kind == "R" for f in families):
            return None
        block = prims[s:s + m]
        index = self._common_index(block)
        if index is None:
            return None
        run = LaneRun(aidx, s, s + m * n, m, n, block, varying, families, index)
        return run if self._dataflow_ok(run) else None

    def _family(self, vals: list[tuple[Any, ...]]) -> _Family | None:
        if vals[0][0] == "R":
            names = [v[1] for v in vals]
            regs = [self.registers.get(x) for x in names]
            if any(r is None for r in regs) or len(set(names)) != len(names):
                return None
            widths = {(r.size, r.bitwidth) for r in regs if r is not None}
            if len(widths) != 1 or next(iter(widths))[1] > 64:
                return None
            return _Family("R", names)
        if not all(len(v) == 3 for v in vals):
            return None
        hname = vals[0][1]
        h = self.layout.headers.get(hname) if isinstance(hname, str) else None
        if h is None or h.metadata or hname in self.stacked or h.varbit >= 0 or \
                any(v[1] != hname for v in vals):
            return None
        pos = self.positions.get(hname)
        if pos is None:
            pos = self.positions[hname] = {n: i for i, (n, _s) in enumerate(h.fields)}
        idx = [pos.get(v[2]) for v in vals]
        if idx[0] is None or idx != list(range(idx[0], idx[0] + len(vals))):
            return None
        slots = [h.fields[i][1] for i in idx if i is not None]
        if len({(s.width, s.signed) for s in slots}) != 1 or slots[0].signed or \
                slots[0].width not in _DTYPE:
            return None
        return _Family("F", [(hname, v[2]) for v in vals])

    @staticmethod
    def _common_index(block: list[dict[str, Any]]) -> Any:
        idx = None
        for p in block:
            params = p.get("parameters") or []
            if p["op"] in ("register_read", "register_write"):
                if len(params) < 3:
                    return None
                i = params[2] if p["op"] == "register_read" else params[1]
                key = json.dumps(_canon(i, []), sort_keys=True) + json.dumps(
                    _fields_in(i), sort_keys=True)
                if idx is None:
                    idx = (key, i)
                elif idx[0] != key:
                    return None
        return idx[1] if idx is not None else None

    def _dataflow_ok(self, run: LaneRun) -> bool:
        """Temporaries defined before use in every block; the index reads nothing written."""
        prims: list[tuple[str, list[tuple[Any, ...]], int]] = []
        pos = 0
        for p in run.block:
            binds: list[tuple[Any, ...]] = []
            _canon(p, binds)
            prims.append((p["op"], binds, pos))
            pos += len(binds)
            if p["op"] in ("assign", "modify_field", "register_read"):
                d = unwrap((p.get("parameters") or [None])[0])
                if not (isinstance(d, dict) and d.get("type") == "field"):
                    return False
            if not self._exprs_ok(p):
                return False
        # Sorted keys put "parameters" after "op", so a destination is binding 0 of its
        # primitive.
        written: set[tuple[Any, ...]] = set()
        for op, binds, at in prims:
            if op in ("assign", "modify_field", "register_read") and at not in run.varying:
                slot = self.layout.find(binds[0][1], binds[0][2]) if len(binds[0]) == 3 \
                    else None
                if slot is None or slot.signed:
                    return False
                written.add(binds[0])
        defined: set[tuple[Any, ...]] = set()
        for op, binds, at in prims:
            dst = op in ("assign", "modify_field", "register_read")
            for k, b in enumerate(binds):
                if (dst and k == 0) or at + k in run.varying:
                    continue
                if b in written and b not in defined:
                    return False       # a value carried over from the previous lane
            if dst and at not in run.varying:
                defined.add(binds[0])
        index_fields = {("F",) + f for f in _fields_in(run.index)}
        return not (index_fields & written)

    def _exprs_ok(self, p: dict[str, Any]) -> bool:
        params = p.get("parameters") or []
        exprs = {"assign": params[1:2], "modify_field": params[1:2],
                 "register_write": params[2:3], "register_read": []}[p["op"]]
        return all(_ring_expr(e) for e in exprs)


def _fields_in(node: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []

    def walk(n: Any) -> None:
        if isinstance(n, dict):
            if n.get("type") == "field" and isinstance(n.get("value"), list):
                out.append(tuple(n["value"]))
            for k, v in n.items():
                if k != "source_info":
                    walk(v)
        elif isinstance(n, list):
            for x in n:
                walk(x)
    walk(node)
    return out


def _ring_expr(node: Any) -> bool:
    n = unwrap(node)
    if not isinstance(n, dict):
        return False
    if "op" in n:
        op = n["op"]
        if op in _RING:
            return _ring_expr(n.get("left")) and _ring_expr(n.get("right"))
        if op in ("~",) or (op == "-" and n.get("left") is None):
            return _ring_expr(n.get("right"))
        if op == "<<":
            r = unwrap(n.get("right"))
            return isinstance(r, dict) and r.get("type") == "hexstr" and \
                _ring_expr(n.get("left"))
        return False
    return n.get("type") in ("field", "hexstr", "runtime_data", "local")


# -- planning over the whole program ----------------------------------------------------------
def plan_lanes(j: dict[str, Any], layout: Layout, registers: dict[str, RegisterArray],
               actions: Sequence[Action]) -> LanePlan:
    """Find the runs of every action, fuse their registers and give their header fields a
    vector slot (appended to `layout.template`).  Mutates `registers` (bind) and `layout`."""
    finder = _Finder(layout, registers)
    runs: list[LaneRun] = []
    for a in actions:
        runs += finder.action_runs(a.index, list(a.primitives))
    for _ in range(4):             # dropping a run can only shrink what the others need
        groups = _groups(runs, registers)
        ranges = _ranges(runs, layout, j, actions)
        keep = [r for r in runs if _run_fits(r, groups, ranges, layout)]
        if len(keep) == len(runs):
            break
        runs = keep
    else:
        runs, groups, ranges = [], {}, {}
    plan = LanePlan()
    if not runs:
        return plan
    for names in {tuple(g) for g in groups.values()}:
        r0 = registers[names[0]]
        dtype = np.uint32 if r0.bitwidth <= 32 else np.uint64
        arr = np.zeros((r0.size, len(names)), dtype=dtype)
        gid = len(plan.groups)
        plan.groups.append(arr)
        for c, name in enumerate(names):
            registers[name].bind(arr[:, c])
            plan.columns[name] = (gid, c)
    for hname, (first, count) in ranges.items():
        h = layout.headers[hname]
        width = h.fields[first][1].width
        off = sum(s.width for _n, s in h.fields[:first]) // 8
        vr = VectorRange(hname, first, count, width, off, len(layout.template))
        zero = np.zeros(count, dtype=vr.dtype)
        zero.flags.writeable = False        # header arrays are replaced, never written
        layout.template.append(zero)        # type: ignore[arg-type]
        h.vector = vr
        plan.ranges[hname] = vr
    for r in runs:
        plan.runs.setdefault(r.action, []).append(r)
    return plan


def _groups(runs: list[LaneRun], registers: dict[str, RegisterArray]) -> dict[str, list[str]]:
    """register -> the column order of its group (the longest family naming it); registers
    whose families disagree on the order are left out (their runs then decline)."""
    fams = [f.names for r in runs for f in r.families if f.kind == "R"]
    order: dict[str, list[str]] = {}
    for names in sorted(fams, key=len, reverse=True):
        known = [order[x] for x in names if x in order]
        if not known:
            for x in names:
                order[x] = names
    bad: set[str] = set()
    for names in fams:
        g = order.get(names[0])
        if g is None:
            continue
        try:
            c = g.index(names[0])
        except ValueError:
            c = -1
        if c < 0 or g[c:c + len(names)] != names:
            bad.update(g)
    return {x: g for x, g in order.items() if x not in bad}


def _ranges(runs: list[LaneRun], layout: Layout, j: dict[str, Any],
            actions: Sequence[Action]) -> dict[str, tuple[int, int]]:
    spans: dict[str, list[int]] = {}
    for r in runs:
        for f in r.families:
            if f.kind != "F":
                continue
            h = layout.headers[f.names[0][0]]
            pos = [n for n, _s in h.fields]
            a = pos.index(f.names[0][1])
            span = spans.setdefault(h.name, [a, a + len(f.names)])
            span[0], span[1] = min(span[0], a), max(span[1], a + len(f.names))
    out: dict[str, tuple[int, int]] = {}
    for hname, (a, b) in spans.items():
        h = layout.headers[hname]
        slots = [s for _n, s in h.fields[a:b]]
        bits_before = sum(s.width for _n, s in h.fields[:a])
        if bits_before % 8 or len({s.width for s in slots}) != 1 or any(s.signed for s in slots):
            continue
        if _named_elsewhere(j, actions, runs, h, {n for n, _s in h.fields[a:b]}):
            continue
        out[hname] = (a, b - a)
    return out


def _named_elsewhere(j: dict[str, Any], actions: Sequence[Action], runs: list[LaneRun],
                     h: HeaderInfo, fields: set[str]) -> bool:
    """True when anything but the runs names one of `fields` of `h`, or names `h` itself in a
    primitive that works on whole headers (copy, setValid, stacks)."""
    in_runs: dict[int, set[int]] = {}
    for r in runs:
        in_runs.setdefault(r.action, set()).update(range(r.start, r.stop))
    hit = False

    def walk(n: Any) -> None:
        nonlocal hit
        if hit:
            return
        if isinstance(n, list):
            if len(n) == 2 and n[0] == h.name and n[1] in fields:
                hit = True
                return
            for x in n:
                walk(x)
        elif isinstance(n, dict):
            if n.get("type") == "header" and n.get("value") == h.name:
                hit = True
                return
            if n.get("op") == "valid":
                return            # isValid() reads only the validity bit
            for k, v in n.items():
                if k != "source_info":
                    walk(v)

    for key, v in j.items():
        if key in ("header_types", "headers"):
            continue
        if key == "actions":
            for a in actions:
                skip = in_runs.get(a.index, set())
                for k, p in enumerate(a.primitives):
                    if k in skip:
                        continue
                    if isinstance(p, dict) and p.get("op") == "remove_header":
                        continue          # setInvalid touches only the validity bit
                    walk(p)
            continue
        walk(v)
    return hit


def _run_fits(r: LaneRun, groups: dict[str, list[str]],
              ranges: dict[str, tuple[int, int]], layout: Layout) -> bool:
    for f in r.families:
        if f.kind == "R" and any(x not in groups for x in f.names):
            return False
        if f.kind == "F" and f.names[0][0] not in ranges:
            return False
    # A field every lane reads or writes alike (a broadcast scalar, a temporary) must not be
    # one a vector range holds: the run's code would name a field that is never parsed.
    binds: list[tuple[Any, ...]] = []
    for p in r.block:
        _canon(p, binds)
    for pos, b in enumerate(binds):
        if pos in r.varying or b[0] != "F" or len(b) != 3 or b[1] not in ranges:
            continue
        a, count = ranges[b[1]]
        names = [n for n, _s in layout.headers[b[1]].fields[a:a + count]]
        if b[2] in names:
            return False
    return True
