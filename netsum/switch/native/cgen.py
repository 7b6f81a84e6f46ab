"""Actions and primitives -> C (the native backend's counterpart of netsum/switch/actions.py and
netsum/switch/primitives.py, written separately: the two are checked against each other).

Every action becomes `static int A<k>(Ctx *c, Pkt *p, const u64 *P)` returning ST_OK or a
status that stops the packet.  Jumps (`_jump`, `_jump_if_zero`, p4c >= Nov 2024) are C
`goto`s; an action with a backward jump counts basic blocks as the reference does (LOOP_LIMIT,
counted at the same block leaders).  A primitive outside the supported set raises `Decline`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netsum.switch.actions import LOOP_LIMIT
from netsum.switch.lanes import LanePlan, LaneRun
from netsum.switch.layout import Layout
from netsum.switch.program import Action
from netsum.switch.native.cexpr import CE, CExpr, Decline, MAX_NATIVE_WIDTH, hexval, store, unwrap
from netsum.switch.primregistry import StdFields

if TYPE_CHECKING:
    from netsum.switch.native.cvec import VecLayout

__all__ = ["Gen", "RegInfo", "CalcInfo"]


@dataclass(frozen=True, slots=True)
class RegInfo:
    index: int          # in Ctx.reg
    size: int
    width: int
    itemsize: int       # bytes per cell of the shared numpy storage


@dataclass(frozen=True, slots=True)
class CalcInfo:
    fn: str             # C function `int fn(Ctx *, Pkt *, u64 *out)`
    lo: int | None
    hi: int | None


@dataclass(slots=True)
class Gen:
    """What the C of one program is generated from, and what it collects on the way."""
    layout: Layout
    std: StdFields
    regs: dict[str, RegInfo]
    ctrs: dict[str, tuple[int, int]]          # name -> (index in Ctx.ctr, size)
    calcs: dict[str, CalcInfo] = field(default_factory=dict)
    globals: list[str] = field(default_factory=list)
    fns: list[str] = field(default_factory=list)
    #: the register lanes (netsum/switch/lanes.py LanePlan) and where their vector ranges
    #: live in Pkt.V (cvec.VecLayout); lane runs are emitted as loops (cvec.py)
    lanes: LanePlan | None = None
    vec: VecLayout | None = None
    #: register families the lane loops address as one row: consecutive columns (checked
    #: against the bound storage when the module is loaded)
    lane_regs: list[tuple[str, ...]] = field(default_factory=list)

    def comp(self, path: str, params: tuple[int, ...] = (), lookahead: Any = None) -> CExpr:
        return CExpr(self.layout, path, params, lookahead, self.globals)

    # -- destinations --------------------------------------------------------------------
    def dest(self, cx: CExpr, node: Any) -> tuple[str, int, bool]:
        """(C lvalue, width, signed) of a writable operand."""
        n = unwrap(node)
        t = n.get("type") if isinstance(n, dict) else None
        if t == "field":
            s, w, sg = cx.field(n.get("value"))
            return f"F[{s}]", w, sg
        if t == "stack_field":
            nxt, slots, w, sg = cx.stack_slots(n.get("value"), False)
            tab = cx.slot_table(slots)
            return f"F[F[{nxt}] ? {tab}[F[{nxt}] - 1] : {self.layout.scratch}]", w, sg
        if isinstance(n, dict) and n.get("op") == "access_field":
            h = cx.named_header(n.get("left"))
            k = n.get("right")
            if type(k) is not int or not 0 <= k < len(h.fields):
                raise cx.fail(f"access_field: bad field offset {k!r}")
            s = h.fields[k][1]
            if s.width > MAX_NATIVE_WIDTH:
                raise cx.fail("access_field of a field wider than 64 bits")
            return f"F[{s.index}]", s.width, s.signed
        raise cx.fail(f"destination {node!r}")

    def named(self, cx: CExpr, node: Any, table: dict[str, Any], kind: str) -> Any:
        n = unwrap(node)
        name = n.get("value") if isinstance(n, dict) else None
        if not isinstance(name, str) or name not in table:
            raise cx.fail(f"unknown {kind} {name!r}")
        return table[name]

    @staticmethod
    def index_check(cx: CExpr, e: CE, size: int) -> str:
        if not e.exact:
            raise cx.fail("an array index that may exceed 64 bits")
        if e.unsigned:
            return f"_i < {size}ULL"
        return f"(i64)_i >= 0 && (i64)_i < {size}LL"

    # -- whole headers -------------------------------------------------------------------
    def siblings_off(self, name: str) -> list[str]:
        return [f"F[{v}] = 0;" for v in self.layout.union_siblings(name)]

    def header_copy(self, cx: CExpr, dst: Any, src: Any) -> list[str]:
        if [(s.width, s.signed) for _, s in dst.fields] != \
                [(s.width, s.signed) for _, s in src.fields]:
            raise cx.fail(f"header copy between '{dst.name}' and '{src.name}' of other types")
        out = []
        if dst.span:
            out.append(f"memmove(&F[{dst.first}], &F[{src.first}], {dst.span} * sizeof(u64));")
        out.append(f"F[{dst.valid}] = F[{src.valid}];")
        sib = self.siblings_off(dst.name)
        if sib:
            out.append(f"if (F[{dst.valid}]) {{ {' '.join(sib)} }}")
        return out

    def union_copy(self, cx: CExpr, a: str, b: str) -> list[str]:
        ma, mb = self.layout.unions[a], self.layout.unions[b]
        if len(ma) != len(mb):
            raise cx.fail(f"union copy between '{a}' and '{b}' of other types")
        out: list[str] = []
        for x, y in zip(ma, mb):
            out += self.header_copy(cx, self.layout.headers[x], self.layout.headers[y])
        return out

    def union_name(self, cx: CExpr, node: Any) -> str:
        n = unwrap(node)
        name = n.get("value") if isinstance(n, dict) and n.get("type") == "header_union" \
            else None
        if not isinstance(name, str) or name not in self.layout.unions:
            raise cx.fail(f"header union operand {node!r} chosen at run time")
        return name

    def stack(self, cx: CExpr, node: Any) -> Any:
        n = unwrap(node)
        st = self.layout.stacks.get(str(n.get("value"))) if isinstance(n, dict) and \
            n.get("type") == "header_stack" else None
        if st is None:
            raise cx.fail(f"header stack operand {node!r}")
        return st

    def shift_stack(self, cx: CExpr, p: list[Any], push: bool) -> list[str]:
        st = self.stack(cx, p[0])
        cnt = unwrap(p[1]) if len(p) > 1 else None
        if not (isinstance(cnt, dict) and cnt.get("type") == "hexstr"):
            raise cx.fail("push/pop count must be a constant")
        size = len(st.headers)
        n = min(hexval(cnt.get("value"), cx.path), size)
        if n < 0:
            raise cx.fail("negative push/pop count")
        heads = [self.layout.headers[h] for h in st.headers]
        out = []
        for i in (range(size - 1, -1, -1) if push else range(size)):
            src = i - n if push else i + n
            h = heads[i]
            if 0 <= src < size:
                g = heads[src]
                if h.span:
                    out.append(f"memmove(&F[{h.first}], &F[{g.first}], {h.span} * sizeof(u64));")
                out.append(f"F[{h.valid}] = F[{g.valid}];")
            else:
                out.append(f"F[{h.valid}] = 0;")
        nx = st.next_slot
        out.append(f"F[{nx}] = F[{nx}] + {n} > {size} ? {size} : F[{nx}] + {n};" if push else
                   f"F[{nx}] = F[{nx}] < {n} ? 0 : F[{nx}] - {n};")
        return out

    # -- primitives ----------------------------------------------------------------------
    def prim(self, cx: CExpr, op: str, p: list[Any]) -> list[str]:
        lay, std = self.layout, self.std

        def need(k: int) -> None:
            if len(p) < k:
                raise cx.fail(f"{op}: expected {k} parameter(s)")
        if op in ("assign", "modify_field"):
            need(2)
            d = unwrap(p[0])
            dt = d.get("type") if isinstance(d, dict) else None
            if dt in ("header", "header_union", "header_stack", "header_union_stack"):
                op = {"header": "assign_header", "header_union": "assign_union",
                      "header_stack": "assign_header_stack",
                      "header_union_stack": "assign_union_stack"}[dt]
                return self.prim(cx, op, p)
            dst, w, sg = self.dest(cx, p[0])
            return [store(dst, w, sg, cx.compile(p[1]))]
        if op in ("mark_to_drop", "drop"):
            egress, mcast = std.egress_spec, std.mcast_grp
            n = unwrap(p[0]) if p else None
            if isinstance(n, dict) and n.get("type") == "header":
                h = cx.header(n.get("value"))
                e, m = lay.find(h.name, "egress_spec"), lay.find(h.name, "mcast_grp")
                if e is None:
                    raise cx.fail(f"mark_to_drop: header '{h.name}' has no egress_spec")
                egress, mcast = e.index, (m.index if m is not None else None)
            return [f"F[{egress}] = c->drop_port;"] + \
                ([f"F[{mcast}] = 0;"] if mcast is not None else [])
        if op == "no_op" or op == "log_msg":
            return []     # log_msg: packets run the reference path while logging is on
        if op == "register_read":
            need(3)
            dst, w, sg = self.dest(cx, p[0])
            r: RegInfo = self.named(cx, p[1], self.regs, "register array")
            ix = cx.compile(p[2])
            cell = CE(f"REG_GET(&c->reg[{r.index}], _i, {r.itemsize})", 0, (1 << r.width) - 1)
            return [f"{{ u64 _i = {ix.code}; if ({self.index_check(cx, ix, r.size)}) "
                    f"{{ {store(dst, w, sg, cell)} }} else c->stats[S_REGISTER_OOB]++; }}"]
        if op == "register_write":
            need(3)
            r = self.named(cx, p[0], self.regs, "register array")
            ix = cx.compile(p[1])
            v = cx.compile(p[2])
            return [f"{{ u64 _i = {ix.code}; if ({self.index_check(cx, ix, r.size)}) "
                    f"REG_SET(&c->reg[{r.index}], _i, {r.itemsize}, ({v.code}) & "
                    f"{(1 << r.width) - 1}ULL); else c->stats[S_REGISTER_OOB]++; }}"]
        if op == "count":
            need(2)
            ci, size = self.named(cx, p[0], self.ctrs, "counter array")
            ix = cx.compile(p[1])
            return [f"{{ u64 _i = {ix.code}; if ({self.index_check(cx, ix, size)}) "
                    f"{{ c->ctr[{ci}].pk[_i] += 1; c->ctr[{ci}].by[_i] += "
                    f"F[{std.packet_length}]; }} else c->stats[S_COUNTER_OOB]++; }}"]
        if op == "modify_field_with_hash_based_offset":
            need(4)
            dst, w, sg = self.dest(cx, p[0])
            base = cx.compile(p[1])
            calc: CalcInfo = self.named(cx, p[2], self.calcs, "calculation")
            size = cx.compile(p[3])
            h = cx._arith("%", CE("_h", calc.lo, calc.hi), size)
            val = cx._arith("+", base, h)
            return [f"{{ u64 _h; int _s = {calc.fn}(c, p, &_h); if (_s) return _s; "
                    f"{store(dst, w, sg, CE(val.code))} }}"]
        if op == "modify_field_rng_uniform":
            need(3)
            dst, w, sg = self.dest(cx, p[0])
            lo, hi = cx.compile(p[1]), cx.compile(p[2])
            if not (lo.unsigned and hi.unsigned):
                raise cx.fail("random() bounds that may be negative or exceed 64 bits")
            return [f"{{ u64 _lo = {lo.code}, _hi = {hi.code}, _r = _lo; if (_lo <= _hi) "
                    f"{{ int _s = py_randint(c, _lo, _hi, &_r); if (_s) return _s; }} "
                    f"{store(dst, w, sg, CE('_r'))} }}"]
        if op == "generate_digest":
            need(2)
            n = unwrap(p[1])
            lid = hexval(n.get("value"), cx.path) if isinstance(n, dict) and \
                n.get("type") == "hexstr" else None
            if lid is None or lid not in lay.learn_lists:
                raise cx.fail(f"generate_digest: unknown learn list {p[1]!r}")
            return [f"p->digest = {lid};"]
        if op == "truncate":
            need(1)
            n_ = cx.compile(p[0])
            if not n_.unsigned:
                raise cx.fail("truncate length that may be negative")
            return [f"p->truncate = {n_.code};"]
        if op == "exit":
            return ["p->exited = 1;"]
        if op in ("assert", "assume"):
            need(1)
            return [f"if (!{cx.cond(p[0])}) return ST_ASSERT;"]
        if op in _BINOPS:
            need(3)
            dst, w, sg = self.dest(cx, p[0])
            r_ = cx._arith(_BINOPS[op], cx.compile(p[1]), cx.compile(p[2]))
            return [store(dst, w, sg, CE(r_.code))]
        if op in ("add_to_field", "subtract_from_field"):
            need(2)
            dst, w, sg = self.dest(cx, p[0])
            cur = CE(dst)
            r_ = cx._arith("+" if op == "add_to_field" else "-", cur, cx.compile(p[1]))
            return [store(dst, w, sg, CE(r_.code))]
        if op in ("assign_header", "copy_header"):
            need(2)
            return self.header_copy(cx, cx.named_header(p[0]), cx.named_header(p[1]))
        if op == "assign_union":
            need(2)
            return self.union_copy(cx, self.union_name(cx, p[0]), self.union_name(cx, p[1]))
        if op == "assign_header_stack":
            need(2)
            a, b = self.stack(cx, p[0]), self.stack(cx, p[1])
            if len(a.headers) != len(b.headers):
                raise cx.fail("header stack copy between stacks of other sizes")
            out = [f"F[{a.next_slot}] = F[{b.next_slot}];"]
            for x, y in zip(a.headers, b.headers):
                out += self.header_copy(cx, lay.headers[x], lay.headers[y])
            return out
        if op in ("push", "pop"):
            need(2)
            return self.shift_stack(cx, p, op == "push")
        if op == "add_header":
            need(1)
            h = cx.named_header(p[0])
            zero = f"memset(&F[{h.first}], 0, {h.span} * sizeof(u64)); " if h.span else ""
            return [f"if (!F[{h.valid}]) {{ {zero}F[{h.valid}] = 1; }}"] + \
                self.siblings_off(h.name)
        if op == "remove_header":
            need(1)
            return [f"F[{cx.named_header(p[0]).valid}] = 0;"]
        raise cx.fail(f"primitive '{op}' is not run natively")

    # -- actions -------------------------------------------------------------------------
    def action(self, fname: str, a: Action) -> None:
        params, path = a.widths, a.path
        if any(w > MAX_NATIVE_WIDTH for w in params):
            raise Decline(f"{path}: action parameter wider than 64 bits")
        prims = a.primitives
        n = len(prims)
        targets: dict[int, int] = {}
        leaders = {0}
        backward = False
        for i, prim in enumerate(prims):
            if prim.get("op") in ("_jump", "_jump_if_zero"):
                ps = prim.get("parameters") or []
                t = hexval(unwrap(ps[-1]).get("value") if ps else None, path)
                if not 0 <= t <= n:
                    raise Decline(f"{path}.primitives[{i}]: jump target {t} outside 0..{n}")
                targets[i] = t
                backward |= t <= i
                leaders.update((t, i + 1))
        body = ["u64 *F = p->F; (void)F; (void)P;"]
        if backward:
            body.append("long _steps = 0;")
        runs = {r.start: r for r in self.lanes.runs.get(a.index, [])} if self.lanes else {}
        i = 0
        while i < n:
            prim = prims[i]
            pp = f"{path}.primitives[{i}] ('{prim.get('op')}')"
            if i in leaders:
                body.append(f"L{i}: ;")
                if backward:
                    body.append(f"if (++_steps > {LOOP_LIMIT}) return ST_LOOP;")
            if i in runs:          # no jump or target inside a run (lanes.py)
                body += self.lane_run(f"{fname}_V{i}", a, runs[i])
                i = runs[i].stop
                continue
            op = prim.get("op")
            cx = self.comp(pp, params)
            ps = prim.get("parameters") or []
            if op == "_jump":
                body.append(f"goto L{targets[i]};")
            elif op == "_jump_if_zero":
                body.append(f"if (!{cx.cond(ps[0])}) goto L{targets[i]};")
            else:
                body += self.prim(cx, str(op), ps)
            i += 1
        body += [f"L{n}: ;", "return ST_OK;"]
        if n == 0:
            body = ["(void)c; (void)p; (void)P;", "return ST_OK;"]
        self.fns.append(f"static int {fname}(Ctx *c, Pkt *p, const u64 *P) {{\n" +
                        "".join(f"    {s}\n" for s in body if s) + "}\n")

    def lane_run(self, fname: str, a: Action, run: LaneRun) -> list[str]:
        """A lane run (cvec.py): its loop when the index is inside the arrays, else its
        scalar code on the range unpacked into F[] (skips counted there, as always)."""
        from netsum.switch.native.cvec import RunEmitter
        assert self.lanes is not None and self.vec is not None   # a run comes from them
        scalar: list[str] = []
        for i in range(run.start, run.stop):
            prim = a.primitives[i]
            cx = self.comp(f"{a.path}.primitives[{i}] ('{prim.get('op')}')", a.widths)
            scalar += self.prim(cx, str(prim.get("op")), prim.get("parameters") or [])
        pre: list[str] = []
        post: list[str] = []
        for h in sorted(self.vec.at):       # every range: a block may read any of them
            x, y = self.vec.unpack(self.layout, h)
            pre += x
            post += y
        em = RunEmitter(run, self.lanes, self.layout, self.vec, self.regs, fname)
        if not em.usable():
            return ["{"] + pre + scalar + post + ["}"]
        self.fns.append(em.function())
        fams = [f.names for f in run.families if f.kind == "R"]
        self.lane_regs += [tuple(x) for x in fams]
        cx = self.comp(f"{a.path}.primitives[{run.start}] (lane index)", a.widths)
        ix = cx.compile(run.index)
        size = self.regs[fams[0][0]].size
        return ([f"{{ u64 _i = {ix.code};", f"if ({self.index_check(cx, ix, size)}) {{"] +
                em.call_lines() + ["} else {"] + pre + scalar + post + ["}", "}"])


_BINOPS = {"add": "+", "subtract": "-", "bit_and": "&", "bit_or": "|", "bit_xor": "^",
           "shift_left": "<<", "shift_right": ">>"}
