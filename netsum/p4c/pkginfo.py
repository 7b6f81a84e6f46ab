"""P4Info's ``pkg_info`` from the annotations on ``main`` (p4c's addPkgInfo): ``@pkginfo(k = "v",
...)`` fills name/version/organization/contact/url (and arch, with a warning),
``@platform_property(k = N, ...)`` the multicast group table sizes, and every other annotation
on ``main`` is copied into ``pkg_info.annotations`` as on any other P4Info object.

Both annotations are unstructured (``(...)``), so their key-value list is read back from the
annotation's raw body here; a value of the wrong kind is an error, an unknown key a warning,
as p4c reports them.
"""
from __future__ import annotations

from p4.config.v1 import p4info_pb2

from . import ast as A
from .diagnostics import Diagnostics
from .lexer import Token, TokKind, tokenize
from .lower_table import annotation_strings
from .parse_expr import ExprParser, ParseError
from .structured_annotations import add_annotations, fold

__all__ = ["add_pkg_info"]

_STRING_KEYS = ("name", "version", "organization", "contact", "url")
_PLATFORM_KEYS = ("multicast_group_table_size", "multicast_group_table_total_replicas",
                  "multicast_group_table_max_replicas_per_entry")
_OWN = frozenset({"pkginfo", "platform_property"})


def _kv_list(a: A.Annotation, diags: Diagnostics) -> list[tuple[str, A.Expr]]:
    """The ``key = expr`` pairs of an unstructured annotation's body (p4c's PARSE_KV_LIST)."""
    toks = [t for t in tokenize(a.body, a.pos.file, Diagnostics())
            if t.kind is not TokKind.EOF]
    p = ExprParser(toks + [Token(TokKind.EOF, "", a.pos)])
    out: list[tuple[str, A.Expr]] = []
    try:
        while p.tok.kind is not TokKind.EOF:
            key = p.tok
            if key.kind is not TokKind.IDENT:
                raise ParseError(key.pos, "expected a key")
            p.i += 1
            if not p.accept("="):
                raise ParseError(p.tok.pos, "expected '='")
            out.append((key.text, p.parse_expr()))
            if not p.accept(",") and p.tok.kind is not TokKind.EOF:
                raise ParseError(p.tok.pos, "expected ','")
    except ParseError:
        diags.error(a.pos, f"@{a.name} expects a list of key = value pairs")
        return []
    return out


def add_pkg_info(info: p4info_pb2.P4Info, main: A.Instantiation | None,
                 diags: Diagnostics) -> None:
    pkg = info.pkg_info
    pkg.arch = "v1model"
    if main is None:
        return
    for a in main.annotations:
        if a.name == "pkginfo" and not a.structured:
            for key, e in _kv_list(a, diags):
                v = fold(e)
                if key not in _STRING_KEYS and key != "arch":
                    diags.warning(a.pos, f"unknown key name '{key}' in @pkginfo annotation")
                elif not isinstance(v, str):
                    diags.error(a.pos, f"value for '{key}' key in @pkginfo annotation is not "
                                       "a string")
                else:
                    if key == "arch":
                        diags.warning(a.pos, "the 'arch' field in PkgInfo should be set by "
                                             "the compiler, not by the user")
                    setattr(pkg, key, v)
        elif a.name == "platform_property" and not a.structured:
            props = pkg.platform_properties
            props.SetInParent()
            for key, e in _kv_list(a, diags):
                v = fold(e)
                if key not in _PLATFORM_KEYS:
                    diags.warning(a.pos, f"unknown key name '{key}' in @platform_property "
                                         "annotation")
                elif not isinstance(v, int) or isinstance(v, bool):
                    diags.error(a.pos, f"value for '{key}' key in @platform_property "
                                       "annotation is not an integer")
                else:
                    setattr(props, key, v)
    add_annotations(pkg, annotation_strings(tuple(a for a in main.annotations
                                                  if a.name not in _OWN)))
