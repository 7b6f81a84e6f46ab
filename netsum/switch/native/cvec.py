"""Register lanes -> C: each lane run (netsum/switch/lanes.py) as one tight, vectorisable loop.

`plan_lanes` finds, generically, runs of n identical blocks of register read-modify-write
primitives that differ only in the register arrays and header fields they name (one family
of consecutive fields of one header, one family of registers that are consecutive columns of
one fused array), gives the fields a *vector range* and fuses the registers.  The scalar C of
such a run is n copies of the block over F[] slots and REG_GET/REG_SET with a run-time width
test.  Here a run becomes instead one function

    static VEC_FN void A<action>_V<start>(uint32_t *restrict r0, uint32_t *restrict v1,
                                          uint64_t b0, uint64_t *restrict T)

looping lane j = 0..n-1 over the block with fixed element types: a field family is element j
of the header's bytes (big-endian, byte-swapped on load and store), a register family is
element j of the fused register row `base + index * stride` (registers of one group are
columns of one array).  The loop body has no stores but to those arrays and no loads but from
them and from by-value arguments, so the C compiler vectorises it (VEC_FN asks GCC for it at
-O2 and, on x86-64 with glibc's ifuncs, clones the function for SSSE3 and AVX2, which vector
byte swaps need; clang vectorises at -O2 by itself).

The vector range of a header is then not parsed into F[] field by field: the parser copies
its bytes into the packet's `V` buffer (runtime.c `Pkt`), the deparser copies them back, and a
multicast copy takes them along.  Nothing else reads those fields (lanes.py declines the range
otherwise), except a run's scalar code, which unpacks the range into F[] first and packs it
back after.

Semantics are bmv2's, for the reasons lanes.py gives: lane j touches only its own registers and
fields and temporaries are defined before use in each block, so running lane after lane is the
sequential code; every operator is a ring operation, so computing modulo 2^W (W = 32, or 64
when a width above 32 takes part) and masking on each write to the destination width equals
bmv2's unbounded result truncated.  The last lane runs after the loop on its own and leaves the
temporaries' values in T, which the caller writes to F[] (the sequential code leaves the last
lane's there).  An index outside the arrays runs the scalar code, with its skip counts.
"""
from __future__ import annotations

from typing import Any

from netsum.switch.lanes import LanePlan, LaneRun, VectorRange, mark_refs
from netsum.switch.layout import HeaderInfo, Layout
from netsum.switch.native.cexpr import Decline, hexval, unwrap

__all__ = ["VecLayout", "vec_layout", "RunEmitter", "VEC_PRELUDE"]

#: C defining VEC_FN (the lane functions' attributes) and the byte-order helpers.
VEC_PRELUDE = r"""
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define VEC_FN __attribute__((noinline, target_clones("default", "ssse3", "avx2"), \
    optimize("tree-vectorize", "vect-cost-model=dynamic")))
#elif defined(__GNUC__) && !defined(__clang__)
#define VEC_FN __attribute__((noinline, optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define VEC_FN __attribute__((noinline))
#endif
static inline uint8_t be8(uint8_t x) { return x; }
static inline uint16_t be16(uint16_t x) { return __builtin_bswap16(x); }
static inline uint32_t be32(uint32_t x) { return __builtin_bswap32(x); }
static inline uint64_t be64(uint64_t x) { return __builtin_bswap64(x); }
"""

_CTYPE = {8: "uint8_t", 16: "uint16_t", 32: "uint32_t", 64: "uint64_t"}
_ALIGN = 64                  # each range starts on a cache line of Pkt.V


class VecLayout:
    """Where each vector range lives in the packet's V buffer."""

    def __init__(self, plan: LanePlan | None) -> None:
        self.plan = plan
        self.at: dict[str, tuple[VectorRange, int]] = {}     # header -> (range, byte offset)
        off = 0
        for hname, vr in sorted((plan.ranges if plan else {}).items(), key=lambda x: x[1].slot):
            self.at[hname] = (vr, off)
            off += (vr.count * vr.width // 8 + _ALIGN - 1) // _ALIGN * _ALIGN
        self.nbytes = max(off, _ALIGN)

    def of(self, h: HeaderInfo) -> tuple[VectorRange, int] | None:
        return self.at.get(h.name)

    def range_slots(self, layout: Layout) -> set[int]:
        """F[] slots of the fields held in V instead."""
        out: set[int] = set()
        for hname, (vr, _off) in self.at.items():
            h = layout.headers[hname]
            out.update(s.index for _n, s in h.fields[vr.first:vr.first + vr.count])
        return out

    def unpack(self, layout: Layout, hname: str) -> tuple[list[str], list[str]]:
        """(lines loading the range's fields into F[], lines storing them back)."""
        vr, off = self.at[hname]
        h = layout.headers[hname]
        wb = vr.width // 8
        pre, post = [], []
        for j, (_n, s) in enumerate(h.fields[vr.first:vr.first + vr.count]):
            pre.append(f"F[{s.index}] = ld{vr.width}(p->V + {off + j * wb});")
            post.append(f"{{ st{vr.width}(p->V + {off + j * wb}, F[{s.index}]); }}")
        return pre, post


def vec_layout(plan: LanePlan | None) -> VecLayout:
    return VecLayout(plan)


def _peel(node: Any) -> Any:
    while isinstance(node, dict) and node.get("type") == "expression" and "$pos" not in node:
        node = node.get("value")
    return node


class RunEmitter:
    """The C of one lane run: its loop function (appended to `fns`) and the statements that
    replace the run in its action."""

    def __init__(self, run: LaneRun, plan: LanePlan, layout: Layout, vec: VecLayout,
                 regs: dict[str, Any], name: str) -> None:
        self.run, self.plan, self.layout, self.vec, self.regs = run, plan, layout, vec, regs
        self.name = name
        self.args: list[str] = []          # C parameters of the loop function
        self.call: list[str] = []          # the caller's arguments, same order
        self.fam_arg: dict[int, str] = {}
        self.fam_type: dict[int, tuple[str, int]] = {}   # family -> (element type, width)
        self.bcast: dict[Any, str] = {}    # broadcast operand (slot or ("P", i)) -> parameter
        self.temps: dict[tuple[Any, ...], tuple[str, int, int]] = {}  # ref -> (var, slot, w)
        widths: list[int] = []
        for fid, f in enumerate(run.families):
            if f.kind == "F":
                vr, off = self._range(f.names)
                widths.append(vr.width)
                self.fam_type[fid] = (_CTYPE[vr.width], vr.width)
            else:
                r = regs[f.names[0]]
                if r.itemsize not in (4, 8):
                    raise Decline(f"lane register '{f.names[0]}' of {r.itemsize}-byte cells")
                widths.append(r.width)
                self.fam_type[fid] = (_CTYPE[r.itemsize * 8], r.width)
        self.blocks = []
        counter = [0]
        for p in run.block:
            mp = mark_refs(p, counter)
            self.blocks.append(mp)
            if p["op"] in ("assign", "modify_field", "register_read"):
                d = mp["parameters"][0]
                if d["$pos"] not in run.varying:
                    key = tuple(d["ref"]["value"])
                    if key not in self.temps:
                        s = layout.slot(d["ref"]["value"], "")
                        self.temps[key] = (f"t{len(self.temps)}", s.index, s.width)
                        widths.append(s.width)
        self.W = 32 if max(widths) <= 32 else 64
        self.T = _CTYPE[self.W]
        self.M = (1 << self.W) - 1

    def _range(self, names: list[Any]) -> tuple[VectorRange, int]:
        vr, off = self.vec.at[names[0][0]]
        h = self.layout.headers[vr.header]
        pos = [n for n, _s in h.fields].index(names[0][1]) - vr.first
        return vr, off + pos * (vr.width // 8)

    def usable(self) -> bool:
        """False when the block reads, as a scalar, a field held in a vector range (only
        the scalar code, which unpacks the range first, may then run the run)."""
        inside = self.vec.range_slots(self.layout)
        for mp in self.blocks:
            for ref in _refs(mp):
                if ref["$pos"] in self.run.varying or ref["ref"].get("type") != "field":
                    continue
                if self.layout.slot(ref["ref"]["value"], "").index in inside:
                    return False
        return True

    # -- the loop body -----------------------------------------------------------------------
    def _fam(self, fid: int) -> str:
        if fid not in self.fam_arg:
            f = self.run.families[fid]
            ct, _w = self.fam_type[fid]
            a = f"{'v' if f.kind == 'F' else 'r'}{fid}"
            self.fam_arg[fid] = a
            self.args.append(f"{ct} *restrict {a}")
            if f.kind == "F":
                _vr, off = self._range(f.names)
                self.call.append(f"({ct} *)(void *)(p->V + {off})")
            else:
                r = self.regs[f.names[0]]
                self.call.append(f"({ct} *)(void *)(c->reg[{r.index}].base + "
                                 f"(Py_ssize_t)_i * c->reg[{r.index}].stride)")
        return self.fam_arg[fid]

    def _bcast(self, key: Any, src: str) -> str:
        if key not in self.bcast:
            a = f"b{len(self.bcast)}"
            self.bcast[key] = a
            self.args.append(f"uint64_t {a}")
            self.call.append(src)
        return f"(({self.T}){self.bcast[key]})"

    def leaf(self, node: dict[str, Any]) -> str:
        fid = self.run.varying.get(node["$pos"])
        if fid is not None:
            if self.run.families[fid].kind != "F":
                raise Decline("a lane register used as an operand")
            _ct, w = self.fam_type[fid]
            return f"(({self.T})be{w}({self._fam(fid)}[j]))"
        ref = node["ref"]
        key = tuple(ref["value"])
        if key in self.temps:
            return self.temps[key][0]
        s = self.layout.slot(ref["value"], "")
        return self._bcast(s.index, f"F[{s.index}]")

    def expr(self, node: Any) -> str:
        n = _peel(node)
        if isinstance(n, dict) and "$pos" in n:
            return self.leaf(n)
        if not isinstance(n, dict):
            raise Decline(f"lane expression {n!r}")
        T = self.T
        if "op" not in n:
            t = n.get("type")
            if t == "hexstr":
                return f"(({T}){hexval(n.get('value'), 'lane') & self.M}ULL)"
            if t in ("runtime_data", "local"):
                v = n.get("value")
                if type(v) is not int:
                    raise Decline(f"lane operand {n!r}")
                return self._bcast(("P", v), f"P[{v}]")
            raise Decline(f"lane operand of type {t!r}")
        op = n["op"]
        if op == "~":
            return f"(({T})~{self.expr(n['right'])})"
        if op == "-" and n.get("left") is None:
            return f"(({T})(({T})0 - {self.expr(n['right'])}))"
        if op == "<<":
            c = hexval(_peel(n["right"]).get("value"), "lane")
            a = self.expr(n["left"])
            return f"(({T})0)" if c >= self.W else f"(({T})({a} << {c}))"
        if op in ("+", "-", "*", "&", "|", "^"):
            return f"(({T})({self.expr(n['left'])} {op} {self.expr(n['right'])}))"
        raise Decline(f"lane operator {op!r}")

    def store(self, dst: dict[str, Any], val: str, bits: int | None) -> str:
        fid = self.run.varying.get(dst["$pos"])
        if fid is not None:
            ct, w = self.fam_type[fid]
            return f"{self._fam(fid)}[j] = be{w}(({ct})({val}));"   # the cast masks to w
        var, _slot, w = self.temps[tuple(dst["ref"]["value"])]
        if w >= self.W or (bits is not None and bits <= w):
            return f"{var} = {val};"
        return f"{var} = ({val}) & {(1 << w) - 1}ULL;"

    def body(self) -> list[str]:
        out = []
        for mp in self.blocks:
            ps = mp["parameters"]
            op = mp["op"]
            if op in ("assign", "modify_field"):
                out.append(self.store(ps[0], self.expr(ps[1]), None))
            elif op == "register_read":
                fid = self.run.varying[ps[1]["$pos"]]
                _ct, w = self.fam_type[fid]
                out.append(self.store(ps[0], f"(({self.T}){self._fam(fid)}[j])", w))
            else:                                     # register_write
                fid = self.run.varying[ps[0]["$pos"]]
                ct, w = self.fam_type[fid]
                v = self.expr(ps[2])
                full = (1 << (8 * (4 if ct == "uint32_t" else 8))) - 1
                mask = "" if (1 << w) - 1 == full else f" & {(1 << w) - 1}ULL"
                out.append(f"{self._fam(fid)}[j] = ({ct})(({v}){mask});")
        return out

    def function(self) -> str:
        """The loop function: lanes 0..n-2 in the loop, the last after it (temporaries)."""
        body = self.body()
        n = self.run.n
        decl = "".join(f"{self.T} {v} = 0; " for v, _s, _w in self.temps.values())
        outs = "".join(f"T[{k}] = {v}; " for k, (v, _s, _w) in enumerate(self.temps.values()))
        params = ", ".join(self.args + ["uint64_t *restrict T"])
        inner = "".join(f"        {s}\n" for s in body)
        return (f"static VEC_FN void {self.name}({params}) {{\n"
                f"    for (long j = 0; j < {n - 1}; j++) {{\n        {decl}\n{inner}    }}\n"
                f"    {{ long j = {n - 1}; {decl}\n{inner}    {outs}}}\n"
                f"    (void)T;\n}}\n")

    def call_lines(self) -> list[str]:
        """The statements run when the index is inside the arrays (`_i` holds it)."""
        nt = max(len(self.temps), 1)
        lines = [f"u64 _T[{nt}]; {self.name}({', '.join(self.call + ['_T'])});"]
        lines += [f"F[{slot}] = _T[{k}];" for k, (_v, slot, _w) in enumerate(self.temps.values())]
        return lines


def _refs(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "$pos" in node:
            return [node]
        for v in node.values():
            out += _refs(v)
    elif isinstance(node, list):
        for x in node:
            out += _refs(x)
    return out
