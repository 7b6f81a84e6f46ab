"""The type check's results, recorded once and read by the lowering: a side table keyed by
node identity (:class:`TypeTable`, one per program, ``Globals.typed``).

Three things are recorded where the type check first computes them, and every later reader
gets the recorded answer instead of deriving it again:

* **declared types** -- a type expression (a parameter's, local's, function result's, cast's
  or type argument's) bound to its :class:`~netsum.p4c.types.P4Type` (``resolve_type`` without
  type variables, which depends only on the program's globals), once per type node; every
  action use, call binding, table action list, direct call and cast reads it;
* **name bindings** -- an :class:`ast.Name` resolved in a scope (:class:`scopes.Env`) to its
  :class:`scopes.Sym`, once per (name node, scope): the Typer's names and member bases, the call
  binder (``calls.resolve_call``), the control lowering's direct-call scan and the exit
  analysis of inlined actions all read the same binding;
* **expression results** -- the typed IR (:class:`ir.TExpr`) of every expression the Typer
  typed, per (expression node, scope, expected type): typing it again there returns the
  recorded IR (a direct action call's arguments are typed for its hidden action and again
  for its table), and the lowering asks for a sub-expression's type (a table key's struct and
  header names for its fields' ``@name``) instead of typing it a second time with its
  diagnostics thrown away.

Only successful answers are recorded: a type or name that fails is looked up again where it is
used next, so its error is reported exactly where and as often as before (the diagnostics
list keeps one copy of each).  The scope is part of the key because one AST is lowered in
several scopes (a control instantiated twice, an action bound per table); the node and scope
are kept in the entry, so a key (``id``) can never be reused by another object while the
table holds it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import ast as A
from . import resolve as R
from .diagnostics import Diagnostics
from .types import P4Type

if TYPE_CHECKING:
    from .ir import TExpr
    from .scopes import Env, Sym

__all__ = ["TypeTable"]


class TypeTable:
    """Declared types, name bindings and expression results, each computed once."""

    def __init__(self) -> None:
        self._decls: dict[int, tuple[A.TypeExpr, P4Type]] = {}
        self._names: dict[tuple[int, int], tuple[A.Name, "Env", "Sym"]] = {}
        self._exprs: dict[tuple[int, int],
                          tuple[A.Expr, "Env", P4Type | None, "TExpr"]] = {}
        #: how many answers were computed, and how many were read back from the table
        self.computed = 0
        self.reused = 0

    # ------------------------------------------------------------ declared types
    def declared(self, t: A.TypeExpr, g: "R.Globals", diags: Diagnostics) -> P4Type | None:
        """The type a type expression names where no type variable is in scope (a
        declaration's, a cast's, a type argument's)."""
        hit = self._decls.get(id(t))
        if hit is not None and hit[0] is t:
            self.reused += 1
            return hit[1]
        pt = R.resolve_type(t, g, diags)
        self.computed += 1
        if pt is not None:
            self._decls[id(t)] = (t, pt)
        return pt

    # ------------------------------------------------------------ names
    def lookup(self, n: A.Name, env: "Env") -> "Sym | None":
        """What the name node means in env (its ``top_level`` dot honoured)."""
        key = (id(n), id(env))
        hit = self._names.get(key)
        if hit is not None and hit[0] is n and hit[1] is env:
            self.reused += 1
            return hit[2]
        sym = env.lookup(n.name, n.top_level)
        self.computed += 1
        if sym is not None:
            self._names[key] = (n, env, sym)
        return sym

    # ------------------------------------------------------------ expressions
    def record(self, e: A.Expr, env: "Env", expected: P4Type | None, te: "TExpr") -> None:
        """The Typer's result for e in env where the type expected was ``expected`` (before
        the Typer's final coercion to it)."""
        self.computed += 1
        self._exprs[(id(e), id(env))] = (e, env, expected, te)

    def result(self, e: A.Expr, env: "Env", expected: P4Type | None) -> "TExpr | None":
        """The recorded result for e in env, if it was typed there with the same expected
        type (an integer literal's type comes from it); else None."""
        hit = self._exprs.get((id(e), id(env)))
        if hit is None or hit[0] is not e or hit[1] is not env or not (
                hit[2] is expected or hit[2] == expected):
            return None
        self.reused += 1
        return hit[3]

    def typed(self, e: A.Expr, env: "Env") -> "TExpr | None":
        """The recorded result for e in env, whatever type was expected of it there; None if
        the Typer has not typed it there (or failed to)."""
        hit = self._exprs.get((id(e), id(env)))
        if hit is None or hit[0] is not e or hit[1] is not env:
            return None
        self.reused += 1
        return hit[3]
