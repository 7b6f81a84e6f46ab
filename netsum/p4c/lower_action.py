"""Lower action bodies (and synthesized statement groups) to BMv2 primitives.

Owns: assignments (field, header, struct, slice), header validity and stack operations,
extern calls (dispatched to :class:`lower_extern.ExternLowering`), p4c-style copy
propagation into extern arguments, inlining of action calls (copy-in to temporaries), and
``if``/``return``/``exit`` inside an action as ``_jump_if_zero``/``_jump`` with absolute
targets (p4c ≥ 2024-11).
"""
from __future__ import annotations

from . import ast as A
from .calls import CallInfo, CallKind, resolve_call
from .diagnostics import Pos
from .exprjson import Json, as_param, field_json, hexstr, lower_expr, ref_json, wrap
from .ir import (FieldRef, HeaderRef, ParamRef, StackLastRef, StackRef, StructRef, TConst, TExpr,
                 TIsValid, TList, TLoc, TSlice, UnionRef, UnionStackRef)
from .layout import storable
from .lower_ctx import LowerCtx, as_param_b2d, prim as _prim
from .typecheck import group_ref
from .inline_action import Frame, InlineActions
from .lower_extern import HASH_ALGOS, ExternLowering
from .scopes import Env, Sym, SymKind
from .types import Bits, Bool, HeaderT, StackT, StructT, UnionStackT, UnionT, VarbitT, show

__all__ = ["LowerCtx", "ActionLowering", "HASH_ALGOS", "as_param_b2d"]


class ActionLowering(InlineActions, ExternLowering):
    """Statements → primitive list for one action body (``block`` is the control's role)."""

    def __init__(self, ctx: LowerCtx, role: str) -> None:
        self.ctx = ctx
        self.role = role
        self.typer = ctx.typer
        # Straight-line knowledge "field == expression" for p4c-style copy propagation into
        # extern arguments; forgotten conservatively on any write it depends on and at joins.
        self.known: dict[FieldRef, TExpr] = {}
        # Per known field, the fields its value reads, and the reverse: per field, the known
        # fields whose values read it.  A write then forgets what depended on it without
        # re-reading every known value (K lanes of writes were quadratic: 1M expression walks
        # at K=1024).
        self._known_reads: dict[FieldRef, set[FieldRef]] = {}
        self._readers: dict[FieldRef, set[FieldRef]] = {}
        # Inlined calls being lowered (innermost last) and the action's exit flag; see
        # inline_action for why return/exit inside them are flags, not jumps.
        self.frames: list[Frame] = []
        self.exited: TLoc | None = None
        self._stops: dict[int, bool] = {}
        # Enclosing loops, innermost last: the jumps of their break and continue statements
        # (patched when the loop's end and its update are placed).
        self.loops: list[tuple[list[int], list[int]]] = []

    def _forget(self, ref: FieldRef | None) -> None:
        """`ref` was written (None: anything may have been): drop what was known about it and
        every known value that reads it."""
        if ref is None:
            self.known.clear()
            self._known_reads.clear()
            self._readers.clear()
            return
        self._drop(ref)
        for k in self._readers.pop(ref, ()):
            self._drop(k)

    def _drop(self, k: FieldRef) -> None:
        if self.known.pop(k, None) is None:
            return
        for f in self._known_reads.pop(k):
            readers = self._readers.get(f)
            if readers is not None:
                readers.discard(k)

    def _know(self, k: FieldRef, value: TExpr, reads: set[FieldRef]) -> None:
        """`k` now holds `value` (which reads `reads`, not `k` itself)."""
        self.known[k] = value
        self._known_reads[k] = reads
        for f in reads:
            self._readers.setdefault(f, set()).add(k)

    def err(self, pos: Pos, msg: str) -> None:
        self.ctx.diags.error(pos, msg)

    def lower_body(self, stmts: tuple[A.Stmt, ...], env: Env) -> list[Json]:
        prims: list[Json] = []
        returns: list[int] = []
        self._stmts(stmts, env, prims, returns)
        self.finish(prims, returns)
        return prims

    def finish(self, prims: list[Json], returns: list[int]) -> None:
        """Close a BMv2 action: the delayed exit of inlined calls, then every `return` jumps
        to the end (no jump is left pointing at its own successor at the end)."""
        self.exit_at_end(prims)
        self._patch(prims, returns, len(prims))
        self.trim_tail_jumps(prims)

    @staticmethod
    def trim_tail_jumps(prims: list[Json]) -> None:
        """Drop a final ``_jump`` to the end (a trailing return/exit) and retarget jumps that
        pointed past the new end, so no primitive jumps to its immediate successor at the end."""
        changed = False
        while prims and prims[-1]["op"] == "_jump" and \
                int(prims[-1]["parameters"][0]["value"], 16) == len(prims):
            prims.pop()
            changed = True
        if changed:
            end = len(prims)
            for p in prims:
                if p["op"] in ("_jump", "_jump_if_zero"):
                    t = p["parameters"][-1]
                    if int(t["value"], 16) > end:
                        p["parameters"][-1] = hexstr(end)

    @staticmethod
    def _patch(prims: list[Json], jumps: list[int], target: int) -> None:
        for i in jumps:
            prims[i]["parameters"][-1] = hexstr(target)

    def _stmts(self, stmts: tuple[A.Stmt, ...], env: Env, prims: list[Json],
               returns: list[int]) -> None:
        guards: list[int] = []
        for i, s in enumerate(stmts):
            self._stmt(s, env, prims, returns)
            if i + 1 < len(stmts) and self.may_stop(s, env) and \
                    (self.frames or not isinstance(s, (A.Return, A.Exit))):
                jz = self.guard(prims)
                if jz is not None:
                    guards.append(jz)
        self._patch(prims, guards, len(prims))

    def _stmt(self, s: A.Stmt, env: Env, prims: list[Json], returns: list[int]) -> None:
        typer = self.typer
        match s:
            case A.Block(stmts=ss):
                self._stmts(ss, env.child(), prims, returns)
            case A.EmptyStmt():
                pass
            case A.VarDecl(type=t, name=n, init=init):
                tt = env.g.typed.declared(t, env.g, self.ctx.diags)
                if tt is None:
                    return
                if not storable(tt):
                    self.err(s.pos, f"unsupported construct: a variable of type {show(tt)}")
                    return
                # Only actions outside any control still declare variables (at their top,
                # MoveDeclarations); their names are unique in the program.
                loc = self.ctx.layout.alloc_local(n, tt, s.pos, key=f"/{n}")
                env.add(Sym(SymKind.VAR, n, loc))
                if init is not None:
                    rhs = typer.expr(init, env, tt)
                    if rhs is not None:
                        self.assign(loc, rhs, s.pos, prims)
            case A.Assign(lhs=l, rhs=r):
                lhs = typer.expr(l, env)
                if lhs is None:
                    typer.expr(r, env)
                    return
                if isinstance(lhs, TSlice):
                    rhs = typer.expr(r, env, lhs.type)
                    if rhs is not None:
                        self._assign_slice(lhs, rhs, s.pos, prims)
                    return
                if not isinstance(lhs, TLoc) or isinstance(lhs.ref, ParamRef):
                    self.err(l.pos, "the left side of an assignment must be a writable location")
                    return
                rhs = typer.expr(r, env, lhs.type)
                if rhs is not None:
                    self.assign(lhs, rhs, s.pos, prims)
            case A.CallStmt(call=c):
                info = resolve_call(c, env, typer)
                if info is not None:
                    self.call(info, env, prims, s.pos, returns)
            case A.If(cond=c, then=t, other=o):
                cond = typer.expr(c, env, Bool())
                if cond is None:
                    return
                if not isinstance(cond.type, Bool):
                    self.err(c.pos, f"an if condition must be bool, got {show(cond.type)}")
                    return
                if isinstance(cond, TConst):
                    branch = t if cond.value else o
                    if branch is not None:
                        self._stmt(branch, env.child(), prims, returns)
                    return
                jz = len(prims)
                prims.append(_prim("_jump_if_zero",
                                   [as_param_b2d(cond), hexstr(0)]))
                self._forget(None)
                self._stmt(t, env.child(), prims, returns)
                self._forget(None)
                if o is not None:
                    j = len(prims)
                    prims.append(_prim("_jump", [hexstr(0)]))
                    self._patch(prims, [jz], len(prims))
                    self._stmt(o, env.child(), prims, returns)
                    self._forget(None)
                    self._patch(prims, [j], len(prims))
                else:
                    self._patch(prims, [jz], len(prims))
            case A.Return(value=v):
                if v is not None:
                    self.err(s.pos, "an action cannot return a value")
                if self.frames:
                    self.early_return(s.pos, prims)
                    return
                returns.append(len(prims))
                prims.append(_prim("_jump", [hexstr(0)]))
            case A.Exit():
                if self.frames:
                    self.early_exit(s.pos, prims)
                    return
                prims.append(_prim("exit", []))
                returns.append(len(prims))
                prims.append(_prim("_jump", [hexstr(0)]))
            case A.For():
                self._for(s, env, prims, returns)
            case A.Break() | A.Continue():
                if not self.loops:   # CheckLoops reports it in the source; never reached
                    self.err(s.pos, "break or continue outside of a loop")
                    return
                jumps = self.loops[-1][0 if isinstance(s, A.Break) else 1]
                jumps.append(len(prims))
                prims.append(_prim("_jump", [hexstr(0)]))
            case A.Switch():
                self.err(s.pos, "unsupported construct: switch statement inside an action")
            case _:
                self.err(s.pos, f"unsupported construct: {type(s).__name__} in an action")

    def _for(self, s: A.For, env: Env, prims: list[Json], returns: list[int]) -> None:
        """p4c's layout (backends/bmv2/common/action.cpp): init; L: ``_jump_if_zero(cond,
        end)``; body; update (``continue`` lands here); ``_jump L``; end (``break`` lands
        here)."""
        self._stmts(s.init, env, prims, returns)
        cond: TExpr | None = None
        if s.cond is not None:
            cond = self.typer.expr(s.cond, env, Bool())
            if cond is None:
                return
            if not isinstance(cond.type, Bool):
                self.err(s.cond.pos, f"a for loop condition must be bool, got {show(cond.type)}")
                return
            if isinstance(cond, TConst):
                if not cond.value:
                    # Never runs: the body is lowered for its diagnostics only.
                    self.loops.append(([], []))
                    try:
                        self._stmt(s.body, env.child(), [], [])
                    finally:
                        self.loops.pop()
                    return
                cond = None
        self._forget(None)          # the loop head is reached from the back edge too
        top = len(prims)
        exits: list[int] = []
        if cond is not None:
            exits.append(len(prims))
            prims.append(_prim("_jump_if_zero", [as_param_b2d(cond), hexstr(0)]))
        self.loops.append(([], []))
        try:
            self._stmt(s.body, env.child(), prims, returns)
        finally:
            breaks, continues = self.loops.pop()
        if self.may_stop(s.body, env):
            # A return or exit inside an inlined call set its flag: leave the loop.
            stop = self.guard(prims)
            if stop is not None:
                exits.append(stop)
        self._forget(None)
        self._patch(prims, continues, len(prims))
        self._stmts(s.update, env, prims, returns)
        prims.append(_prim("_jump", [hexstr(top)]))
        self._patch(prims, exits + breaks, len(prims))
        self._forget(None)

    # ------------------------------------------------------------ assignments
    def assign(self, lhs: TLoc, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        t = lhs.type
        if not isinstance(lhs.ref, FieldRef):
            self._forget(None)
        if isinstance(rhs, TList) and rhs.type == t and isinstance(lhs.ref, (HeaderRef,
                                                                            StructRef)):
            # A list or structure expression: field by field (a header becomes valid).
            if isinstance(lhs.ref, HeaderRef):
                prims.append(_prim("add_header", [ref_json(lhs)]))
                h = lhs.ref.name
                members = [(n, TLoc(ft, pos, group_ref(ft, h, n) if isinstance(ft, StructT)
                                    else FieldRef(h, n), f"{lhs.text}.{n}"))
                           for n, ft in lhs.ref.type.members()]
            else:
                members = list(lhs.ref.members)
            for (_, loc), value in zip(members, rhs.items):
                self.assign(loc, value, pos, prims)
            return
        if isinstance(t, HeaderT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, HeaderRef) and rhs.type == t:
                prims.append(_prim("assign_header", [ref_json(lhs), ref_json(rhs)]))
            elif isinstance(rhs, TLoc) and isinstance(rhs.ref, StackLastRef) and \
                    rhs.type == t and isinstance(lhs.ref, HeaderRef):
                # `h = hs.last` (parsers only): the element at BMv2's last_stack_index,
                # picked per packet (dereference_header_stack as a header operand).
                stack = {"type": "header_stack", "value": rhs.ref.name}
                last = {"type": "expression", "value": {
                    "op": "dereference_header_stack", "left": stack, "right": {
                        "type": "expression", "value": {
                            "op": "last_stack_index", "left": None, "right": stack}}}}
                prims.append(_prim("assign_header", [ref_json(lhs), last]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to header "
                              f"{show(t)}")
            return
        if isinstance(t, UnionT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, UnionRef) and rhs.type == t:
                prims.append(_prim("assign_union", [ref_json(lhs), ref_json(rhs)]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to header "
                              f"union {show(t)}")
            return
        if isinstance(t, UnionStackT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, UnionStackRef) and rhs.type == t:
                prims.append(_prim("assign_union_stack", [ref_json(lhs), ref_json(rhs)]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to "
                              f"{show(t)}")
            return
        if isinstance(t, StackT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, StackRef) and rhs.type == t:
                prims.append(_prim("assign_header_stack", [ref_json(lhs), ref_json(rhs)]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to header "
                              f"stack {show(t)}")
            return
        if isinstance(t, StructT):
            if isinstance(lhs.ref, StructRef) and isinstance(rhs, TLoc) and \
                    isinstance(rhs.ref, StructRef) and rhs.type == t:
                for (n, l), (_, r) in zip(lhs.ref.members, rhs.ref.members):
                    self.assign(l, r, pos, prims)
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to struct "
                              f"{show(t)}")
            return
        if isinstance(t, VarbitT):
            if isinstance(rhs, TLoc) and isinstance(rhs.ref, FieldRef) and rhs.type == t:
                prims.append(_prim("assign_VL", [ref_json(lhs), ref_json(rhs)]))
            else:
                self.err(pos, f"unsupported construct: assigning {show(rhs.type)} to a "
                              f"{show(t)} field (only another {show(t)} field)")
            return
        c = self.typer.coerce(rhs, t, pos, "assignment")
        if c is None:
            return
        prims.append(_prim("assign", [ref_json(lhs), as_param(c)]))
        if isinstance(lhs.ref, FieldRef):
            self._forget(lhs.ref)
            reads = _reads(c)
            if lhs.ref not in reads:
                self._know(lhs.ref, c, reads)

    def _assign_slice(self, lhs: TSlice, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        base = lhs.operand
        if not isinstance(base, TLoc) or not isinstance(base.ref, FieldRef):
            self.err(pos, "the left side of an assignment must be a writable location")
            return
        rhs2 = self.typer.coerce(rhs, lhs.type, pos, "assignment")
        if rhs2 is None:
            return
        t = base.type
        assert isinstance(t, Bits)
        w = t.width
        m = ((1 << (lhs.hi - lhs.lo + 1)) - 1) << lhs.lo
        keep = wrap("&", field_json(base.ref), hexstr(((1 << w) - 1) ^ m, w))
        new = wrap("&", wrap("<<", lower_expr(rhs2), hexstr(lhs.lo)), hexstr(m, w))
        prims.append(_prim("assign", [field_json(base.ref),
                                      {"type": "expression", "value": wrap("|", keep, new)}]))
        self._forget(base.ref)

    # ------------------------------------------------------------ calls
    def simple_arg(self, te: TExpr, prims: list[Json]) -> TExpr:
        """An extern's ``in`` argument as p4c leaves it: p4c copies it into a temporary and
        then propagates copies, so a field whose value is known becomes that constant or
        field, a known computed value or a computed argument goes through a temporary."""
        if isinstance(te, TLoc) and isinstance(te.ref, FieldRef) and te.ref in self.known:
            k = self.known[te.ref]
            if isinstance(k, TConst):
                return TConst(te.type, te.pos, k.value)
            if isinstance(k, TLoc) and not isinstance(k.type, HeaderT):
                return k
            te = k
        if isinstance(te, (TConst, TLoc)):
            return te
        tmp = self.ctx.layout.temp(te.type, te.pos)
        self.assign(tmp, te, te.pos, prims)
        return tmp

    def _wrote(self, dst: TExpr | None) -> None:
        """An extern wrote ``dst``: what was known about it is stale."""
        if isinstance(dst, TLoc) and isinstance(dst.ref, FieldRef):
            self._forget(dst.ref)
        else:
            self._forget(None)

    def call(self, info: CallInfo, env: Env, prims: list[Json], pos: Pos,
             returns: list[int] | None = None) -> None:
        """Lower one call; ``returns`` collects the jumps that end the enclosing action (an
        exit inside an inlined action call ends it too)."""
        k = info.kind
        if k is CallKind.ACTION:
            self.inline(info, env, prims)
        elif k is CallKind.HEADER:
            hdr = info.target
            assert isinstance(hdr, TLoc)
            if info.name == "isValid":
                return
            op = "add_header" if info.name == "setValid" else "remove_header"
            prims.append(_prim(op, [ref_json(hdr)]))
            self._forget(None)  # validity changed (and BMv2 zeroes a header it adds)
        elif k is CallKind.STACK:
            st = info.target
            assert isinstance(st, TLoc)
            n = info.args[0]
            assert isinstance(n, TConst)
            op = "push" if info.name == "push_front" else "pop"
            prims.append(_prim(op, [ref_json(st), hexstr(int(n.value))]))
            self._forget(None)
        elif k is CallKind.METHOD:
            self._method(info, prims)
        elif k is CallKind.FUNCTION:
            self._function(info, env, prims)
        elif k is CallKind.APPLY:
            self.err(info.pos, "a table cannot be applied inside an action")
        elif k is CallKind.PACKET:
            self.err(info.pos, f"packet method '{info.name}' can only be used in a "
                               f"{'deparser' if info.name == 'emit' else 'parser'}")

    @staticmethod
    def _control_env(env: Env) -> Env:
        """The block-level env (parameters, locals), where an action's body is declared."""
        e = env
        while e.parent is not None:
            e = e.parent
        return e


def _reads(te: TExpr) -> set[FieldRef]:
    """Every field (and header validity bit) an expression reads."""
    out: set[FieldRef] = set()
    stack: list[object] = [te]
    while stack:
        x = stack.pop()
        if isinstance(x, TLoc) and isinstance(x.ref, FieldRef):
            out.add(x.ref)
        elif isinstance(x, TIsValid):
            out.add(FieldRef(x.header, "$valid$"))
        elif isinstance(x, TExpr):
            for name in x.__dataclass_fields__:
                v = getattr(x, name)
                if isinstance(v, TExpr):
                    stack.append(v)
                elif isinstance(v, tuple):
                    stack.extend(i for i in v if isinstance(i, TExpr))
    return out
