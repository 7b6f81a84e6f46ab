"""ResolveNames: collect top-level declarations, resolve type expressions and constants.

Produces :class:`Globals`, the program-wide symbol table every later pass reads.  Reports
duplicate declarations, unknown type names (with the nearest known name) and non-constant
widths.  Constant expressions are folded here with a small evaluator because widths
(``bit<W>``) and ``const`` declarations must be known before any expression is typed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ast as A
from .diagnostics import Diagnostics, Pos, unknown
from . import typetable as _tt
from .types import (Bits, Bool, EnumT, ErrorT, ExternT, HeaderT, InfInt, P4Type,
                    StackT, Str, StructT, TypeVar, UnionStackT, UnionT, VarbitT, Void,
                    show)

__all__ = ["Globals", "ResolveNames", "resolve_type", "const_eval", "ConstValue"]

#: Largest header stack netsum-p4c lays out (p4c has no limit; real programs use a few).
MAX_STACK_SIZE = 4096


@dataclass(frozen=True, slots=True)
class ConstValue:
    type: P4Type
    value: int | bool


@dataclass
class Globals:
    types: dict[str, P4Type] = field(default_factory=dict)
    consts: dict[str, ConstValue] = field(default_factory=dict)
    externs: dict[str, A.ExternDecl] = field(default_factory=dict)
    functions: dict[str, list[A.FunctionDecl]] = field(default_factory=dict)  # overloads
    actions: dict[str, A.ActionDecl] = field(default_factory=dict)
    parsers: dict[str, A.ParserDecl] = field(default_factory=dict)
    controls: dict[str, A.ControlDecl] = field(default_factory=dict)
    blocks: dict[str, A.Decl] = field(default_factory=dict)  # parser/control/package types
    instances: dict[str, A.Instantiation] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    match_kinds: list[str] = field(default_factory=list)
    header_order: list[str] = field(default_factory=list)  # header type names, declared order
    decl_annotations: dict[str, tuple[A.Annotation, ...]] = field(default_factory=dict)
    field_annotations: dict[tuple[str, str], tuple[A.Annotation, ...]] = \
        field(default_factory=dict)
    #: Declared (unresolved) types of struct/header fields, and every typedef/type
    #: declaration: P4Info names `type`s (netsum.p4c.newtypes).
    field_types: dict[tuple[str, str], A.TypeExpr] = field(default_factory=dict)
    typedefs: dict[str, A.Typedef] = field(default_factory=dict)
    # File-scope extern instances as blocks.ExternInstance, by name (made by GenerateJson
    # once the v1model extern rules can be applied; visible from every block and action).
    extern_objects: dict[str, Any] = field(default_factory=dict)
    #: Declared types, each resolved once and read back by the lowering
    #: (netsum.p4c.typetable; names and expressions are recorded per scope, on Env).
    typed: _tt.TypeTable = field(default_factory=lambda: _tt.TypeTable())

    def all_names(self) -> list[str]:
        return [*self.types, *self.consts, *self.externs, *self.functions, *self.actions,
                *self.parsers, *self.controls, *self.blocks, *self.instances]


def const_eval(e: A.Expr, g: Globals, diags: Diagnostics,
               local: dict[str, ConstValue] | None = None) -> ConstValue | None:
    """Fold a compile-time constant expression; report and return None if it is not one."""
    match e:
        case A.IntLit(value=v, width=w, signed=s):
            if w is None:
                return ConstValue(InfInt(), v)
            return ConstValue(Bits(w, s), _wrap(v, w, s))
        case A.BoolLit(value=v):
            return ConstValue(Bool(), v)
        case A.Name(name=n):
            if local and n in local:
                return local[n]
            if n in g.consts:
                return g.consts[n]
            diags.error(e.pos, f"'{n}' is not a compile-time constant" if n in g.all_names()
                        else unknown("name", n, [*g.consts, *(local or {})]))
            return None
        case A.Member(expr=A.Name(name="error"), member=m):
            if m in g.errors:
                return ConstValue(ErrorT(), g.errors.index(m))
            diags.error(e.pos, unknown("error", m, g.errors))
            return None
        case A.Member(expr=A.Name(name=tn), member=m) if isinstance(g.types.get(tn), EnumT):
            et = g.types[tn]
            assert isinstance(et, EnumT)
            if m not in et.members:
                diags.error(e.pos, unknown(f"member of '{tn}':", m, et.members))
                return None
            return ConstValue(et.underlying or et, et.values[et.members.index(m)])
        case A.Cast(type=t, expr=x):
            inner = const_eval(x, g, diags, local)
            target = resolve_type(t, g, diags)
            if inner is None or target is None:
                return None
            if isinstance(target, Bits):
                return ConstValue(target, _wrap(int(inner.value), target.width, target.signed))
            if isinstance(target, Bool):
                return ConstValue(target, bool(inner.value))
            return ConstValue(target, inner.value)
        case A.Unary(op=op, operand=x):
            cv = const_eval(x, g, diags, local)
            if cv is None:
                return None
            if op == "!":
                return ConstValue(Bool(), not cv.value)
            r = -int(cv.value) if op == "-" else ~int(cv.value)
            return ConstValue(cv.type, _fit(r, cv.type))
        case A.Binary(op=op, left=l, right=r):
            a = const_eval(l, g, diags, local)
            b = const_eval(r, g, diags, local)
            if a is None or b is None:
                return None
            return fold_binary(op, a, b, e.pos, diags)
        case A.Call(func=A.Name(name="static_assert"), args=args):
            return _static_assert(e, args, g, diags, local)
    diags.error(e.pos, "expression is not a compile-time constant")
    return None


def _static_assert(e: A.Expr, args: tuple[A.Arg, ...], g: Globals, diags: Diagnostics,
                   local: dict[str, ConstValue] | None) -> ConstValue | None:
    """core.p4's static_assert(check[, message]): true, or an error when check is false."""
    if not 1 <= len(args) <= 2 or any(a.value is None for a in args):
        diags.error(e.pos, f"static_assert takes a condition and an optional message, "
                           f"got {len(args)} argument(s)")
        return None
    check = args[0].value
    assert check is not None
    cv = const_eval(check, g, diags, local)
    if cv is None:
        return None
    if not isinstance(cv.type, Bool):
        diags.error(check.pos, "static_assert's condition must be a bool")
        return None
    if not cv.value:
        msg = args[1].value if len(args) == 2 else None
        diags.error(e.pos, "static_assert failed" + (
            f": {msg.value}" if isinstance(msg, A.StrLit) and msg.value else ""))
        return None
    return ConstValue(Bool(), True)


def fold_binary(op: str, a: ConstValue, b: ConstValue, pos: Pos,
                diags: Diagnostics) -> ConstValue | None:
    x, y = a.value, b.value
    t = a.type if not isinstance(a.type, InfInt) else b.type
    # An int operand takes the other operand's bit type first (P4 implicit cast), so that
    # `-1 > 4w8` compares 15 with 8.
    if op not in ("<<", ">>", "++"):
        if isinstance(a.type, InfInt) and isinstance(b.type, Bits):
            x = _wrap(int(x), b.type.width, b.type.signed)
        elif isinstance(b.type, InfInt) and isinstance(a.type, Bits):
            y = _wrap(int(y), a.type.width, a.type.signed)
    if op in ("&&", "||"):
        return ConstValue(Bool(), (bool(x) and bool(y)) if op == "&&" else (bool(x) or bool(y)))
    if op in ("==", "!=", "<", ">", "<=", ">="):
        res = {"==": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y,
               ">=": x >= y}[op]
        return ConstValue(Bool(), res)
    xi, yi = int(x), int(y)
    if op in ("/", "%") and yi == 0:
        diags.error(pos, "division by zero")
        return None
    if op == "++":
        if not (isinstance(a.type, Bits) and isinstance(b.type, Bits)):
            diags.error(pos, "concatenation needs operands of known width")
            return None
        return ConstValue(Bits(a.type.width + b.type.width), (xi << b.type.width) | yi)
    ops = {"+": xi + yi, "-": xi - yi, "*": xi * yi, "&": xi & yi, "|": xi | yi, "^": xi ^ yi,
           "<<": xi << yi if yi < 4096 else 0, ">>": xi >> yi,
           "/": xi // yi if yi else 0, "%": xi % yi if yi else 0,
           "|+|": xi + yi, "|-|": max(xi - yi, 0)}
    if op not in ops:
        diags.error(pos, f"operator '{op}' is not supported on constants")
        return None
    if op in ("<<", ">>"):
        t = a.type
    if op in ("|+|", "|-|") and isinstance(t, Bits):
        # Saturating: the result is clamped to the type's range, never wrapped.
        lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed \
            else (0, (1 << t.width) - 1)
        r = xi + yi if op == "|+|" else xi - yi
        return ConstValue(t, min(max(r, lo), hi))
    return ConstValue(t, _fit(ops[op], t))


def _header_field(t: P4Type) -> bool:
    return isinstance(t, (Bits, VarbitT, Bool)) or \
        (isinstance(t, EnumT) and t.underlying is not None)


def _flat(t: StructT) -> list[tuple[str, P4Type]] | None:
    """A struct's fields flattened to `a.b` names, or None if one cannot sit in a header."""
    out: list[tuple[str, P4Type]] = []
    for n, ft in t.fields:
        if isinstance(ft, StructT):
            inner = _flat(ft)
            if inner is None:
                return None
            out.extend((f"{n}.{m}", mt) for m, mt in inner)
        elif _header_field(ft) and not isinstance(ft, VarbitT):
            out.append((n, ft))
        else:
            return None
    return out


def _wrap(v: int, w: int, signed: bool) -> int:
    v &= (1 << w) - 1 if w > 0 else 0
    if signed and w > 0 and v >> (w - 1):
        v -= 1 << w
    return v


def _fit(v: int, t: P4Type) -> int:
    if isinstance(t, Bits):
        return _wrap(v, t.width, t.signed)
    return v


def resolve_type(t: A.TypeExpr, g: Globals, diags: Diagnostics,
                 type_vars: dict[str, P4Type] | None = None) -> P4Type | None:
    """Bind a type expression to a semantic type, reporting unknown names and bad widths."""
    match t:
        case A.BitType(width=None):
            return Bits(1)
        case A.BitType(width=w) | A.IntType(width=w) if w is not None:
            cv = const_eval(w, g, diags)
            if cv is None:
                return None
            width = int(cv.value)
            if width <= 0 or width > 2048:
                diags.error(t.pos, f"invalid width {width}: must be between 1 and 2048")
                return None
            return Bits(width, isinstance(t, A.IntType))
        case A.IntType(width=None):
            return InfInt()
        case A.VarbitType(width=w):
            cv = const_eval(w, g, diags)
            return VarbitT(int(cv.value)) if cv is not None else None
        case A.BoolType():
            return Bool()
        case A.ErrorType():
            return ErrorT()
        case A.StringType():
            return Str()
        case A.VoidType():
            return Void()
        case A.StackType(elem=e, size=s):
            et = resolve_type(e, g, diags, type_vars)
            cv = const_eval(s, g, diags)
            if et is None or cv is None:
                return None
            n = int(cv.value)
            if not 0 < n <= MAX_STACK_SIZE:
                # every element is a header instance of its own in the JSON (and in memory)
                diags.error(s.pos, f"header stack size {n} is not supported (1 to "
                                   f"{MAX_STACK_SIZE} elements)" if n > 0 else
                            f"header stack size must be positive, got {n}")
                return None
            if isinstance(et, UnionT):
                return UnionStackT(et, int(cv.value))
            if not isinstance(et, HeaderT):
                diags.error(t.pos, f"unsupported construct: stack of {show(et)} "
                                   "(only stacks of headers or header unions)")
                return None
            return StackT(et, int(cv.value))
        case A.TypeName(name="tuple", args=args) if "tuple" not in g.types:
            # A tuple is stored and initialized like a struct with fields f0, f1, ...
            elems = [resolve_type(a, g, diags, type_vars) for a in args]
            if any(x is None for x in elems):
                return None
            fields = tuple((f"f{i}", x) for i, x in enumerate(elems) if x is not None)
            return StructT("tuple<" + ", ".join(show(x) for _, x in fields) + ">", fields,
                           ("tuple",))
        case A.TypeName(name=n, args=args):
            if type_vars is not None and n in type_vars:
                return type_vars[n]
            if n in g.types:
                return g.types[n]
            if n in g.externs:
                resolved = [resolve_type(a, g, diags, type_vars) for a in args]
                if any(r is None for r in resolved):
                    return None
                return ExternT(n, tuple(r for r in resolved if r is not None))
            if n in g.blocks or n in g.parsers or n in g.controls:
                return ExternT(n, ())
            diags.error(t.pos, unknown("type", n, [*g.types, *g.externs]))
            return None
        case A.DontCareType():
            return TypeVar("_")
    diags.error(t.pos, "unsupported construct: this kind of type")
    return None


class ResolveNames:
    """Pass: Program → Globals (reads only)."""

    def run(self, prog: A.Program, diags: Diagnostics) -> Globals:
        g = Globals()
        seen: dict[str, Pos] = {}
        for d in prog.decls:
            self._declare(d, g, diags, seen)
        return g

    def _declare(self, d: A.Node, g: Globals, diags: Diagnostics, seen: dict[str, Pos]) -> None:
        if isinstance(d, A.ErrorDecl):
            for m in d.members:
                if m not in g.errors:
                    g.errors.append(m)
            return
        if isinstance(d, A.MatchKindDecl):
            g.match_kinds.extend(m for m in d.members if m not in g.match_kinds)
            return
        assert isinstance(d, A.Decl)
        name = d.name
        # Overloaded extern functions and the duplicate NoAction of a re-included file are fine.
        if name in seen and not isinstance(d, A.FunctionDecl):
            diags.error(d.pos, f"re-declaration of '{name}' (first declared at {seen[name]})")
            return
        seen.setdefault(name, d.pos)
        g.decl_annotations[name] = d.annotations
        match d:
            case A.ConstDecl(type=t, value=v):
                tt = resolve_type(t, g, diags)
                cv = const_eval(v, g, diags)
                if tt is None or cv is None:
                    return
                if isinstance(tt, Bits) and isinstance(cv.type, (InfInt, Bits)):
                    if isinstance(cv.type, Bits) and cv.type != tt:
                        diags.error(v.pos, f"type mismatch: constant '{name}' is {show(tt)} but "
                                           f"its value is {show(cv.type)}")
                        return
                    g.consts[name] = ConstValue(tt, _wrap(int(cv.value), tt.width, tt.signed))
                else:
                    g.consts[name] = ConstValue(tt, cv.value)
            case A.Typedef(type=t):
                g.typedefs[name] = d
                tt = resolve_type(t, g, diags)
                if tt is not None:
                    g.types[name] = tt
            case A.HeaderDecl(fields=fs) | A.StructDecl(fields=fs) | A.HeaderUnionDecl(fields=fs):
                fields: list[tuple[str, P4Type]] = []
                groups: list[tuple[str, StructT]] = []
                names: set[str] = set()
                for f in fs:
                    ft = resolve_type(f.type, g, diags)
                    if f.name in names:
                        diags.error(f.pos, f"duplicate field '{f.name}' in '{name}'")
                    names.add(f.name)
                    g.field_annotations[(name, f.name)] = f.annotations
                    g.field_types[(name, f.name)] = f.type
                    if ft is None:
                        continue
                    if isinstance(d, A.HeaderDecl) and isinstance(ft, StructT) and \
                            _flat(ft) is not None:
                        # A struct of bit fields inside a header: its fields are the header's,
                        # named `s.f` (the value keeps its struct type, see HeaderT.groups).
                        groups.append((f.name, ft))
                        fields.extend((f"{f.name}.{n}", t) for n, t in _flat(ft) or ())
                        continue
                    if isinstance(d, A.HeaderDecl) and not _header_field(ft):
                        diags.error(f.pos, f"header field '{f.name}' has type {show(ft)}; "
                                           "header fields must be bit<W>, int<W>, varbit<W>, "
                                           "bool, an enum bit<W> or a struct of those")
                        continue
                    fields.append((f.name, ft))
                if isinstance(d, A.HeaderDecl):
                    g.types[name] = HeaderT(name, tuple(fields), groups=tuple(groups))
                    g.header_order.append(name)
                elif isinstance(d, A.StructDecl):
                    g.types[name] = StructT(name, tuple(fields),
                                            tuple(a.name for a in d.annotations))
                else:
                    for (fname, ft) in fields:
                        if not isinstance(ft, HeaderT):
                            diags.error(d.pos, f"header_union '{name}': member '{fname}' has "
                                               f"type {show(ft)}; members must be headers")
                    g.types[name] = UnionT(name, tuple(fields))
            case A.EnumDecl(underlying=u, members=ms):
                ut = resolve_type(u, g, diags) if u is not None else None
                values: list[int] = []
                for i, (m, ve) in enumerate(ms):
                    if ve is None:
                        if ut is not None:
                            diags.error(d.pos, f"member '{m}' of serializable enum '{name}' "
                                               "needs a value")
                        values.append(i)
                    else:
                        cv = const_eval(ve, g, diags)
                        values.append(int(cv.value) if cv else 0)
                bits = ut if isinstance(ut, Bits) else None
                g.types[name] = EnumT(name, tuple(m for m, _ in ms), bits, tuple(values))
            case A.ExternDecl():
                g.externs[name] = d
            case A.FunctionDecl(body=None):
                g.functions.setdefault(name, []).append(d)
            case A.FunctionDecl():
                # One 'return e;' with in parameters is inlined as an expression by the type
                # checker; any other body was expanded into statements by InlineFunctions.
                g.functions.setdefault(name, []).append(d)
            case A.ActionDecl():
                g.actions[name] = d
            case A.ParserDecl():
                g.parsers[name] = d
            case A.ControlDecl():
                g.controls[name] = d
            case A.ParserTypeDecl() | A.ControlTypeDecl() | A.PackageDecl():
                g.blocks[name] = d
            case A.Instantiation():
                g.instances[name] = d
            case _:
                diags.error(d.pos, f"unsupported construct: {type(d).__name__}")
