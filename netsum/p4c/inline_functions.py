"""InlineFunctions: calls of functions with a body become statements, in evaluation order.

A function whose body is one ``return <expression>;`` and whose parameters are all ``in``
stays an expression (the type checker inlines it where it is used).  Every other call of a
function with a body is expanded where it stands, following the spec's calling convention
(§6.8): the arguments are evaluated left to right into the parameters' copies (an ``out``
header starts invalid), the body runs on the copies, its ``return e`` sets the result and
skips the rest of the body (a ``done`` flag guards what follows, so control flow stays
structured), then ``out``/``inout`` copies are written back left to right and the result is
used where the call was.

A call inside an expression is first lifted out into a temporary, and so is the right side
of ``&&``/``||`` and a ``?:`` branch that holds a call (into an ``if``), so that it runs
exactly when P4 evaluates it.  The copies, results and flags are variables of the parser or
control (or of the action outside any control) the call is in, declared once per function:
P4 has no recursion, so two calls of one function are never active at the same time.

Runs after MoveDeclarations (names are unique, declarations at the top) and before the
names are resolved, so the rest of the compiler sees ordinary statements only.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import ast as A
from .decl_types import DeclaredTypes
from .diagnostics import Diagnostics, Pos
from .spelling import expr_text
from .unique_names import NameSource
from .visit import identifiers, nodes, rebuild

__all__ = ["InlineFunctions", "is_pure_expression"]

_MAX_DEPTH = 32


def is_pure_expression(f: A.FunctionDecl) -> bool:
    """``T f(in ...) { return e; }``: left to the type checker, which inlines e."""
    return (f.body is not None and len(f.body.stmts) == 1
            and isinstance(f.body.stmts[0], A.Return) and f.body.stmts[0].value is not None
            and all(p.direction in ("", "in") for p in f.params))


@dataclasses.dataclass
class _Storage:
    """The variables one function uses in one container (declared on first use)."""

    params: dict[str, str]            # parameter -> variable
    result: str | None                # return value variable (None for void)
    done: str | None                  # set by an early `return`


class InlineFunctions:
    """Pass: Program → Program without calls of non-expression functions."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        bodies: dict[str, list[A.FunctionDecl]] = {}
        for d in prog.decls:
            if isinstance(d, A.FunctionDecl) and d.body is not None and not d.type_params:
                bodies.setdefault(d.name, []).append(d)
        pure = _pure_functions(bodies)
        # Expanded here: every function but the pure ones, which stay expressions (the type
        # checker inlines them) except where they are called as statements.
        self.functions = {n: ds for n, ds in bodies.items() if n not in pure}
        self.pure = {n: ds for n, ds in bodies.items() if n in pure}
        self.tables: set[str] = set()
        if not bodies and not any(_apply_results(d) for d in prog.decls
                                  if isinstance(d, A.ControlDecl)):
            return prog
        self.types = {d.name: d for d in prog.decls if isinstance(d, A.Decl)}
        self.declared = DeclaredTypes(prog)
        self.fresh = NameSource(identifiers(prog))
        out: list[A.Node] = []
        for d in prog.decls:
            match d:
                case A.ControlDecl():
                    out.append(self._control(d))
                case A.ParserDecl():
                    out.append(self._parser(d))
                case A.ActionDecl():
                    out.append(self._action(d))
                case _:
                    out.append(d)
        return A.Program(prog.pos, tuple(out))

    # ------------------------------------------------------------ containers
    def _begin(self, params: tuple[A.Param, ...], locals_: tuple[A.Node, ...]) -> None:
        self.decls: list[A.VarDecl] = []
        self.storage: dict[int, _Storage] = {}
        self.depth = 0
        # Declared types of the names in scope, for the copies _lift makes of operands.
        self.declared.enter(params, locals_)
        self.scope = self.declared.scope

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        self._begin(c.params, c.locals)
        self.tables = {x.name for x in c.locals if isinstance(x, A.TableDecl)}
        locals_: list[A.Node] = []
        for x in c.locals:
            if isinstance(x, A.ActionDecl):
                saved = dict(self.scope)
                self.scope.update({p.name: p.type for p in x.params})
                x = dataclasses.replace(x, body=self._block(x.body))
                self.scope.clear()
                self.scope.update(saved)
            locals_.append(x)
        apply = self._block(c.apply)
        return dataclasses.replace(c, locals=tuple(self.decls) + tuple(locals_), apply=apply)

    def _parser(self, p: A.ParserDecl) -> A.ParserDecl:
        self._begin(p.params, p.locals)
        self.tables = set()
        states: list[A.ParserState] = []
        for st in p.states:
            stmts = self._stmts(st.stmts)
            t = st.transition
            if isinstance(t, A.Select) and any(self._has_call(k) for k in t.keys):
                keys: list[A.Expr] = []
                for k in t.keys:
                    pre, k2 = self._lift(k)
                    stmts += pre
                    keys.append(k2)
                t = dataclasses.replace(t, keys=tuple(keys))
            states.append(dataclasses.replace(st, stmts=tuple(stmts), transition=t))
        return dataclasses.replace(p, locals=tuple(self.decls) + p.locals, states=tuple(states))

    def _action(self, a: A.ActionDecl) -> A.ActionDecl:
        self._begin(a.params, tuple(x for x in a.body.stmts if isinstance(x, A.VarDecl)))
        self.tables = set()
        body = self._block(a.body)
        return dataclasses.replace(a, body=dataclasses.replace(
            body, stmts=tuple(self.decls) + body.stmts))

    # ------------------------------------------------------------ statements
    def _block(self, b: A.Block) -> A.Block:
        return dataclasses.replace(b, stmts=tuple(self._stmts(b.stmts)))

    def _stmts(self, stmts: tuple[A.Stmt, ...]) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        for s in stmts:
            out += self._stmt(s)
        return out

    def _stmt(self, s: A.Stmt) -> list[A.Stmt]:
        match s:
            case A.Block():
                return [self._block(s)]
            case A.If(cond=c, then=t, other=o):
                # A table's hit/miss that the condition always evaluates is the control
                # lowering's own (an apply node branching on the outcome); lifted are calls,
                # and applies the condition may skip (right of && / ||, a ?: branch).
                pre, c2 = self._lift(c) if self._cond_needs_lift(c) else ([], c)
                then = self._as_block(t)
                other = self._as_block(o) if o is not None else None
                return pre + [dataclasses.replace(s, cond=c2, then=then, other=other)]
            case A.Switch(expr=e, cases=cs):
                pre, e2 = self._lift(e)
                cases = tuple(dataclasses.replace(c, body=self._block(c.body))
                              if c.body is not None else c for c in cs)
                return pre + [dataclasses.replace(s, expr=e2, cases=cases)]
            case A.Assign(lhs=l, rhs=r) if self._has_call(l):
                # A call in the left side's indexes runs first, once (spec §11.1: the left
                # side is evaluated before the right; `a[f(x)] |= b` evaluates a[f(x)] once).
                pre, l2 = self._lift_lvalue(l)
                if isinstance(r, A.Binary) and r.left is l:    # a compound assignment
                    r = dataclasses.replace(r, left=l2)
                return pre + self._stmt(dataclasses.replace(s, lhs=l2, rhs=r))
            case A.Assign(lhs=l, rhs=A.Call() as call) if self._target(call) is not None:
                # The left side's location is fixed before the right side runs (§6.8 step
                # 3): an index the call would change is copied first.
                frozen, l2 = self._freeze_indexes(l, self._written(call))
                pre, args = self._lift_args(call)
                return frozen + pre + self._inline(call, args, l2)
            case A.Assign(lhs=l, rhs=r):
                # As above: the left side's location is fixed before a call in the right
                # side changes what its indexes read.
                frozen, l2 = self._freeze_indexes(l, self._written(r)) if self._has_call(r) \
                    else ([], l)
                pre, r2 = self._lift(r)
                return frozen + pre + [dataclasses.replace(s, lhs=l2, rhs=r2)] \
                    if pre or frozen or r2 is not r else [s]
            case A.CallStmt(call=call) if self._target(call) is not None:
                pre, args = self._lift_args(call)
                return pre + self._inline(call, args, None)
            case A.CallStmt(call=A.Call(func=A.Name(name=n)) as call) if n in self.pure:
                # A pure function called for nothing: its arguments are still evaluated
                # (they may call functions that write), the body has no effect.
                decls = self.pure[n]
                f = next((d for d in decls if len(d.params) >= len(call.args)), decls[0])
                pre, args = self._lift_args(call)
                return pre + self._inline(call, args, None, f)
            case A.CallStmt(call=call) if self._has_call(call):
                pre, args = self._lift_args(call)
                return pre + [dataclasses.replace(s, call=dataclasses.replace(
                    call, args=tuple(args)))]
            case A.Return(value=v) if v is not None and self._has_call(v):
                pre, v2 = self._lift(v)
                return pre + [dataclasses.replace(s, value=v2)]
            case A.For(init=i, cond=c, update=u, body=b):
                if c is not None and self._has_call(c):
                    # Lifted out, the call would run once instead of before every test.
                    self.diags.error(c.pos, "unsupported construct: a call of a function with "
                                            "statements in a for loop's condition")
                    return [s]
                return [dataclasses.replace(s, init=tuple(self._stmts(i)),
                                            update=tuple(self._stmts(u)),
                                            body=self._as_block(b))]
        return [s]

    def _as_block(self, s: A.Stmt) -> A.Stmt:
        out = self._stmt(s)
        return out[0] if len(out) == 1 else A.Block(s.pos, tuple(out))

    # ------------------------------------------------------------ expressions
    def _target(self, call: A.Call) -> A.FunctionDecl | None:
        f = call.func
        if not isinstance(f, A.Name) or f.name not in self.functions:
            return None
        decls = self.functions[f.name]
        return next((d for d in decls if len(d.params) >= len(call.args)), decls[0])

    def _apply_result(self, e: Any) -> bool:
        """`t.apply().hit` / `.miss` of a table of the control being expanded."""
        return isinstance(e, A.Member) and e.member in ("hit", "miss") and \
            isinstance(e.expr, A.Call) and not e.expr.args and \
            isinstance(e.expr.func, A.Member) and e.expr.func.member == "apply" and \
            isinstance(e.expr.func.expr, A.Name) and e.expr.func.expr.name in self.tables

    def _cond_needs_lift(self, c: A.Expr) -> bool:
        def skipped(e: A.Expr, always: bool) -> bool:
            if self._apply_result(e):
                return not always
            match e:
                case A.Call() if self._target(e) is not None:
                    return True
                case A.Unary(operand=x):
                    return skipped(x, always)
                case A.Binary(op=op, left=l, right=r):
                    return skipped(l, always) or skipped(r, always and op not in ("&&", "||"))
                case A.Ternary(cond=x, then=a, other=b):
                    return skipped(x, always) or skipped(a, False) or skipped(b, False)
            return self._has_call(e)
        return skipped(c, True)

    def _has_call(self, x: Any) -> bool:
        return any(isinstance(n, A.Call) and self._target(n) is not None
                   or self._apply_result(n) for n in nodes(x))

    def _temp(self, base: str, t: A.TypeExpr, pos: Pos) -> A.Name:
        name = self.fresh.new(base)
        self.decls.append(A.VarDecl(pos, (), t, name, None))
        self.scope[name] = t
        return A.Name(pos, name)

    def _written(self, x: Any) -> set[str]:
        """Spellings of the locations passed as out/inout to inlined calls inside x."""
        out: set[str] = set()
        for n in nodes(x):
            if isinstance(n, A.Call) and (f := self._target(n)) is not None:
                for p, a in zip(f.params, n.args):
                    if p.direction in ("out", "inout") and a.value is not None:
                        out.add(expr_text(a.value))
        return out

    @staticmethod
    def _reads(e: A.Expr, written: set[str]) -> bool:
        """Whether e reads one of the written locations (or a part or a whole of one)."""
        for n in nodes(e):
            if isinstance(n, (A.Name, A.Member, A.Index)):
                t = expr_text(n)
                if any(t == w or t.startswith(w + ".") or t.startswith(w + "[")
                       or w.startswith(t + ".") or w.startswith(t + "[") for w in written):
                    return True
        return False

    def _lift(self, e: A.Expr) -> tuple[list[A.Stmt], A.Expr]:
        """(statements to run first, e without calls of inlined functions)."""
        if not self._has_call(e):
            return [], e
        if self._apply_result(e):
            # The outcome into a bool, by an `if` the control lowering branches on.
            flag = self._temp("tmp", A.BoolType(e.pos), e.pos)
            return [A.If(e.pos, e, A.Block(e.pos, (A.Assign(e.pos, flag, A.BoolLit(e.pos, True)),)),
                         A.Block(e.pos, (A.Assign(e.pos, flag, A.BoolLit(e.pos, False)),)))], flag
        match e:
            case A.Call() if self._target(e) is not None:
                fn = self._target(e)
                assert fn is not None
                if isinstance(fn.ret, A.VoidType):
                    self.diags.error(e.pos, f"function '{fn.name}' returns no value; call it "
                                            "as a statement")
                    return [], e
                before, args = self._lift_args(e)
                t = self._temp("tmp", fn.ret, e.pos)
                return before + self._inline(e, args, t), t
            case A.Binary(op="&&" | "||" as op, left=l, right=r) if self._has_call(r):
                pre_l, l2 = self._lift(l)
                t = self._temp("tmp", A.BoolType(e.pos), e.pos)
                pre_r, r2 = self._lift(r)
                run_right = A.Block(e.pos, tuple(pre_r) + (A.Assign(e.pos, t, r2),))
                test: A.Expr = t if op == "&&" else A.Unary(e.pos, "!", t)
                return pre_l + [A.Assign(e.pos, t, l2), A.If(e.pos, test, run_right, None)], t
            case A.Ternary(cond=c, then=a, other=b) if self._has_call(a) or self._has_call(b):
                rt = self._branch_type(a) or self._branch_type(b)
                if rt is None:
                    self.diags.error(e.pos, "unsupported construct: a call of a function with "
                                            "statements inside a '?:' branch that is not the "
                                            "call itself")
                    return [], e
                pre_c, c2 = self._lift(c)
                t = self._temp("tmp", rt, e.pos)
                pa, a2 = self._lift(a)
                pb, b2 = self._lift(b)
                return pre_c + [A.If(e.pos, c2, A.Block(a.pos, tuple(pa) + (A.Assign(a.pos, t, a2),)),
                                   A.Block(b.pos, tuple(pb) + (A.Assign(b.pos, t, b2),)))], t
        # Anything else: lift the operands left to right (the order P4 evaluates them in).
        # An operand read before a later one's call changes it is copied first (spec §6.8:
        # `val + f(val)` with an inout `val` adds the value val had before the call).
        pre: list[A.Stmt] = []
        changes: dict[str, Any] = {}
        fields = [fld for fld in dataclasses.fields(e)]
        for k, fld in enumerate(fields):
            v = getattr(e, fld.name)
            if isinstance(v, A.Expr):
                p, v2 = self._lift(v)
                pre += p
                later = tuple(getattr(e, g.name) for g in fields[k + 1:])
                v2 = self._before(v2, later, pre)
                if v2 is not v:
                    changes[fld.name] = v2
            elif isinstance(v, tuple) and any(isinstance(i, (A.Expr, A.Arg)) for i in v):
                items: list[Any] = []
                for j, i in enumerate(v):
                    later = v[j + 1:] + tuple(getattr(e, g.name) for g in fields[k + 1:])
                    if isinstance(i, A.Arg) and i.value is not None:
                        p, v2 = self._lift(i.value)
                        pre += p
                        items.append(dataclasses.replace(i, value=self._before(v2, later, pre)))
                    elif isinstance(i, A.Expr):
                        p, v2 = self._lift(i)
                        pre += p
                        items.append(self._before(v2, later, pre))
                    else:
                        items.append(i)
                changes[fld.name] = tuple(items)
        return pre, dataclasses.replace(e, **changes) if changes else e

    def _lift_lvalue(self, lv: A.Expr) -> tuple[list[A.Stmt], A.Expr]:
        """An lvalue whose stack indexes hold calls, with each such index computed first into
        a temporary (left to right, outer stack first)."""
        match lv:
            case A.Index(expr=x, index=i):
                pre, x2 = self._lift_lvalue(x)
                if self._has_call(i):
                    p, i2 = self._lift(i)
                    pre += p
                    t = self.declared.type_of(i2)
                    if t is not None:
                        copy = self._temp("tmp", t, i.pos)
                        pre.append(A.Assign(i.pos, copy, i2))
                        i2 = copy
                    i = i2
                return pre, dataclasses.replace(lv, expr=x2, index=i)
            case A.Member(expr=x) | A.Slice(expr=x):
                pre, x2 = self._lift_lvalue(x)
                return pre, dataclasses.replace(lv, expr=x2) if x2 is not x else lv
        return [], lv

    def _freeze_indexes(self, lv: A.Expr, written: set[str]) -> tuple[list[A.Stmt], A.Expr]:
        """An lvalue whose stack indexes read a location in ``written``, with those indexes
        copied into temporaries first."""
        match lv:
            case A.Index(expr=x, index=i):
                pre, x2 = self._freeze_indexes(x, written)
                if written and self._reads(i, written) and \
                        (t := self.declared.type_of(i)) is not None:
                    copy = self._temp("tmp", t, i.pos)
                    pre.append(A.Assign(i.pos, copy, i))
                    i = copy
                return pre, dataclasses.replace(lv, expr=x2, index=i)
            case A.Member(expr=x) | A.Slice(expr=x):
                pre, x2 = self._freeze_indexes(x, written)
                return pre, dataclasses.replace(lv, expr=x2) if x2 is not x else lv
        return [], lv

    def _before(self, v: A.Expr, later: tuple[Any, ...], pre: list[A.Stmt]) -> A.Expr:
        """v, or a copy of it made now when a call in ``later`` (evaluated after v) writes a
        location v reads."""
        written = self._written(later) if self._has_call(later) else set()
        if written and not isinstance(v, (A.IntLit, A.BoolLit)) and self._reads(v, written):
            vt = self.declared.type_of(v)
            if vt is not None:
                copy = self._temp("tmp", vt, v.pos)
                pre.append(A.Assign(v.pos, copy, v))
                return copy
        return v

    def _branch_type(self, x: A.Expr) -> A.TypeExpr | None:
        if isinstance(x, A.Call):
            f = self._target(x)
            if f is not None and not isinstance(f.ret, A.VoidType):
                return f.ret
        if isinstance(x, A.Ternary):
            return self._branch_type(x.then) or self._branch_type(x.other)
        if self._apply_result(x):
            return A.BoolType(x.pos)
        return self.declared.type_of(x)

    def _lift_args(self, call: A.Call) -> tuple[list[A.Stmt], list[A.Arg]]:
        pre: list[A.Stmt] = []
        args: list[A.Arg] = []
        for a in call.args:
            if a.value is None:
                args.append(a)
                continue
            p, v = self._lift(a.value)
            pre += p
            args.append(dataclasses.replace(a, value=v))
        return pre, args

    # ------------------------------------------------------------ the call
    def _storage(self, f: A.FunctionDecl) -> _Storage:
        st = self.storage.get(id(f))
        if st is None:
            params = {}
            for p in f.params:
                params[p.name] = self._temp(f"{p.name}", p.type, p.pos).name
            result = None if isinstance(f.ret, A.VoidType) else \
                self._temp("retval", f.ret, f.pos).name
            assert f.body is not None
            done = self._temp("hasReturned", A.BoolType(f.pos), f.pos).name \
                if _early_return(f.body.stmts) else None
            # The function's own variables (unique names, at the top of its body).
            for s in f.body.stmts:
                if isinstance(s, A.VarDecl):
                    self.decls.append(dataclasses.replace(s, init=None))
            st = self.storage[id(f)] = _Storage(params, result, done)
        return st

    def _inline(self, call: A.Call, args: list[A.Arg], target: A.Expr | None,
                f: A.FunctionDecl | None = None) -> list[A.Stmt]:
        f = f or self._target(call)
        assert f is not None and f.body is not None
        pos = call.pos
        if self.depth >= _MAX_DEPTH:
            self.diags.error(pos, f"function '{f.name}' calls itself (recursion is not allowed "
                                  "in P4)")
            return []
        bound = self._bind(f, args, pos)
        if bound is None:
            return []
        st = self._storage(f)
        out: list[A.Stmt] = []
        copy_out: list[tuple[A.Expr, A.Name]] = []
        for p in f.params:
            var = A.Name(pos, st.params[p.name])
            value = bound.get(p.name)
            if p.direction == "out":
                out += self._invalidate(p.type, var, pos)
            elif value is not None:
                out.append(A.Assign(pos, var, value))
            if p.direction in ("out", "inout") and value is not None:
                copy_out.append((value, var))
        if st.done is not None:
            out.append(A.Assign(pos, A.Name(pos, st.done), A.BoolLit(pos, False)))
        body = _substitute(f.body.stmts, {n: v for n, v in st.params.items()})
        # Its variables are the container's now; a local constant is set on every call.
        body = tuple(A.Assign(s.pos, A.Name(s.pos, s.name), s.init)
                     if isinstance(s, A.VarDecl) and s.init is not None else s
                     for s in body if not isinstance(s, A.VarDecl) or s.init is not None)
        body = _remove_returns(body, st.result, st.done, pos)
        self.depth += 1
        try:
            out += self._stmts(body)
        finally:
            self.depth -= 1
        for arg, var in copy_out:
            out.append(A.Assign(pos, arg, var))
        if target is not None and st.result is not None:
            out.append(A.Assign(pos, target, A.Name(pos, st.result)))
        return out

    def _bind(self, f: A.FunctionDecl, args: list[A.Arg], pos: Pos) -> dict[str, A.Expr] | None:
        names = [p.name for p in f.params]
        bound: dict[str, A.Expr] = {}
        if any(a.name for a in args):
            for a in args:
                if a.name not in names:
                    self.diags.error(a.pos, f"'{f.name}' has no parameter '{a.name}'")
                    return None
                if a.value is not None:
                    bound[a.name] = a.value
        else:
            if len(args) > len(names):
                self.diags.error(pos, f"'{f.name}' takes {len(names)} argument(s), got "
                                      f"{len(args)}")
                return None
            for p, a in zip(f.params, args):
                if a.value is not None:
                    bound[p.name] = a.value
        for p in f.params:
            if p.name not in bound and p.default is not None:
                bound[p.name] = p.default
            if p.name not in bound and p.direction != "out":
                self.diags.error(pos, f"'{f.name}': missing argument for parameter '{p.name}'")
                return None
        return bound

    def _invalidate(self, t: A.TypeExpr, var: A.Expr, pos: Pos) -> list[A.Stmt]:
        """Make every header inside an ``out`` copy invalid (spec §6.8)."""
        d = self.types.get(t.name) if isinstance(t, A.TypeName) else None
        if isinstance(d, A.Typedef):
            return self._invalidate(d.type, var, pos)
        if isinstance(d, A.HeaderDecl):
            return [A.CallStmt(pos, A.Call(pos, A.Member(pos, var, "setInvalid"), (), ()))]
        if isinstance(d, A.StructDecl):
            out: list[A.Stmt] = []
            for fld in d.fields:
                out += self._invalidate(fld.type, A.Member(pos, var, fld.name), pos)
            return out
        if isinstance(t, A.StackType) and isinstance(t.size, A.IntLit):
            out = []
            for i in range(t.size.value):
                out += self._invalidate(t.elem, A.Index(pos, var, A.IntLit(pos, i, None, False,
                                                                           str(i))), pos)
            return out
        return []


def _pure_functions(bodies: dict[str, list[A.FunctionDecl]]) -> set[str]:
    """Names of the functions that stay expressions: ``return e;`` with ``in`` parameters
    only, where e calls no function that must be expanded (or might be: a name declared
    more than once is expanded)."""
    pure = {n for n, ds in bodies.items() if len(ds) == 1 and is_pure_expression(ds[0])}
    changed = True
    while changed:
        changed = False
        for n in sorted(pure):
            ret = bodies[n][0].body.stmts[0]  # type: ignore[union-attr]
            assert isinstance(ret, A.Return)
            if any(c in bodies and c not in pure for c in _called_names(ret.value)):
                pure.discard(n)
                changed = True
    return pure


def _called_names(x: Any) -> set[str]:
    return {n.func.name for n in nodes(x) if isinstance(n, A.Call) and isinstance(n.func, A.Name)}


def _early_return(stmts: tuple[A.Stmt, ...]) -> bool:
    """Whether some `return` is not the last statement of the body (needs a done flag)."""
    def has(s: A.Stmt) -> bool:
        match s:
            case A.Return():
                return True
            case A.Block(stmts=ss):
                return any(has(x) for x in ss)
            case A.If(then=t, other=o):
                return has(t) or (o is not None and has(o))
            case A.For(body=b):
                return has(b)
        return False
    body = [s for s in stmts if not isinstance(s, A.VarDecl)]
    return any(has(s) for s in body[:-1]) or (bool(body) and not isinstance(body[-1], A.Return)
                                              and has(body[-1]))


def _remove_returns(stmts: tuple[A.Stmt, ...], result: str | None, done: str | None,
                    pos: Pos) -> tuple[A.Stmt, ...]:
    """`return e;` as `result = e; done = true;`, each later statement guarded by !done."""
    def ret(s: A.Return) -> list[A.Stmt]:
        out: list[A.Stmt] = []
        if s.value is not None and result is not None:
            out.append(A.Assign(s.pos, A.Name(s.pos, result), s.value))
        if done is not None:
            out.append(A.Assign(s.pos, A.Name(s.pos, done), A.BoolLit(s.pos, True)))
        return out

    def stmt(s: A.Stmt) -> tuple[list[A.Stmt], bool]:
        match s:
            case A.Return():
                return ret(s), True
            case A.Block(stmts=ss):
                body, may = seq(ss)
                return [A.Block(s.pos, tuple(body))], may
            case A.If(cond=c, then=t, other=o):
                tb, mt = stmt(t)
                ob, mo = stmt(o) if o is not None else ([], False)
                return [A.If(s.pos, c, A.Block(t.pos, tuple(tb)),
                             A.Block(o.pos, tuple(ob)) if o is not None else None)], mt or mo
            case A.For(cond=c, update=u, body=b):
                bb, may = stmt(b)
                if not may:
                    return [s], False
                # A return inside the loop ends it: neither the update nor another test runs.
                assert done is not None  # _early_return: a loop holding a return needs one
                running = A.Unary(pos, "!", A.Name(pos, done))
                cond = running if c is None else A.Binary(c.pos, "&&", running, c)
                update = (A.If(pos, running, A.Block(pos, u), None),) if u else u
                return [dataclasses.replace(s, cond=cond, update=update,
                                            body=A.Block(b.pos, tuple(bb)))], True
        return [s], False

    def seq(ss: tuple[A.Stmt, ...]) -> tuple[list[A.Stmt], bool]:
        out: list[A.Stmt] = []
        for i, s in enumerate(ss):
            body, may = stmt(s)
            out += body
            if may and i + 1 < len(ss):
                rest, _ = seq(ss[i + 1:])
                if done is not None and rest:
                    guard = A.Unary(pos, "!", A.Name(pos, done))
                    out.append(A.If(pos, guard, A.Block(pos, tuple(rest)), None))
                return out, True
            if may:
                return out, True
        return out, False

    return tuple(seq(stmts)[0])


def _substitute(stmts: tuple[A.Stmt, ...], names: dict[str, str]) -> tuple[A.Stmt, ...]:
    """The body with its parameters renamed to the variables holding their copies."""
    def visit(n: A.Node) -> A.Node | None:
        if isinstance(n, A.Annotation):
            return n
        if isinstance(n, A.Name) and not n.top_level and n.name in names:
            return A.Name(n.pos, names[n.name], False, n.orig or n.name)
        return None

    return tuple(rebuild(s, visit) for s in stmts)


def _apply_results(c: A.ControlDecl) -> bool:
    """Whether a table's hit/miss is read anywhere in the control's apply block (cheap check
    before the full expansion)."""
    return any(isinstance(n, A.Member) and n.member in ("hit", "miss") for n in nodes(c.apply))
