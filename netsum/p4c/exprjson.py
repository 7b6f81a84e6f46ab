"""Typed IR expressions → BMv2 JSON values, with p4c's ArithmeticFixup and wrapping quirks.

bmv2 evaluates expressions with unbounded precision, so every unsigned ``+ - * << >> ~``, unary
minus and narrowing cast is wrapped in ``& mask`` (``two_comp_mod`` when signed), as p4c's
``ArithmeticFixup`` does.  An expression used directly as a primitive parameter is wrapped twice
(``{"type":"expression","value":{"type":"expression","value":{...}}}``), like p4c's output.
Constants are ``hexstr`` zero-padded to the byte width of their type.
"""
from __future__ import annotations

from typing import Any

from .ir import (FieldRef, HeaderRef, ParamRef, StackFieldRef, StackRef, TBinary, TCast,
                 TConcat, TConst, TExpr, TIsValid, TList, TLoc, TLookahead, TSlice, TTernary,
                 TLastIndex, TUnary, TUnionValid, UnionRef, UnionStackRef)
from .types import Bits, Bool, EnumT, InfInt, width_of

__all__ = ["Json", "hexstr", "field_json", "lower_expr", "as_param", "as_condition", "to_data",
           "wrap", "ref_json"]

Json = dict[str, Any]
_FIXED_OPS = ("+", "-", "*", "<<", ">>", "/", "%")
_OPNAME = {"&&": "and", "||": "or"}


def hexstr(value: int, width: int | None = None) -> Json:
    """p4c's hexstr: padded to whole bytes of ``width``; minimal when the width is unknown."""
    neg = value < 0
    v = -value if neg else value
    digits = f"{v:x}" if width is None else f"{v:0{2 * ((width + 7) // 8)}x}"
    return {"type": "hexstr", "value": ("-0x" if neg else "0x") + digits}


def wrap(op: str, left: Json | None, right: Json | None, **extra: Json) -> Json:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **extra}}


def field_json(ref: FieldRef) -> Json:
    return {"type": "field", "value": [ref.header, ref.field]}


def ref_json(loc: TLoc) -> Json:
    """A location as a primitive parameter (field, header, header stack, runtime data)."""
    ref = loc.ref
    if isinstance(ref, FieldRef):
        return field_json(ref)
    if isinstance(ref, HeaderRef):
        return {"type": "header", "value": ref.name}
    if isinstance(ref, StackRef):
        return {"type": "header_stack", "value": ref.name}
    if isinstance(ref, UnionRef):
        return {"type": "header_union", "value": ref.name}
    if isinstance(ref, UnionStackRef):
        return {"type": "header_union_stack", "value": ref.name}
    if isinstance(ref, ParamRef):
        return {"type": "runtime_data", "value": ref.index}
    if isinstance(ref, StackFieldRef):
        return {"type": "stack_field", "value": [ref.stack, ref.field]}
    raise ValueError(f"no JSON for {ref}")


def _mask(width: int) -> Json:
    return hexstr((1 << width) - 1, width)


def _fixup(e: Json, t: Bits) -> Json:
    if t.signed:
        return wrap("two_comp_mod", e, hexstr(t.width))
    return wrap("&", e, _mask(t.width))


def const_json(te: TConst) -> Json:
    t = te.type
    if isinstance(t, Bool):
        return {"type": "bool", "value": bool(te.value)}
    if isinstance(t, Bits):
        return hexstr(int(te.value), t.width)
    if isinstance(t, EnumT) and t.underlying is not None:
        return hexstr(int(te.value), t.underlying.width)
    return hexstr(int(te.value))


def lower_expr(te: TExpr) -> Json:
    """JSON of te; bool-typed expressions come out bool-kinded (d2b of a stored bit)."""
    match te:
        case TConst():
            return const_json(te)
        case TLoc(ref=ParamRef(index=i)):
            local = {"type": "local", "value": i}
            return wrap("d2b", None, local) if isinstance(te.type, Bool) else local
        case TLoc(ref=FieldRef() as ref):
            f = field_json(ref)
            return wrap("d2b", None, f) if isinstance(te.type, Bool) else f
        case TLoc(ref=StackFieldRef()):
            j = ref_json(te)
            return wrap("d2b", None, j) if isinstance(te.type, Bool) else j
        case TLoc():
            return ref_json(te)
        case TIsValid(header=h):
            return wrap("d2b", None, {"type": "field", "value": [h, "$valid$"]})
        case TUnionValid(union=u):
            return wrap("valid_union", None, {"type": "header_union", "value": u})
        case TLastIndex(stack=st, union=u):
            return wrap("last_stack_index", None,
                        {"type": "header_union_stack" if u else "header_stack", "value": st})
        case TUnary(op="!", operand=x):
            return wrap("not", None, lower_expr(x))
        case TUnary(op="-", operand=x):
            t = te.type
            assert isinstance(t, Bits)
            return _fixup(wrap("-", hexstr(0, t.width), lower_expr(x)), t)
        case TUnary(op="~", operand=x):
            t = te.type
            assert isinstance(t, Bits)
            return _fixup(wrap("~", None, lower_expr(x)), t)
        case TBinary(op=op, left=a, right=b):
            return _binary(te, op, a, b)
        case TCast(operand=x):
            return _cast(te, x)
        case TSlice(operand=x, hi=hi, lo=lo):
            inner = lower_expr(x)
            if lo:
                inner = wrap(">>", inner, hexstr(lo))
            return wrap("&", inner, _mask(hi - lo + 1))
        case TConcat(left=a, right=b):
            t = te.type
            assert isinstance(t, Bits)
            shifted = wrap("<<", lower_expr(a), hexstr(width_of(b.type)))
            return wrap("|", _fixup(shifted, Bits(t.width)), lower_expr(b))
        case TTernary(cond=c, then=a, other=b):
            return wrap("?", lower_expr(a), lower_expr(b), cond=lower_expr(c))
        case TLookahead():
            raise ValueError("lookahead outside a parser")
        case TList():
            raise ValueError("list expression as a value")
    raise ValueError(f"cannot lower {type(te).__name__}")


def _binary(te: TExpr, op: str, a: TExpr, b: TExpr) -> Json:
    t = te.type
    if op == "-" and isinstance(t, Bits) and not t.signed and isinstance(b, TConst):
        # p4c's strength reduction: x - c on bit<W> becomes x + (2^W - c).
        c = (-int(b.value)) & ((1 << t.width) - 1)
        return _fixup(wrap("+", lower_expr(a), hexstr(c, t.width)), t)
    if op in ("|+|", "|-|"):
        assert isinstance(t, Bits)
        inner = wrap("+" if op == "|+|" else "-", lower_expr(a), lower_expr(b))
        return wrap("sat_cast" if t.signed else "usat_cast", inner, hexstr(t.width))
    e = wrap(_OPNAME.get(op, op), lower_expr(a), lower_expr(b))
    if op in _FIXED_OPS and isinstance(t, Bits):
        return _fixup(e, t)
    return e


def _cast(te: TExpr, x: TExpr) -> Json:
    t, src = te.type, x.type
    inner = lower_expr(x)
    if isinstance(t, Bool):
        return wrap("d2b", None, inner)
    if isinstance(src, Bool):
        return wrap("b2d", None, inner)
    if isinstance(t, Bits):
        return _fixup(inner, t)
    return inner


def to_data(te: TExpr) -> Json:
    """te as a data value (bool becomes b2d) for assignment or an extern argument."""
    if isinstance(te.type, Bool):
        if isinstance(te, TLoc):
            return ref_json(te)
        return wrap("b2d", None, lower_expr(te))
    return lower_expr(te)


def as_param(te: TExpr) -> Json:
    """te as a primitive parameter: runtime_data for parameters, expressions wrapped twice."""
    if isinstance(te, TLoc):
        return ref_json(te)
    j = to_data(te)
    if j.get("type") == "expression":
        return {"type": "expression", "value": j}
    return j


def as_condition(te: TExpr) -> Json:
    """A boolean expression for a conditional / if_cond (wrapped once)."""
    j = lower_expr(te)
    if j.get("type") == "expression":
        return j
    if j.get("type") == "bool":
        return wrap("==", hexstr(1 if j["value"] else 0), hexstr(1))
    return wrap("d2b", None, j)


_ = InfInt
