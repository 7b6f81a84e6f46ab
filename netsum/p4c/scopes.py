"""Scopes: what a name means inside a parser, control or action (symbols and environments).

Global names come from :class:`resolve.Globals`; a control adds its parameters (bound to the
storage chosen by BuildLayout), its locals, tables, actions and extern instances.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from . import ast as A
from .resolve import ConstValue, Globals
from .types import ExternT

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
    """A scope: a dict of symbols plus a parent; the root answers from Globals."""

    def __init__(self, parent: "Env | None", g: Globals, block: str = "") -> None:
        self.parent = parent
        self.g = g
        self.syms: dict[str, Sym] = {}
        self.block: str = block or (parent.block if parent else "")

    def child(self) -> "Env":
        return Env(self, self.g, self.block)

    def add(self, sym: Sym) -> None:
        self.syms[sym.name] = sym

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
