"""AST nodes of the supported P4_16 subset: frozen, slotted dataclasses with source positions.

Nodes compare by identity (``eq=False``) so passes can key side tables (types, resolved
declarations) on the node object itself.  Names follow the P4_16 grammar's words.
"""
from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Pos

__all__ = [
    "Node", "Annotation", "Expr", "IntLit", "BoolLit", "StrLit", "Name", "Member", "Index",
    "Slice", "Arg", "Call", "Unary", "Binary", "Ternary", "Cast", "ListExpr", "Mask", "Range",
    "Default", "TypeExpr", "TypeName", "BitType", "IntType", "VarbitType", "BoolType",
    "ErrorType", "StringType", "VoidType", "StackType", "DontCareType", "Stmt", "Assign",
    "CallStmt", "If", "Block", "Return", "Exit", "SwitchCase", "Switch", "VarDecl", "EmptyStmt",
    "For", "ForIn", "Break", "Continue",
    "Decl", "ConstDecl", "Typedef", "Field", "HeaderDecl", "StructDecl", "HeaderUnionDecl",
    "EnumDecl", "ErrorDecl", "MatchKindDecl", "Param", "MethodDecl", "ExternDecl",
    "FunctionDecl", "ParserTypeDecl", "ControlTypeDecl", "PackageDecl", "Instantiation",
    "SelectCase", "Select", "ParserState", "ParserDecl", "ActionDecl", "KeyElement",
    "TableEntry", "TableProperty", "TableDecl", "ControlDecl", "Program",
]


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    pos: Pos


@dataclass(frozen=True, slots=True, eq=False)
class Annotation(Node):
    name: str
    args: tuple["Expr", ...]  # parsed when the body is an expression list, else empty
    body: str                 # raw body text, for P4Info annotations strings
    structured: bool = False  # `@a[...]`: body holds the folded items (structured_annotations)


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True, eq=False)
class Expr(Node):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class IntLit(Expr):
    value: int
    width: int | None
    signed: bool
    text: str


@dataclass(frozen=True, slots=True, eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True, slots=True, eq=False)
class StrLit(Expr):
    value: str


@dataclass(frozen=True, slots=True, eq=False)
class Name(Expr):
    name: str
    top_level: bool = False  # written with a leading '.'
    orig: str = ""           # the source spelling when UniqueNames renamed it


@dataclass(frozen=True, slots=True, eq=False)
class Member(Expr):
    expr: Expr
    member: str


@dataclass(frozen=True, slots=True, eq=False)
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Arg(Node):
    name: str | None
    value: Expr | None  # None for a '_' (don't care) argument


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    func: Expr
    type_args: tuple["TypeExpr", ...]
    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Unary(Expr):
    op: str  # '-', '~', '!'
    operand: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Cast(Expr):
    type: "TypeExpr"
    expr: Expr


@dataclass(frozen=True, slots=True, eq=False)
class ListExpr(Expr):
    items: tuple[Expr, ...]
    names: tuple[str, ...] = ()  # `{ a = 1, b = 2 }`: the field each item initializes


@dataclass(frozen=True, slots=True, eq=False)
class Mask(Expr):
    value: Expr
    mask: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Range(Expr):
    lo: Expr
    hi: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Default(Expr):
    """'default' or '_' in a keyset or table entry."""


# ---------------------------------------------------------------- type expressions
@dataclass(frozen=True, slots=True, eq=False)
class TypeExpr(Node):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class TypeName(TypeExpr):
    name: str
    args: tuple[TypeExpr, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class BitType(TypeExpr):
    width: Expr | None  # None: plain 'bit' == bit<1>


@dataclass(frozen=True, slots=True, eq=False)
class IntType(TypeExpr):
    width: Expr | None  # None: arbitrary-precision 'int'


@dataclass(frozen=True, slots=True, eq=False)
class VarbitType(TypeExpr):
    width: Expr


@dataclass(frozen=True, slots=True, eq=False)
class BoolType(TypeExpr):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class ErrorType(TypeExpr):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class StringType(TypeExpr):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class VoidType(TypeExpr):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class DontCareType(TypeExpr):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class StackType(TypeExpr):
    elem: TypeExpr
    size: Expr


# ---------------------------------------------------------------- statements
@dataclass(frozen=True, slots=True, eq=False)
class Stmt(Node):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class Assign(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, slots=True, eq=False)
class CallStmt(Stmt):
    call: Call


@dataclass(frozen=True, slots=True, eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None


@dataclass(frozen=True, slots=True, eq=False)
class Block(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(frozen=True, slots=True, eq=False)
class Exit(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class SwitchCase(Node):
    label: str | None  # action name (or the spelling of a value label), None for default
    body: Block | None  # None: fall through to the next case
    value: "Expr | None" = None  # the label as an expression (switch on a value)


@dataclass(frozen=True, slots=True, eq=False)
class Switch(Stmt):
    expr: Expr
    cases: tuple[SwitchCase, ...]


@dataclass(frozen=True, slots=True, eq=False)
class VarDecl(Stmt):
    annotations: tuple[Annotation, ...]
    type: TypeExpr
    name: str
    init: Expr | None
    is_const: bool = False  # a `const` declaration among statements
    orig: str = ""          # the source name when UniqueNames renamed it


@dataclass(frozen=True, slots=True, eq=False)
class EmptyStmt(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class For(Stmt):
    """``for (init; cond; update) body`` (P4_16 1.2.5); ``cond`` None is ``true``."""
    init: tuple[Stmt, ...]
    cond: Expr | None
    update: tuple[Stmt, ...]
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class ForIn(Stmt):
    """``for (T x in collection) body``: parsed so that it can be refused by name (p4c's
    BMv2 back end rejects it: "BMV2 does not support for-in loops")."""
    type: TypeExpr | None
    name: str
    collection: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class Break(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class Continue(Stmt):
    pass


# ---------------------------------------------------------------- declarations
@dataclass(frozen=True, slots=True, eq=False)
class Decl(Node):
    annotations: tuple[Annotation, ...]
    name: str


@dataclass(frozen=True, slots=True, eq=False)
class ConstDecl(Decl):
    type: TypeExpr
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Typedef(Decl):
    type: TypeExpr
    is_new_type: bool  # 'type' rather than 'typedef'


@dataclass(frozen=True, slots=True, eq=False)
class Field(Decl):
    type: TypeExpr


@dataclass(frozen=True, slots=True, eq=False)
class HeaderDecl(Decl):
    fields: tuple[Field, ...]
    type_params: tuple[str, ...] = ()  # generic (`struct S<T>`): specialized by SpecializeGenerics


@dataclass(frozen=True, slots=True, eq=False)
class StructDecl(Decl):
    fields: tuple[Field, ...]
    type_params: tuple[str, ...] = ()  # generic (`struct S<T>`): specialized by SpecializeGenerics


@dataclass(frozen=True, slots=True, eq=False)
class HeaderUnionDecl(Decl):
    fields: tuple[Field, ...]
    type_params: tuple[str, ...] = ()  # generic (`struct S<T>`): specialized by SpecializeGenerics


@dataclass(frozen=True, slots=True, eq=False)
class EnumDecl(Decl):
    underlying: TypeExpr | None
    members: tuple[tuple[str, Expr | None], ...]


@dataclass(frozen=True, slots=True, eq=False)
class ErrorDecl(Decl):
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class MatchKindDecl(Decl):
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Param(Decl):
    direction: str  # '', 'in', 'out', 'inout'
    type: TypeExpr
    default: Expr | None = None


@dataclass(frozen=True, slots=True, eq=False)
class MethodDecl(Decl):
    type_params: tuple[str, ...]
    ret: TypeExpr | None  # None for a constructor
    params: tuple[Param, ...]
    is_abstract: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ExternDecl(Decl):
    type_params: tuple[str, ...]
    methods: tuple[MethodDecl, ...]


@dataclass(frozen=True, slots=True, eq=False)
class FunctionDecl(Decl):
    """An extern function prototype (``extern void f(...)``) or a function with a body."""

    type_params: tuple[str, ...]
    ret: TypeExpr
    params: tuple[Param, ...]
    body: Block | None


@dataclass(frozen=True, slots=True, eq=False)
class ParserTypeDecl(Decl):
    type_params: tuple[str, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ControlTypeDecl(Decl):
    type_params: tuple[str, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, slots=True, eq=False)
class PackageDecl(Decl):
    type_params: tuple[str, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Instantiation(Decl):
    type: TypeExpr
    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True, eq=False)
class SelectCase(Node):
    keyset: Expr  # ListExpr for tuples, Default, Mask, Range, or a value
    state: str
    state_pos: Pos


@dataclass(frozen=True, slots=True, eq=False)
class Select(Node):
    keys: tuple[Expr, ...]
    cases: tuple[SelectCase, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ParserState(Decl):
    stmts: tuple[Stmt, ...]
    transition: Select | str | None  # state name, select, or None (implicit reject)
    transition_pos: Pos


@dataclass(frozen=True, slots=True, eq=False)
class ParserDecl(Decl):
    params: tuple[Param, ...]
    ctor_params: tuple[Param, ...]
    locals: tuple[Node, ...]
    states: tuple[ParserState, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ActionDecl(Decl):
    params: tuple[Param, ...]
    body: Block


@dataclass(frozen=True, slots=True, eq=False)
class KeyElement(Node):
    annotations: tuple[Annotation, ...]
    expr: Expr
    match_kind: str
    match_kind_pos: Pos


@dataclass(frozen=True, slots=True, eq=False)
class TableEntry(Node):
    keyset: tuple[Expr, ...]
    action: Call
    priority: Expr | None


@dataclass(frozen=True, slots=True, eq=False)
class TableProperty(Node):
    name: str
    is_const: bool
    value: object  # tuple[KeyElement] | tuple[(annotations, Call)] | Expr | tuple[TableEntry]
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class TableDecl(Decl):
    properties: tuple[TableProperty, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ControlDecl(Decl):
    params: tuple[Param, ...]
    ctor_params: tuple[Param, ...]
    locals: tuple[Node, ...]
    apply: Block


@dataclass(frozen=True, slots=True, eq=False)
class Program(Node):
    decls: tuple[Node, ...]
