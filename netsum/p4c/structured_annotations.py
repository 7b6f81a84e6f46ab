"""Structured annotations (`@Name[1, "s", true]`, `@Name[k = v, ...]`, P4_16 §18.2) as p4c
writes them to P4Info: `structured_annotations { name expression_list | kv_pair_list }`
beside the plain `annotations` strings, each value folded to an int64, string or bool.

The parser folds the values (literals and operators over them: by then the preprocessor has
expanded macros, which is how p4c's samples spell constants there) and keeps them in the
annotation's body as JSON; annotation_strings passes the annotation on as "@Name[<json>]"
and p4info.add_annotations turns those strings back into the protobuf message.
"""
from __future__ import annotations

import json
from typing import Any

from p4.config.v1 import p4info_pb2

from . import ast as A

__all__ = ["fold", "encode", "add_annotations"]

_OPS: dict[str, Any] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "&&": lambda a, b: a and b, "||": lambda a, b: a or b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
}


def fold(e: A.Expr) -> int | str | bool | None:
    """The value of a structured annotation's expression; None if it is not a constant."""
    match e:
        case A.BoolLit(value=v):
            return v
        case A.IntLit(value=v):
            return v
        case A.StrLit(value=v):
            return v
        case A.Unary(op="-", operand=x):
            n = fold(x)
            return -n if isinstance(n, int) and not isinstance(n, bool) else None
        case A.Unary(op="!", operand=x):
            b = fold(x)
            return (not b) if isinstance(b, bool) else None
        case A.Binary(op=op, left=l, right=r) if op in _OPS:
            a, b = fold(l), fold(r)
            if a is None or b is None or type(a) is not type(b):
                return None
            try:
                out = _OPS[op](a, b)
            except (TypeError, ValueError):
                return None
            return out if isinstance(out, (int, str, bool)) else None
    return None


def encode(items: list[tuple[str | None, int | str | bool]]) -> str:
    """The annotation body kept for P4Info: a list of [key or null, value]."""
    return json.dumps([[k, v] for k, v in items], separators=(",", ":"))


def _value(msg: p4info_pb2.Expression, v: int | str | bool) -> None:
    if isinstance(v, bool):
        msg.bool_value = v
    elif isinstance(v, int):
        msg.int64_value = v
    else:
        msg.string_value = v


def add_annotations(target: Any, strings: tuple[str, ...]) -> None:
    """Append annotation strings to a P4Info message with `annotations` and
    `structured_annotations` fields, the structured ones ("@Name[<json>]") as messages."""
    for s in strings:
        name, bracket, rest = s[1:].partition("[")
        if not bracket or "(" in name:
            target.annotations.append(s)
            continue
        items = json.loads(rest[:-1])
        sa = target.structured_annotations.add()
        sa.name = name
        if items and items[0][0] is not None:
            for k, v in items:
                kv = sa.kv_pair_list.kv_pairs.add()
                kv.key = k
                _value(kv.value, v)
        else:
            sa.expression_list.SetInParent()
            for _, v in items:
                _value(sa.expression_list.expressions.add(), v)
