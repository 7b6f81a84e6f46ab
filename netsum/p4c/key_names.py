"""A table key element's P4Info name when it has no @name (p4c's TableKeyNames, with types).

The expression written out (see :func:`spelling.key_name`), except that a struct or header
field declared with ``@name("n")`` is called ``n`` (``meta.local.f`` with
``@name("ingress_metadata") local`` is ``meta.ingress_metadata.f``), and a field whose @name
begins with ``.`` is a global name: everything to its left is dropped and the dot stripped
(``hdr.ethernet.srcAddr`` with ``@name(".ethernet") ethernet`` is ``ethernet.srcAddr``).
"""
from __future__ import annotations

from typing import Callable

from . import ast as A
from .blocks import annotation_arg
from .spelling import key_name

__all__ = ["typed_key_name"]

#: The type name of an expression's value (a struct, header or union), or None.
TypeNameOf = Callable[[A.Expr], "str | None"]


def typed_key_name(e: A.Expr, type_name_of: TypeNameOf,
                   field_annotations: dict[tuple[str, str], tuple[A.Annotation, ...]]
                   ) -> str | None:
    def name(x: A.Expr) -> str | None:
        match x:
            case A.Member(expr=base, member=m):
                ext = m
                tname = type_name_of(base)
                if tname is not None:
                    arg = annotation_arg(field_annotations.get((tname, m), ()), "name")
                    if isinstance(arg, A.StrLit):
                        ext = arg.value
                if ext.startswith("."):
                    return ext[1:]
                left = name(base)
                return f"{left}.{ext}" if left is not None else None
            case A.Index(expr=x1, index=i):
                a, b = name(x1), key_name(i)
                return f"{a}[{b}]" if a is not None and b is not None else None
            case A.Slice(expr=x1, hi=h, lo=lo):
                a, b, c = name(x1), key_name(h), key_name(lo)
                return f"{a}[{b}:{c}]" if a is not None and b is not None and c is not None \
                    else None
            case A.Binary(op="&", left=left_e, right=r):
                a, b = name(left_e), name(r)
                return f"{a} & {b}" if a is not None and b is not None else None
            case A.Call(func=A.Member(expr=x1, member="isValid"), args=()):
                base_name = name(x1)
                return f"{base_name}.$valid$" if base_name is not None else None
        return key_name(x)

    return name(e)
