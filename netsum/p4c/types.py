"""Semantic P4 types (as opposed to ``ast`` type *expressions*): widths resolved, names bound.

All are frozen dataclasses so they can be compared structurally (``bit<8> == bit<8>``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["P4Type", "Bits", "InfInt", "Bool", "Str", "Void", "ErrorT", "MatchKindT", "EnumT",
           "HeaderT", "StructT", "UnionT", "StackT", "UnionStackT", "ExternT", "VarbitT", "TypeVar", "show",
           "width_of", "lookahead_width", "is_numeric"]


@dataclass(frozen=True, slots=True)
class P4Type:
    pass


@dataclass(frozen=True, slots=True)
class Bits(P4Type):
    width: int
    signed: bool = False


@dataclass(frozen=True, slots=True)
class InfInt(P4Type):
    """Type of an integer literal with no width: arbitrary precision until unified."""


@dataclass(frozen=True, slots=True)
class Bool(P4Type):
    pass


@dataclass(frozen=True, slots=True)
class Str(P4Type):
    pass


@dataclass(frozen=True, slots=True)
class Void(P4Type):
    pass


@dataclass(frozen=True, slots=True)
class ErrorT(P4Type):
    pass


@dataclass(frozen=True, slots=True)
class MatchKindT(P4Type):
    pass


@dataclass(frozen=True, slots=True)
class EnumT(P4Type):
    name: str
    members: tuple[str, ...]
    underlying: Bits | None  # serializable enum: its bit type
    values: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HeaderT(P4Type):
    name: str
    fields: tuple[tuple[str, P4Type], ...]
    # Struct-typed fields, flattened in `fields` as `s.f`: (field name, its struct type).
    groups: tuple[tuple[str, "StructT"], ...] = ()
    # name -> type, built once: headers with hundreds of fields are looked up per use.
    index: dict[str, P4Type] = field(default_factory=dict, compare=False, hash=False,
                                     repr=False)

    def __post_init__(self) -> None:
        self.index.update(self.fields)

    def field(self, name: str) -> P4Type | None:
        return self.index.get(name)

    def members(self) -> list[tuple[str, P4Type]]:
        """The fields as declared: a struct field once, where its flattened fields start."""
        out: list[tuple[str, P4Type]] = []
        groups = dict(self.groups)
        for n, t in self.fields:
            head = n.split(".", 1)[0]
            if "." in n and head in groups:
                if not out or out[-1][0] != head:
                    out.append((head, groups[head]))
            else:
                out.append((n, t))
        return out


@dataclass(frozen=True, slots=True)
class StructT(P4Type):
    name: str
    fields: tuple[tuple[str, P4Type], ...]
    annotations: tuple[str, ...] = ()
    index: dict[str, P4Type] = field(default_factory=dict, compare=False, hash=False,
                                     repr=False)

    def __post_init__(self) -> None:
        self.index.update(self.fields)

    def field(self, name: str) -> P4Type | None:
        return self.index.get(name)


@dataclass(frozen=True, slots=True)
class UnionT(P4Type):
    name: str
    fields: tuple[tuple[str, P4Type], ...]


@dataclass(frozen=True, slots=True)
class StackT(P4Type):
    elem: HeaderT
    size: int


@dataclass(frozen=True, slots=True)
class UnionStackT(P4Type):
    """A stack of header unions (BMv2 header_union_stacks)."""

    elem: UnionT
    size: int


@dataclass(frozen=True, slots=True)
class VarbitT(P4Type):
    max_width: int


@dataclass(frozen=True, slots=True)
class ExternT(P4Type):
    name: str
    args: tuple[P4Type, ...]


@dataclass(frozen=True, slots=True)
class TypeVar(P4Type):
    name: str


def show(t: P4Type) -> str:
    """The P4 spelling of a type, for messages."""
    match t:
        case Bits(w, False):
            return f"bit<{w}>"
        case Bits(w, True):
            return f"int<{w}>"
        case InfInt():
            return "int"
        case Bool():
            return "bool"
        case Str():
            return "string"
        case Void():
            return "void"
        case ErrorT():
            return "error"
        case MatchKindT():
            return "match_kind"
        case EnumT(name=n) | HeaderT(name=n) | StructT(name=n) | UnionT(name=n):
            return n
        case StackT(e, s) | UnionStackT(e, s):
            return f"{e.name}[{s}]"
        case VarbitT(w):
            return f"varbit<{w}>"
        case ExternT(n, args):
            return n + (f"<{', '.join(show(a) for a in args)}>" if args else "")
        case TypeVar(n):
            return n
    return type(t).__name__


def width_of(t: P4Type) -> int:
    """Bit width of a value stored in a field (bool is one bit, error 32 in BMv2)."""
    match t:
        case Bits(w, _):
            return w
        case Bool():
            return 1
        case ErrorT():
            return 32
        case EnumT(underlying=u):
            return u.width if u is not None else 32
        case VarbitT(w):
            return w
    raise TypeError(f"{show(t)} has no bit width")


def lookahead_width(t: P4Type) -> int | None:
    """Bits a lookahead<t>() reads: bit strings, bools, and headers, stacks and structs of
    them (None for anything else, e.g. varbit fields)."""
    match t:
        case Bits(w, _):
            return w
        case Bool():
            return 1
        case StackT(elem=el, size=n):
            ew = lookahead_width(el)
            return ew * n if ew is not None else None
        case HeaderT(fields=fs) | StructT(fields=fs):
            ws = [lookahead_width(ft) for _, ft in fs]
            return None if None in ws else sum(w for w in ws if w is not None)
    return None


def is_numeric(t: P4Type) -> bool:
    return isinstance(t, (Bits, InfInt))
