"""Scopes: what a name means inside a parser, control or action (symbols and environments).

Global names come from :class:`resolve.Globals`; a control adds its parameters (bound to the
storage chosen by BuildLayout), its locals, tables, actions and extern instances.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from . import ast as A
from .ir import TExpr
from .resolve import ConstValue, Globals
from .types import ExternT, P4Type

__all__ = ["SymKind", "Sym", "ExternInstance", "ValueSet", "Env"]


class SymKind(enum.Enum):
    VAR = "variable"
    CONST = "constant"
    EXTERN = "extern instance"
    TABLE = "table"
    ACTION = "action"
    FUNCTION = "function"
    TYPE = "type"
    STATE = "parser state"
    PACKET = "packet"
    SUBCONTROL = "control instance"
    EXPR = "function argument"  # an inlined function's parameter bound to a typed value
    VALUE_SET = "value set"


@dataclass(frozen=True, slots=True)
class ExternInstance:
    """A v1model extern object (register, counter, ...) declared in a control or parser."""

    name: str        # control-plane / JSON name, e.g. "MyIngress.acc"
    extern: str      # extern type name, e.g. "register"
    type: ExternT
    args: tuple[ConstValue | None, ...]
    decl: A.Instantiation
    block: str       # enclosing parser/control name
    rank: tuple[int, ...] = ()  # where p4c lists it in P4Info (see BlockScope.rank)


@dataclass(frozen=True, slots=True)
class ValueSet:
    """A parser value set: select cases the control plane fills (BMv2 parse_vsets)."""

    name: str                        # control-plane name, e.g. "MyParser.pvs"
    fields: tuple[tuple[str, int, str], ...]  # (name, bitwidth, match kind) per key
    size: int
    decl: A.Instantiation
    rank: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Sym:
    kind: SymKind
    name: str
    value: object  # TLoc | TConst | ExternInstance | A.TableDecl | A.ActionDecl | ...
    qualified: str = ""


class Env:
    """A scope: a dict of symbols plus a parent; the root answers from Globals.

    It also records what the type check found in it, keyed by node identity, so nothing is
    derived twice in one scope (netsum.p4c.typetable): ``bound``, each name node's symbol
    (:meth:`bind`), and ``typed``, each expression's typed IR with the type that was
    expected of it (written by the Typer, read by :meth:`typed_as`).  Only successes are
    recorded; an entry keeps its node, so its ``id`` is not reused while the scope lives."""

    def __init__(self, parent: "Env | None", g: Globals, block: str = "") -> None:
        self.parent = parent
        self.g = g
        self.syms: dict[str, Sym] = {}
        self.block: str = block or (parent.block if parent else "")
        self.bound: dict[int, tuple[A.Name, Sym]] = {}
        self.typed: dict[int, tuple[A.Expr, P4Type | None, TExpr]] = {}

    def child(self) -> "Env":
        return Env(self, self.g, self.block)

    def add(self, sym: Sym) -> None:
        self.syms[sym.name] = sym

    def bind(self, n: A.Name) -> Sym | None:
        """What the name node n means here (its ``top_level`` dot honoured), resolved once."""
        hit = self.bound.get(id(n))
        if hit is not None and hit[0] is n:
            return hit[1]
        sym = self.lookup(n.name, n.top_level)
        if sym is not None:
            self.bound[id(n)] = (n, sym)
        return sym

    def typed_as(self, e: A.Expr) -> TExpr | None:
        """The typed IR the Typer recorded for e here (whatever type was expected of it);
        None if it has not typed e in this scope, or failed to."""
        hit = self.typed.get(id(e))
        return hit[2] if hit is not None and hit[0] is e else None

    def lookup(self, name: str, top_level: bool = False) -> Sym | None:
        if not top_level:
            env: Env | None = self
            while env is not None:
                if name in env.syms:
                    return env.syms[name]
                env = env.parent
        g = self.g
        if name in g.extern_objects:
            inst = g.extern_objects[name]
            return Sym(SymKind.EXTERN, name, inst, inst.name)
        if name in g.consts:
            cv = g.consts[name]
            return Sym(SymKind.CONST, name, cv)
        if name in g.actions:
            return Sym(SymKind.ACTION, name, g.actions[name], name)
        if name in g.functions:
            return Sym(SymKind.FUNCTION, name, g.functions[name])
        if name in g.types:
            return Sym(SymKind.TYPE, name, g.types[name])
        return None

    def names(self) -> list[str]:
        out: list[str] = []
        env: Env | None = self
        while env is not None:
            out.extend(env.syms)
            env = env.parent
        g = self.g
        return out + [*g.consts, *g.actions, *g.functions, *g.types]
