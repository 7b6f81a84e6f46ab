"""Code for one lane run (netsum/switch/lanes.py): numpy statements over the fused register rows and
the header's vector range, plus the run's scalar code as the out-of-range fallback.

Values are computed modulo 2**W in numpy's unsigned integers of W bits (W = 32, or 64 when a
width above 32 takes part); every operator allowed is a ring operation, so the low bits equal
bmv2's unbounded result and each write masks to its destination's width (lanes.py docstring).
Python ints that meet an array are first reduced to 0..2**W-1, so numpy never sees an
out-of-range scalar.  Header arrays in F are replaced, never written in place: multicast
copies of F share them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from netsum.switch.expressions import parse_hexstr, unwrap
from netsum.switch.lanes import LanePlan, LaneRun, VectorRange, mark_refs
from netsum.switch.layout import Layout
from netsum.switch.primregistry import Namespace, PrimCtx
from netsum.switch.stateful import RegisterArray

__all__ = ["run_source", "fallback_source", "LazyFunction"]

Value = tuple[str, bool]           # (source, is an array); an int otherwise


class _Emitter:
    def __init__(self, run: LaneRun, plan: LanePlan, layout: Layout,
                 registers: dict[str, RegisterArray], ns: Namespace) -> None:
        self.run = run
        self.plan = plan
        self.layout = layout
        self.registers = registers
        self.ns = ns
        self.n = run.n
        widths = [registers[f.names[0]].bitwidth if f.kind == "R"
                  else self._fam_range(f.names)[0].width for f in run.families]
        self.temps: dict[tuple[Any, ...], str] = {}
        at = 0
        for p in run.block:
            # a destination is binding 0 of its primitive; one that is not a lane family is
            # a lane temporary
            if p["op"] in ("assign", "modify_field", "register_read") and \
                    at not in run.varying:
                d = unwrap(p["parameters"][0])
                self.temps.setdefault(tuple(d["value"]), f"_l{len(self.temps)}")
                widths.append(layout.slot(d["value"], "").width)
            at += _count_refs(p)
        self.W = 32 if max(widths) <= 32 else 64
        self.M = (1 << self.W) - 1
        self.U = ns.ref(np.uint32 if self.W == 32 else np.uint64, "U")
        self.np = ns.ref(np, "np")

    def _fam_range(self, names: list[Any]) -> tuple[VectorRange, int]:
        vr = self.plan.ranges[names[0][0]]
        h = self.layout.headers[vr.header]
        pos = [n for n, _s in h.fields].index(names[0][1])
        return vr, pos - vr.first

    # -- operands ----------------------------------------------------------------------------
    def lane_field(self, fam: int) -> tuple[str, VectorRange, int, bool]:
        f = self.run.families[fam]
        vr, c0 = self._fam_range(f.names)
        full = c0 == 0 and self.n == vr.count
        src = f"F[{vr.slot}]" if full else f"F[{vr.slot}][{c0}:{c0 + self.n}]"
        return src, vr, c0, full

    def reg_row(self, fam: int) -> tuple[str, RegisterArray, bool]:
        f = self.run.families[fam]
        gid, c0 = self.plan.columns[f.names[0]]
        g = self.plan.groups[gid]
        name = self.ns.ref(g, "G")
        full = c0 == 0 and self.n == g.shape[1]
        src = f"{name}[_vi]" if full else f"{name}[_vi, {c0}:{c0 + self.n}]"
        return src, self.registers[f.names[0]], full

    def leaf(self, node: dict[str, Any]) -> Value:
        pos = node["$pos"]
        ref = node["ref"]
        fam = self.run.varying.get(pos)
        if fam is not None:
            if self.run.families[fam].kind == "F":
                src, vr, _c0, _full = self.lane_field(fam)
                return (f"{src}.astype({self.U})" if vr.width != self.W else src), True
            raise ValueError("register operand outside register_read")
        key = tuple(ref["value"])
        if key in self.temps:
            return self.temps[key], True
        return f"F[{self.layout.slot(ref['value'], '').index}]", False

    def expr(self, node: Any) -> Value:
        n = node.get("value") if isinstance(node, dict) and node.get("type") == "expression" \
            else node
        while isinstance(n, dict) and n.get("type") == "expression":
            n = n.get("value")
        if isinstance(n, dict) and "$pos" in n:
            return self.leaf(n)
        if not isinstance(n, dict):
            raise ValueError(f"bad lane expression {n!r}")
        if "op" not in n:
            t = n.get("type")
            if t == "hexstr":
                return str(parse_hexstr(n.get("value"), "") & self.M), False
            if t in ("runtime_data", "local"):
                return f"P[{int(n['value'])}]", False
            raise ValueError(f"lane operand {t!r}")
        op = n["op"]
        if op == "~" or (op == "-" and n.get("left") is None):
            a, av = self.expr(n["right"])
            return f"({'~' if op == '~' else '-'}{a})", av
        if op == "<<":
            a, av = self.expr(n["left"])
            c = parse_hexstr(unwrap(n["right"]).get("value"), "")
            if c >= self.W:
                return ("(" + a + " & 0)" if av else "0"), av
            return f"({a} << {c})", av
        a, av = self.expr(n["left"])
        b, bv = self.expr(n["right"])
        if op == "&" and av != bv and (b if av else a) == str(self.M):
            return (a, av) if av else (b, bv)      # x & (2**W - 1) is x modulo 2**W
        if av != bv:                  # an int meeting an array: into 0..2**W-1 first
            if av:
                b = f"(({b}) & {self.M})"
            else:
                a = f"(({a}) & {self.M})"
        return f"({a} {op} {b})", av or bv

    # -- statements --------------------------------------------------------------------------
    def store(self, dst: dict[str, Any], val: Value, bits: int | None, out: list[str],
              fresh: bool) -> None:
        """Write `val` (`bits` wide when known) to a lane field family or a lane temp."""
        src, is_vec = val
        fam = self.run.varying.get(dst["$pos"])
        if fam is not None:
            lsrc, vr, c0, full = self.lane_field(fam)
            mask = "" if bits is not None and bits <= vr.width or vr.width == self.W \
                else f" & {(1 << vr.width) - 1}"
            dt = repr(vr.dtype)
            if not is_vec:
                val_src = f"(({src}) & {(1 << vr.width) - 1})"
                if full:
                    out.append(f"F[{vr.slot}] = {self.np}.full({self.n}, {val_src}, {dt})")
                    return
            else:
                val_src = f"({src}){mask}"
            if full:
                out.append(f"F[{vr.slot}] = ({val_src}).astype({dt})")
            else:
                out += [f"_h = F[{vr.slot}].copy()", f"_h[{c0}:{c0 + self.n}] = {val_src}",
                        f"F[{vr.slot}] = _h"]
            return
        key = tuple(dst["ref"]["value"])
        name = self.temps[key]
        w = self.layout.slot(dst["ref"]["value"], "").width
        wmask = (1 << w) - 1
        if not is_vec:
            out.append(f"{name} = {self.np}.full({self.n}, ({src}) & {wmask}, {self.U})")
            return
        m = "" if (bits is not None and bits <= w) or w == self.W else f" & {wmask}"
        if m:
            out.append(f"{name} = ({src}){m}")
        elif fresh:
            out.append(f"{name} = {src}")
        else:                          # a view of a register row or of F: keep a copy
            out.append(f"{name} = ({src}).astype({self.U})")

    def body(self) -> list[str]:
        out: list[str] = []
        counter = [0]
        for p in self.run.block:
            mp = mark_refs(p, counter)
            params = mp["parameters"]
            op = p["op"]
            if op in ("assign", "modify_field"):
                val = self.expr(params[1])
                leaf = isinstance(unwrap_marked(params[1]), dict) and \
                    "$pos" in unwrap_marked(params[1])
                self.store(params[0], val, None, out, fresh=not leaf)
            elif op == "register_read":
                fam = self.run.varying[params[1]["$pos"]]
                row, reg, _full = self.reg_row(fam)
                src = f"{row}.astype({self.U})" if (reg.bitwidth > 32) != (self.W > 32) \
                    else row
                self.store(params[0], (src, True), reg.bitwidth, out,
                           fresh=src != row)
            else:   # register_write
                fam = self.run.varying[params[0]["$pos"]]
                row, reg, _full = self.reg_row(fam)
                src, is_vec = self.expr(params[2])
                b = reg.bitwidth
                mask = f" & {(1 << b) - 1}" if b < self.W else ""
                if not is_vec:
                    src = f"(({src}) & {(1 << b) - 1})"
                    mask = ""
                out.append(f"{row} = ({src}){mask}")
        for key, name in self.temps.items():
            out.append(f"F[{self.layout.slot(list(key), '').index}] = int({name}[-1])")
        return out


def unwrap_marked(node: Any) -> Any:
    while isinstance(node, dict) and node.get("type") == "expression":
        node = node.get("value")
    return node


def _count_refs(node: Any) -> int:
    if isinstance(node, dict):
        if node.get("type") in ("register_array", "field"):
            return 1
        return sum(_count_refs(v) for k, v in node.items() if k != "source_info")
    if isinstance(node, list):
        return sum(_count_refs(x) for x in node)
    return 0


class LazyFunction:
    """A generated function compiled on its first call, which then replaces itself in the
    namespace: the out-of-range fallbacks are large (K lanes of scalar code) and rarely run,
    so compiling them at load would cost more than all the rest."""
    __slots__ = ("src", "name", "names")

    def __init__(self, src: str, name: str, names: dict[str, Any]) -> None:
        self.src = src
        self.name = name
        self.names = names

    def __call__(self, F: list[Any], P: tuple[int, ...], pkt: Any) -> None:
        exec(compile(self.src, f"<netsum {self.name}>", "exec"), self.names)
        self.names[self.name](F, P, pkt)


def run_source(run: LaneRun, plan: LanePlan, ctx: PrimCtx, fallback: str) -> list[str]:
    """Statements replacing the run in its action's body; `fallback` names the function of
    fallback_source, called when the index is outside the arrays."""
    em = _Emitter(run, plan, ctx.layout, ctx.registers, ctx.ns)
    reg = ctx.registers[next(f.names[0] for f in run.families if f.kind == "R")]
    index, _bits = ctx.expr(run.index)
    return [f"_vi = {index}", f"if 0 <= _vi < {reg.size}:"] + \
        ["    " + s for s in em.body()] + ["else:", f"    {fallback}(F, P, pkt)"]


def fallback_source(run: LaneRun, plan: LanePlan, layout: Layout, name: str,
                    scalar: list[str], ns: Namespace) -> str:
    """The run as emitted, on the header fields unpacked from (and packed back into) their
    vector ranges."""
    ranges = {plan.ranges[f.names[0][0]] for f in run.families if f.kind == "F"}
    pre, post = [], []
    arr = ns.ref(np.array, "npa")
    for vr in sorted(ranges, key=lambda v: v.slot):
        a = layout.headers[vr.header].fields[vr.first][1].index
        pre.append(f"F[{a}:{a + vr.count}] = F[{vr.slot}].tolist()")
        post.append(f"F[{vr.slot}] = {arr}(F[{a}:{a + vr.count}], {vr.dtype!r})")
    body = pre + scalar + post
    return f"def {name}(F, P, pkt):\n" + "".join(f"    {s}\n" for s in body)
