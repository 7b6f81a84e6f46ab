"""UniqueNames: give every variable and local constant a name no other identifier has.

After this pass a name never needs scope to be understood: every ``VarDecl`` (in a parser,
a parser state, a control, an action, a function or any nested block) and every local
``const`` is renamed to a program-wide unique identifier, and every use is rewritten to it,
following P4's lexical scoping (spec §6.3: a name means the nearest enclosing declaration
made before the use).  MoveDeclarations can then hoist declarations out of blocks, and the
lowering can map a name straight to storage, without any name resolving to the wrong
declaration (the failure mode this pass exists to rule out: a later pass looking a name up
by scope in a scope that no longer matches the source).

New names follow p4c's generator (``MinimalNameGenerator``): a trailing ``_<digits>`` is
dropped and the base gets the first ``_0``, ``_1``, ... not used anywhere in the program, so
``t`` becomes ``t_0``.  Tables, actions and instances keep their names (their control-plane
names come from them); table key names keep the source spelling through a ``@name``
annotation, as p4c's TableKeyNames does before its renaming.  Re-declarations in one scope
are reported here, since renaming would otherwise hide them.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from . import ast as A
from .diagnostics import Diagnostics, Pos
from .spelling import expr_text, key_name
from .visit import identifiers, rebuild

__all__ = ["UniqueNames", "NameSource"]

_SUFFIX = re.compile(r"_\d+$")


class NameSource:
    """Fresh names that no identifier of the program (or an earlier fresh name) uses."""

    def __init__(self, used: set[str]) -> None:
        self.used = used
        self.counters: dict[str, int] = {}

    def new(self, base: str) -> str:
        base = _SUFFIX.sub("", base) or base
        if base not in self.used:
            self.used.add(base)
            return base
        i = self.counters.get(base, 0)
        while f"{base}_{i}" in self.used:
            i += 1
        self.counters[base] = i + 1
        name = f"{base}_{i}"
        self.used.add(name)
        return name


@dataclasses.dataclass
class _Scope:
    names: dict[str, str]           # source name -> name after renaming
    declared: dict[str, Pos]        # declared in this very scope (for re-declarations)
    owner: str = ""                 # the parser/control, for messages at block level


class UniqueNames:
    """Pass: Program → Program with unique variable and local constant names."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        self.fresh = NameSource(identifiers(prog))
        self.scopes: list[_Scope] = []
        decls = tuple(self._top(d) for d in prog.decls)
        return A.Program(prog.pos, decls)

    # ------------------------------------------------------------ scopes
    def _push(self, owner: str = "") -> _Scope:
        s = _Scope({}, {}, owner or (self.scopes[-1].owner if self.scopes else ""))
        self.scopes.append(s)
        return s

    def _pop(self) -> None:
        self.scopes.pop()

    def _declare(self, name: str, pos: Pos, rename: bool) -> str:
        """Enter a declaration in the innermost scope; returns its (new) name."""
        s = self.scopes[-1]
        first = s.declared.get(name)
        if first is not None:
            where = f" in '{s.owner}'" if s.owner and len(self.scopes) == 1 else ""
            self.diags.error(pos, f"re-declaration of '{name}'{where} (first declared at {first})")
        s.declared.setdefault(name, pos)
        new = self.fresh.new(name) if rename else name
        s.names[name] = new
        return new

    def _lookup(self, name: str) -> str | None:
        for s in reversed(self.scopes):
            if name in s.names:
                return s.names[name]
        return None

    # ------------------------------------------------------------ expressions and types
    def _visit(self, n: A.Node) -> A.Node | None:
        if isinstance(n, A.Annotation):
            return n  # annotation bodies are not expressions of the program
        if isinstance(n, A.Name) and not n.top_level:
            new = self._lookup(n.name)
            if new is not None and new != n.name:
                return A.Name(n.pos, new, False, n.orig or n.name)
            return n
        return None

    def _x(self, node: Any) -> Any:
        return rebuild(node, self._visit)

    # ------------------------------------------------------------ declarations
    def _top(self, d: A.Node) -> A.Node:
        match d:
            case A.ParserDecl():
                return self._parser(d)
            case A.ControlDecl():
                return self._control(d)
            case A.ActionDecl():
                self._push()
                try:
                    return self._action(d)
                finally:
                    self._pop()
            case A.FunctionDecl(body=A.Block()):
                self._push()
                try:
                    for p in d.params:
                        self._declare(p.name, p.pos, False)
                    assert d.body is not None
                    return dataclasses.replace(d, body=self._block(d.body))
                finally:
                    self._pop()
        return d

    def _params(self, params: tuple[A.Param, ...]) -> None:
        for p in params:
            self._declare(p.name, p.pos, False)

    def _parser(self, d: A.ParserDecl) -> A.ParserDecl:
        self._push(d.name)
        try:
            self._params(d.params)
            self._params(d.ctor_params)
            locals_ = tuple(self._local(x) for x in d.locals)
            states = tuple(self._state(st) for st in d.states)
            return dataclasses.replace(d, locals=locals_, states=states)
        finally:
            self._pop()

    def _state(self, st: A.ParserState) -> A.ParserState:
        self._push()
        try:
            stmts = tuple(self._stmt(s) for s in st.stmts)
            return dataclasses.replace(st, stmts=stmts, transition=self._x(st.transition))
        finally:
            self._pop()

    def _control(self, d: A.ControlDecl) -> A.ControlDecl:
        self._push(d.name)
        try:
            self._params(d.params)
            self._params(d.ctor_params)
            locals_ = tuple(self._local(x) for x in d.locals)
            return dataclasses.replace(d, locals=locals_, apply=self._block(d.apply))
        finally:
            self._pop()

    def _local(self, x: A.Node) -> A.Node:
        match x:
            case A.VarDecl():
                return self._var(x)
            case A.ConstDecl():
                value = self._x(x.value)
                t = self._x(x.type)
                return dataclasses.replace(x, name=self._declare(x.name, x.pos, True),
                                           value=value, type=t)
            case A.ActionDecl():
                self._declare(x.name, x.pos, False)
                self._push()
                try:
                    return self._action(x)
                finally:
                    self._pop()
            case A.TableDecl():
                self._declare(x.name, x.pos, False)
                return dataclasses.replace(x, properties=tuple(self._property(p)
                                                               for p in x.properties))
            case A.Decl():
                renamed = self._x(x)
                self._declare(x.name, x.pos, False)
                return renamed
        return x

    def _action(self, a: A.ActionDecl) -> A.ActionDecl:
        self._params(a.params)
        return dataclasses.replace(a, params=self._x(a.params), body=self._block(a.body))

    def _property(self, p: A.TableProperty) -> A.TableProperty:
        if p.name != "key" or not isinstance(p.value, tuple):
            return dataclasses.replace(p, value=self._x(p.value))
        keys: list[A.KeyElement] = []
        for ke in p.value:
            assert isinstance(ke, A.KeyElement)
            e = self._x(ke.expr)
            annos = ke.annotations
            if e is not ke.expr and not any(an.name == "name" for an in annos):
                # P4Info names a key by its source spelling (p4c: TableKeyNames, which runs
                # before the renaming); keep it through the renaming.
                text = key_name(ke.expr) or expr_text(ke.expr)
                annos = annos + (A.Annotation(ke.pos, "name", (A.StrLit(ke.pos, text),),
                                              f'"{text}"'),)
            keys.append(dataclasses.replace(ke, expr=e, annotations=annos))
        return dataclasses.replace(p, value=tuple(keys))

    # ------------------------------------------------------------ statements
    def _var(self, v: A.VarDecl) -> A.VarDecl:
        # The initializer and the type are read in the enclosing scope: in
        # `bit<8> x = x + 1;` the right-hand x is an outer one.
        init = self._x(v.init)
        t = self._x(v.type)
        return dataclasses.replace(v, name=self._declare(v.name, v.pos, True), init=init, type=t,
                                   orig=v.orig or v.name)

    def _block(self, b: A.Block) -> A.Block:
        self._push()
        try:
            return dataclasses.replace(b, stmts=tuple(self._stmt(s) for s in b.stmts))
        finally:
            self._pop()

    def _stmt(self, s: A.Stmt) -> A.Stmt:
        match s:
            case A.Block():
                return self._block(s)
            case A.VarDecl():
                return self._var(s)
            case A.If(cond=c, then=t, other=o):
                return dataclasses.replace(s, cond=self._x(c), then=self._stmt(t),
                                           other=self._stmt(o) if o is not None else None)
            case A.Switch(expr=e, cases=cs):
                cases = tuple(dataclasses.replace(
                    c, value=self._x(c.value),
                    body=self._block(c.body) if c.body is not None else None) for c in cs)
                return dataclasses.replace(s, expr=self._x(e), cases=cases)
            case A.For(init=i, cond=c, update=u, body=b):
                # A variable declared in the init is the loop's own (scope: the loop).
                self._push()
                try:
                    init = tuple(self._stmt(x) for x in i)
                    return dataclasses.replace(s, init=init, cond=self._x(c),
                                               update=tuple(self._stmt(x) for x in u),
                                               body=self._stmt(b))
                finally:
                    self._pop()
        return self._x(s)
