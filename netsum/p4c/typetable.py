"""The type check's results, recorded once and read by the lowering: side tables keyed by node
identity, so no type, name or expression is derived a second time.

Three things are recorded where the type check first computes them, and every later reader
gets the recorded answer:

* **declared types** (:class:`TypeTable`, one per program: ``Globals.typed``) -- a type
  expression (a parameter's, local's, function result's, cast's or type argument's) bound to
  its :class:`~netsum.p4c.types.P4Type` (``resolve_type`` without type variables, which
  depends only on the program's globals), once per type node; every action use, call
  binding, table action list, direct call and cast reads it;
* **name bindings** (``Env.bound``, read through :meth:`scopes.Env.bind`) -- an
  :class:`ast.Name` resolved in a scope to its :class:`scopes.Sym`, once per (name node,
  scope): the Typer's names and member bases (looked up as a type, then as a value), the call
  binder (``calls.resolve_call``), the control lowering's direct-call scan and the exit
  analysis of inlined actions all read the same binding;
* **expression results** (``Env.typed``, written by ``Typer.expr``, read through
  :meth:`scopes.Env.typed_as`) -- the typed IR (:class:`ir.TExpr`) of every expression the
  Typer typed, per (expression node, scope, expected type): typing it again there returns
  the recorded IR (a direct action call's arguments are typed for its hidden action and again
  for its table), and the lowering reads a sub-expression's type (a table key's struct and
  header names for its fields' ``@name``) instead of typing it a second time with its
  diagnostics thrown away.

Names and expressions are recorded per scope because one AST is lowered in several scopes (a
control instantiated twice, an action bound per table); the tables live in the scope, so an
action's die with its use (the table held by ``Globals`` made the compile of netsum.p4 at
K=256 a third slower: everything typed stayed alive for the collector to walk).  Only
successful answers are recorded: a type or name that fails is looked up again where it is
used next, so its error is reported exactly where and as often as before (the diagnostics
list keeps one copy of each).  An entry keeps its node, so a key (``id``) is not reused by
another object while the table holds it.
"""
from __future__ import annotations

from . import ast as A
from . import resolve as R
from .diagnostics import Diagnostics
from .types import P4Type

__all__ = ["TypeTable"]


class TypeTable:
    """Declared types, each resolved once (the per-scope tables are on :class:`Env`)."""

    def __init__(self) -> None:
        self._decls: dict[int, tuple[A.TypeExpr, P4Type]] = {}

    def declared(self, t: A.TypeExpr, g: "R.Globals", diags: Diagnostics) -> P4Type | None:
        """The type a type expression names where no type variable is in scope (a
        declaration's, a cast's, a type argument's)."""
        hit = self._decls.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        pt = R.resolve_type(t, g, diags)
        if pt is not None:
            self._decls[id(t)] = (t, pt)
        return pt
