"""ExpandStackIndex: a header stack element picked by a run-time index, `hs[i]`, becomes one
branch per possible element (p4c HSIndexSimplifier): BMv2 names header instances, so an
element is known only once the index is.

    hs[i].f = x;   =>   tmp = i;
                        if (tmp == 0) { hs[0].f = x; } else if (tmp == 1) { hs[1].f = x; } ...

The index is evaluated once, before the branches.  An index out of range takes no branch:
the statement does nothing (P4_16 §8.18: a write out of bounds has no effect; what a read
gives is unspecified).  A condition that reads `hs[i]` is computed into a bool first, and the
expression of a `switch` into a variable of its type, so the branches are not copied.  A
table key reading `hs[i]` (or another table's `apply().hit`) becomes a variable set before
each application of the table (p4c's SimplifyKey).  Nested indexes (`hs[hs[i].a]`) expand innermost first.  Parser states cannot
branch in BMv2: an index there is left to the type checker, which reports it as unsupported.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import ast as A
from .decl_types import DeclaredTypes
from .diagnostics import Diagnostics, Pos
from .spelling import key_name
from .unique_names import NameSource
from .visit import fields_of, identifiers, nodes, rebuild

__all__ = ["ExpandStackIndex"]


class ExpandStackIndex:
    """Pass: Program → Program without run-time stack indexes outside parsers."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.declared = DeclaredTypes(prog)
        self.fresh: NameSource | None = None
        self.key_sets: dict[str, list[A.Stmt]] = {}  # table -> its key assignments
        self.prog = prog
        out: list[A.Node] = []
        for d in prog.decls:
            match d:
                case A.ControlDecl():
                    out.append(self._control(d))
                case A.ActionDecl():
                    self.key_sets = {}
                    self.declared.enter(d.params, d.body.stmts)
                    self.decls: list[A.VarDecl] = []
                    body = self._block(d.body)
                    out.append(dataclasses.replace(d, body=dataclasses.replace(
                        body, stmts=tuple(self.decls) + body.stmts)))
                case _:
                    out.append(d)
        return A.Program(prog.pos, tuple(out))

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        self.declared.enter(c.params, c.locals)
        self.decls = []
        self.key_sets = {}
        locals_: list[A.Node] = []
        for x in c.locals:
            if isinstance(x, A.TableDecl):
                x = self._table(x)
            if isinstance(x, A.ActionDecl):
                saved = dict(self.declared.scope)
                self.declared.scope.update({p.name: p.type for p in x.params})
                x = dataclasses.replace(x, body=self._block(x.body))
                self.declared.scope.clear()
                self.declared.scope.update(saved)
            locals_.append(x)
        apply = self._block(c.apply)
        return dataclasses.replace(c, locals=tuple(self.decls) + tuple(locals_), apply=apply)

    def _table(self, t: A.TableDecl) -> A.TableDecl:
        """A key reading `hs[i]`, or another table's apply result (`u.apply().hit`), becomes
        a variable set before each application of the table (p4c SimplifyKey): the
        assignment expands like any other statement; the key keeps its name."""
        props: list[A.TableProperty] = []
        for p in t.properties:
            if p.name == "key" and isinstance(p.value, tuple):
                keys: list[A.KeyElement] = []
                for ke in p.value:
                    ty = self.declared.type_of(ke.expr)
                    applied = _applied_result(ke.expr)
                    if applied is not None and applied != t.name:
                        ty = A.BoolType(ke.pos)
                    else:
                        applied = None
                    text = key_name(ke.expr)
                    if ty is None or (applied is None and self._find((ke.expr,)) is None) or (
                            text is None and not any(a.name == "name" for a in ke.annotations)):
                        keys.append(ke)
                        continue
                    tmp = self._temp(ty, ke.pos, "key")
                    set_key: A.Stmt = A.Assign(ke.pos, tmp, ke.expr)
                    if applied is not None:
                        # BMv2 reads an apply result in a condition only (p4c's midend
                        # turns `k = t.apply().hit` into an if as well).
                        set_key = A.If(ke.pos, ke.expr, A.Block(ke.pos, (A.Assign(
                            ke.pos, tmp, A.BoolLit(ke.pos, True)),)), A.Block(ke.pos, (
                                A.Assign(ke.pos, tmp, A.BoolLit(ke.pos, False)),)))
                    self.key_sets.setdefault(t.name, []).append(set_key)
                    annos = ke.annotations
                    if text is not None and not any(a.name == "name" for a in annos):
                        annos += (A.Annotation(ke.pos, "name", (A.StrLit(ke.pos, text),),
                                               f'"{text}"'),)
                    keys.append(dataclasses.replace(ke, expr=tmp, annotations=annos))
                p = dataclasses.replace(p, value=tuple(keys))
            props.append(p)
        return dataclasses.replace(t, properties=tuple(props))

    def _keys_before(self, s: A.Stmt) -> list[A.Stmt]:
        """The key assignments of the tables that statement s itself applies."""
        match s:
            case A.CallStmt(call=c) | A.If(cond=c) | A.Switch(expr=c):
                roots: tuple[Any, ...] = (c,)
            case A.Assign(lhs=l, rhs=r):
                roots = (l, r)
            case _:
                return []
        out: list[A.Stmt] = []
        for n in nodes(roots):
            if isinstance(n, A.Call) and isinstance(n.func, A.Member) and \
                    n.func.member == "apply" and isinstance(n.func.expr, A.Name):
                out += self.key_sets.get(n.func.expr.name, [])
        return out

    # ------------------------------------------------------------ statements
    def _block(self, b: A.Block) -> A.Block:
        out: list[A.Stmt] = []
        for s in b.stmts:
            out += self._stmt(s)
        return dataclasses.replace(b, stmts=tuple(out))

    def _stmt(self, s: A.Stmt, depth: int = 0, keyed: bool = False) -> list[A.Stmt]:
        if not keyed and self.key_sets:
            pre = self._keys_before(s)
            if pre:
                return [y for a in pre for y in self._stmt(a, depth)] + \
                    self._stmt(s, depth, True)
        own: tuple[Any, ...]
        match s:
            case A.Assign(lhs=l, rhs=r):
                own = (l, r)
            case A.CallStmt(call=c):
                own = (c,)
            case A.If(cond=c):
                own = (c,)
            case A.Block():
                return [self._block(s)]
            case A.Switch(expr=e, cases=cs):
                t = self.declared.type_of(e)
                if t is not None and self._find((e,)) is not None:
                    # The element is read once, before the cases (p4c: the switch's key).
                    tmp = self._temp(t, s.pos)
                    return self._stmt(A.Assign(e.pos, tmp, e), depth + 1) + \
                        self._stmt(dataclasses.replace(s, expr=tmp), depth + 1)
                return [dataclasses.replace(s, cases=tuple(
                    dataclasses.replace(c, body=self._block(c.body)) if c.body else c
                    for c in cs))]
            case A.For(init=i, update=u, body=b):
                # A run-time index in the condition stays (it is read on every iteration; the
                # lowering names it); init, update and body expand as any statement does.
                def stmts(xs: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
                    return tuple(y for x in xs for y in self._stmt(x, depth))
                body = self._stmt(b, depth)
                return [dataclasses.replace(s, init=stmts(i), update=stmts(u),
                                            body=body[0] if len(body) == 1
                                            else A.Block(b.pos, tuple(body)))]
            case _:
                return [s]
        found = self._find(own)
        if found is None or depth > 64:
            if isinstance(s, A.If):
                then = A.Block(s.then.pos, tuple(self._stmt(s.then, depth)))
                other = A.Block(s.other.pos, tuple(self._stmt(s.other, depth))) \
                    if s.other is not None else None
                return [dataclasses.replace(s, then=then, other=other)]
            return [s]
        index, size = found
        if isinstance(s, A.If):
            # Only the condition reads the element: compute it once, keep the branches.
            flag = self._temp(A.BoolType(s.pos), s.pos)
            return self._stmt(A.Assign(s.cond.pos, flag, s.cond), depth + 1) + \
                self._stmt(dataclasses.replace(s, cond=flag), depth + 1)
        t = self.declared.type_of(index.index)
        value = index.index
        if t is None:  # not readable off the declarations: any index fits a bit<32> copy
            t = A.BitType(s.pos, A.IntLit(s.pos, 32, None, False, "32"))
            value = A.Cast(value.pos, t, value)
        tmp = self._temp(t, s.pos)
        out: list[A.Stmt] = [A.Assign(s.pos, tmp, value)]
        chain: A.Stmt | None = None
        for k in reversed(range(size)):
            lit = A.IntLit(s.pos, k, None, False, str(k))
            elem = A.Index(index.pos, index.expr, lit)
            body = self._stmt(_replace(s, index, elem), depth + 1)
            chain = A.If(s.pos, A.Binary(s.pos, "==", tmp, lit), A.Block(s.pos, tuple(body)),
                         chain)
        if chain is not None:
            out.append(chain)
        return out

    def _temp(self, t: A.TypeExpr, pos: Pos, base: str = "hsiVar") -> A.Name:
        if self.fresh is None:
            self.fresh = NameSource(identifiers(self.prog))
        name = self.fresh.new(base)
        self.decls.append(A.VarDecl(pos, (), t, name, None))
        self.declared.scope[name] = t
        return A.Name(pos, name)

    def _find(self, roots: tuple[Any, ...]) -> tuple[A.Index, int] | None:
        """The first run-time indexed stack element whose index has no such element in it."""
        stack: list[Any] = list(reversed(roots))
        while stack:
            n = stack.pop()
            if isinstance(n, tuple):
                stack.extend(reversed(n))
                continue
            if not isinstance(n, A.Node) or isinstance(n, A.Annotation):
                continue
            if isinstance(n, A.Index) and self.declared.const_int(n.index) is None:
                inner = self._find((n.index,))
                if inner is not None:
                    return inner
                size = self.declared.stack_size(self.declared.type_of(n.expr))
                if size is not None:
                    return n, size
            stack.extend(reversed([getattr(n, f) for f in fields_of(n)]))
        return None


def _applied_result(e: A.Expr) -> str | None:
    """The table of `t.apply().hit` / `.miss` (None for anything else)."""
    if isinstance(e, A.Member) and e.member in ("hit", "miss") and \
            isinstance(e.expr, A.Call) and isinstance(e.expr.func, A.Member) and \
            e.expr.func.member == "apply" and isinstance(e.expr.func.expr, A.Name):
        return e.expr.func.expr.name
    return None


def _replace(s: A.Stmt, old: A.Index, new: A.Expr) -> A.Stmt:
    """s with the node ``old`` (by identity) replaced by ``new``."""
    def visit(n: A.Node) -> A.Node | None:
        if n is old:
            return new
        return n if isinstance(n, A.Annotation) else None

    out = rebuild(s, visit)
    assert isinstance(out, A.Stmt)
    return out
