"""Inlining of action calls: copy-in/copy-out (spec §6.8) and structured early exits.

A call ``a(args)`` inside an action body or an ``apply`` statement group is expanded in
place.  Every argument is evaluated into a fresh copy before the body runs (an ``out``
header starts invalid), the body works on the copies only, and when it ends (normally, by
``return`` or by ``exit``) the ``out``/``inout`` copies are written back to the argument
locations, left to right.  Binding a parameter to its argument directly would alias it with
anything the body reaches by name (another parameter, a control local, the headers).

``return`` and ``exit`` inside an inlined body cannot jump to the end of the enclosing BMv2
action: the copy-out and the rest of the caller follow.  They set flags instead (``done``
for the inlined call, one ``exited`` flag per BMv2 action, spec §12.5: exit ends every
caller too, after their copy-out), each statement after one that may have stopped is
guarded by the flags, and the exit primitive itself is the action's last step.  So every jump stays structured (an if/else or an early return at the
end of the action), which is all BMv2's p4c output and the embedded switch use.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import ast as A
from .calls import CallInfo
from .diagnostics import Pos
from .exprjson import Json, hexstr, ref_json
from .ir import (FieldRef, HeaderRef, ParamRef, StackRef, StructRef, TBinary, TConst, TExpr,
                 TLoc, TSlice, TUnary, UnionRef, UnionStackRef)
from .lower_ctx import LowerCtx, as_param_b2d, prim as _prim
from .resolve import ConstValue
from .scopes import Env, Sym, SymKind
from .types import Bool, show
from .visit import nested

__all__ = ["InlineActions", "Frame"]


@dataclass
class Frame:
    """One inlined call being lowered: its ``done`` flag when its body has a ``return``."""

    done: TLoc | None = None


class InlineActions:
    """Action-call inlining; relies on ActionLowering's statement and assignment lowering."""

    ctx: LowerCtx
    frames: list[Frame]
    exited: TLoc | None
    _stops: dict[int, bool]

    # Defined by ActionLowering, the only subclass (declared for the type checker).
    def err(self, pos: Pos, msg: str) -> None:
        raise NotImplementedError

    def assign(self, lhs: TLoc, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        raise NotImplementedError

    def _forget(self, ref: FieldRef | None) -> None:
        raise NotImplementedError

    def _assign_slice(self, lhs: TSlice, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        raise NotImplementedError

    def _stmts(self, stmts: tuple[A.Stmt, ...], env: Env, prims: list[Json],
               returns: list[int]) -> None:
        raise NotImplementedError

    @staticmethod
    def _patch(prims: list[Json], jumps: list[int], target: int) -> None:
        raise NotImplementedError

    @staticmethod
    def _control_env(env: Env) -> Env:
        raise NotImplementedError

    # ------------------------------------------------------------ flags
    def _flag(self, pos: Pos) -> TLoc:
        return self.ctx.layout.temp(Bool(), pos)

    def _set(self, flag: TLoc, value: bool, prims: list[Json]) -> None:
        self.assign(flag, TConst(Bool(), flag.pos, value), flag.pos, prims)

    def early_return(self, pos: Pos, prims: list[Json]) -> None:
        """``return`` inside an inlined body: the call is done (the rest is guarded)."""
        done = self.frames[-1].done
        assert done is not None  # made by inline() for every body with a return
        self._set(done, True, prims)

    def early_exit(self, pos: Pos, prims: list[Json]) -> None:
        """``exit`` inside an inlined body only sets the ``exited`` flag: every caller's rest
        is skipped, their copy-outs still run, and ``exit_at_end`` issues the exit primitive
        as the action's last step (so no copy-out follows an exit primitive, whatever a
        target does with the primitives after one)."""
        assert self.exited is not None  # set up by inline() before any body that can exit
        self._set(self.exited, True, prims)

    def exit_at_end(self, prims: list[Json]) -> None:
        """``if (exited) exit;`` as the last primitives of the action, when a call can exit."""
        if self.exited is None:
            return
        jz = len(prims)
        prims.append(_prim("_jump_if_zero", [as_param_b2d(self.exited), hexstr(jz + 2)]))
        prims.append(_prim("exit", []))

    def may_stop(self, s: A.Stmt, env: Env) -> bool:
        """Whether executing s can end the current inlined call (a return or an exit in it,
        or a call of an action that can exit)."""
        return any(isinstance(x, (A.Return, A.Exit)) or self._calls_exiting(x, env)
                   for x in nested(s))

    def _calls_exiting(self, s: A.Stmt, env: Env) -> bool:
        """Whether s calls an action that can exit."""
        match s:
            case A.CallStmt(call=A.Call(func=A.Name() as f)):
                sym = env.bind(f)
                return sym is not None and sym.kind is SymKind.ACTION and \
                    isinstance(sym.value, A.ActionDecl) and self._can_exit(sym.value, env)
        return False

    def _can_exit(self, decl: A.ActionDecl, env: Env) -> bool:
        key = id(decl)
        if key not in self._stops:
            self._stops[key] = False  # P4 has no recursion; this also ends any cycle
            self._stops[key] = any(isinstance(x, A.Exit) or self._calls_exiting(x, env)
                                   for x in nested(decl.body))
        return self._stops[key]

    @staticmethod
    def _returns_in(s: A.Stmt) -> bool:
        return any(isinstance(x, A.Return) for x in nested(s))

    def guard(self, prims: list[Json]) -> int | None:
        """After a statement that may have ended the current call: skip what follows unless
        neither flag is set.  Returns the jump to patch to the end of the sequence."""
        frame = self.frames[-1] if self.frames else None
        conds: list[TExpr] = [f for f in (frame.done if frame else None, self.exited)
                              if f is not None]
        if not conds:
            return None
        cond: TExpr = conds[0]
        for c in conds[1:]:
            cond = TBinary(Bool(), c.pos, "||", cond, c)
        jz = len(prims)
        prims.append(_prim("_jump_if_zero", [as_param_b2d(TUnary(Bool(), cond.pos, "!", cond)),
                                             hexstr(0)]))
        return jz

    # ------------------------------------------------------------ the call
    def inline(self, info: CallInfo, env: Env, prims: list[Json]) -> None:
        decl = info.target
        assert isinstance(decl, A.ActionDecl)
        # The callee sees the scope it was declared in: its block, or only globals.
        if env.g.actions.get(decl.name) is decl:
            callee = Env(None, env.g, env.block)
        else:
            callee = self._control_env(env).child()
        copy_out: list[tuple[TLoc | TSlice, TLoc]] = []
        for p, a in zip(info.params, info.args):
            if p.direction in ("out", "inout"):
                pt = env.g.typed.declared(p.type, env.g, self.ctx.diags)
                if pt is None:
                    continue
                tmp = self.ctx.layout.copy_of(p.name, pt, p.pos)
                if tmp is None:
                    self.err(a.pos if a is not None else info.pos,
                             f"unsupported construct: {p.direction} parameter '{p.name}' of "
                             f"type {show(pt)}")
                    continue
                if p.direction == "inout" and a is not None:
                    self.assign(tmp, a, a.pos, prims)
                else:
                    self._invalidate(tmp, prims)
                if isinstance(a, (TLoc, TSlice)):
                    copy_out.append((a, tmp))
                callee.add(Sym(SymKind.VAR, p.name, tmp))
            elif a is None:
                continue
            elif isinstance(a, TConst):
                callee.add(Sym(SymKind.CONST, p.name, ConstValue(a.type, a.value)))
            elif isinstance(a, TLoc) and isinstance(a.ref, ParamRef):
                callee.add(Sym(SymKind.VAR, p.name, a))
            else:
                tmp = self.ctx.layout.temp(a.type, a.pos)
                self.assign(tmp, a, a.pos, prims)
                callee.add(Sym(SymKind.VAR, p.name, tmp))
        if self.exited is None and self._can_exit(decl, env):
            self.exited = self._flag(info.pos)
            self._set(self.exited, False, prims)
        frame = Frame()
        if self._returns_in(decl.body):
            frame.done = self._flag(info.pos)
            self._set(frame.done, False, prims)
        self.frames.append(frame)
        try:
            self._stmts(decl.body.stmts, callee, prims, [])
        finally:
            self.frames.pop()
        self._forget(None)
        for arg, tmp in copy_out:
            if isinstance(arg, TSlice):
                self._assign_slice(arg, tmp, info.pos, prims)
            else:
                self.assign(arg, tmp, info.pos, prims)

    def _invalidate(self, loc: TLoc, prims: list[Json]) -> None:
        """An ``out`` parameter starts with every header in it invalid (spec §6.8)."""
        ref = loc.ref
        if isinstance(ref, HeaderRef):
            prims.append(_prim("remove_header", [ref_json(loc)]))
        elif isinstance(ref, StackRef):
            for i in range(ref.type.size):
                prims.append(_prim("remove_header", [{"type": "header",
                                                      "value": f"{ref.name}[{i}]"}]))
        elif isinstance(ref, (StructRef, UnionRef)):
            for _, member in ref.members:
                self._invalidate(member, prims)
        elif isinstance(ref, UnionStackRef):
            for u in ref.unions:
                self._invalidate(u, prims)
