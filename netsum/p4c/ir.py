"""Typed intermediate representation of expressions, produced by the Typer (:mod:`typecheck`).

Every node carries its resolved :mod:`types` type, and names are already bound to storage
(``Ref``s): a header instance, a field of one, a field of the ``scalars`` metadata header, an
action parameter.  The BMv2 JSON generator consumes this without any scope lookups.
"""
from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Pos
from .types import HeaderT, P4Type, StackT, StructT, UnionStackT, UnionT

__all__ = ["Ref", "FieldRef", "HeaderRef", "StackRef", "StackLastRef", "StackFieldRef",
           "StructRef", "UnionRef", "UnionStackRef", "UnionStackNextRef", "ParamRef", "TExpr", "TUnionValid", "TLastIndex",
           "TConst", "TLoc", "TUnary", "TBinary", "TCast", "TSlice", "TConcat", "TTernary",
           "TIsValid", "TList", "TLookahead", "TString"]


# ---------------------------------------------------------------- storage
@dataclass(frozen=True, slots=True)
class Ref:
    pass


@dataclass(frozen=True, slots=True)
class FieldRef(Ref):
    header: str
    field: str


@dataclass(frozen=True, slots=True)
class HeaderRef(Ref):
    name: str
    type: HeaderT


@dataclass(frozen=True, slots=True)
class StackRef(Ref):
    name: str
    type: StackT


@dataclass(frozen=True, slots=True)
class StackLastRef(Ref):
    """``stack.last``: the element extracted last (parser only in BMv2)."""

    name: str
    type: StackT


@dataclass(frozen=True, slots=True)
class StackFieldRef(Ref):
    """A field of ``stack.last``: BMv2's ``stack_field``."""

    stack: str
    field: str


def _member(members: tuple[tuple[str, "TLoc"], ...], name: str) -> "TLoc | None":
    return next((loc for n, loc in members if n == name), None)


@dataclass(frozen=True, slots=True)
class StructRef(Ref):
    type: StructT
    members: tuple[tuple[str, "TLoc"], ...]

    def member(self, name: str) -> "TLoc | None":
        return _member(self.members, name)


@dataclass(frozen=True, slots=True)
class UnionRef(Ref):
    """A header union instance: BMv2 ``header_unions`` entry over its member instances."""

    name: str
    type: UnionT
    members: tuple[tuple[str, "TLoc"], ...]

    def member(self, name: str) -> "TLoc | None":
        return _member(self.members, name)


@dataclass(frozen=True, slots=True)
class UnionStackRef(Ref):
    """A stack of header unions; ``unions`` are its elements in order."""

    name: str
    type: UnionStackT
    unions: tuple["TLoc", ...]


@dataclass(frozen=True, slots=True)
class UnionStackNextRef(Ref):
    """``us.next.member``: what a parser extracts into the next union of a union stack."""

    stack: str
    member: str


@dataclass(frozen=True, slots=True)
class ParamRef(Ref):
    """Directionless action parameter: BMv2 runtime_data index."""

    index: int


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class TExpr:
    type: P4Type
    pos: Pos


@dataclass(frozen=True, slots=True)
class TConst(TExpr):
    value: int | bool


@dataclass(frozen=True, slots=True)
class TLoc(TExpr):
    ref: Ref
    text: str  # the source spelling (p4c uses it for key names)


@dataclass(frozen=True, slots=True)
class TUnary(TExpr):
    op: str
    operand: TExpr


@dataclass(frozen=True, slots=True)
class TBinary(TExpr):
    op: str
    left: TExpr
    right: TExpr


@dataclass(frozen=True, slots=True)
class TCast(TExpr):
    operand: TExpr


@dataclass(frozen=True, slots=True)
class TSlice(TExpr):
    operand: TExpr
    hi: int
    lo: int


@dataclass(frozen=True, slots=True)
class TConcat(TExpr):
    left: TExpr
    right: TExpr


@dataclass(frozen=True, slots=True)
class TTernary(TExpr):
    cond: TExpr
    then: TExpr
    other: TExpr


@dataclass(frozen=True, slots=True)
class TIsValid(TExpr):
    header: str


@dataclass(frozen=True, slots=True)
class TLastIndex(TExpr):
    """``hs.lastIndex`` in a parser: the index of the element extracted last."""

    stack: str
    union: bool = False  # a header union stack


@dataclass(frozen=True, slots=True)
class TUnionValid(TExpr):
    """``u.isValid()`` of a header union: one of its members is valid."""

    union: str


@dataclass(frozen=True, slots=True)
class TList(TExpr):
    items: tuple[TExpr, ...]


@dataclass(frozen=True, slots=True)
class TLookahead(TExpr):
    """``pkt.lookahead<T>()`` (or a field of it): parser only; ``offset`` bits from here."""

    offset: int = 0


@dataclass(frozen=True, slots=True)
class TString(TExpr):
    """A string literal (only log_msg takes one)."""

    value: str
