"""How an expression is spelled in p4c's outputs: `expr_text` (messages, the names of
synthesized objects) and `key_name` (a table key's P4Info name, p4c's TableKeyNames; the
typed refinement with field @names is netsum.p4c.key_names)."""
from __future__ import annotations

from . import ast as A

__all__ = ["expr_text", "key_name"]


def expr_text(e: A.Expr) -> str:
    """p4c-like source spelling of an expression (used for key names and messages)."""
    match e:
        case A.Name(name=n, top_level=t, orig=o):
            return ("." if t else "") + (o or n)
        case A.Member(expr=x, member=m):
            return f"{expr_text(x)}.{m}"
        case A.Index(expr=x, index=i):
            return f"{expr_text(x)}[{expr_text(i)}]"
        case A.Slice(expr=x, hi=h, lo=l):
            return f"{expr_text(x)}[{expr_text(h)}:{expr_text(l)}]"
        case A.IntLit(text=t):
            return t
        case A.BoolLit(value=v):
            return "true" if v else "false"
        case A.Call(func=f, args=args):
            shown = ", ".join(expr_text(a.value) if a.value else "_" for a in args)
            return f"{expr_text(f)}({shown})"
        case A.Unary(op=op, operand=x):
            return f"{op}{expr_text(x)}"
        case A.Binary(op=op, left=l, right=r):
            return f"{expr_text(l)} {op} {expr_text(r)}"
        case A.Cast(expr=x):
            return f"(cast){expr_text(x)}"
    return type(e).__name__



def key_name(e: A.Expr) -> str | None:
    """The P4Info name of a table key (p4c TableKeyNames): a path, field, index, slice, `&`
    or constant written out, ``x.isValid()`` as ``x.$valid$``; None for anything more complex
    (p4c then requires a @name annotation)."""
    match e:
        case A.Name(name=n, orig=o):
            return o or n
        case A.Member(expr=x, member=m):
            base = key_name(x)
            return f"{base}.{m}" if base is not None else None
        case A.Index(expr=x, index=i):
            a, b = key_name(x), key_name(i)
            return f"{a}[{b}]" if a is not None and b is not None else None
        case A.Slice(expr=x, hi=h, lo=l):
            a, b, c = key_name(x), key_name(h), key_name(l)
            return f"{a}[{b}:{c}]" if None not in (a, b, c) else None
        case A.Binary(op="&", left=l, right=r):
            a, b = key_name(l), key_name(r)
            return f"{a} & {b}" if a is not None and b is not None else None
        case A.IntLit(value=v, text=t):
            return hex(v) if "0x" in t.lower() else str(v)
        case A.Call(func=A.Member(expr=x, member="isValid"), args=()):
            base = key_name(x)
            return f"{base}.$valid$" if base is not None else None
    return None
