"""P4Info for `type` declarations (P4Runtime §8.4 "new types"), as p4c's P4RuntimeSerializer
writes them.

A match field, action parameter or controller-header field declared with a `type` (directly
or through typedefs: the first `type` reached names it) carries `type_name`, and the type is
described in `type_info.new_types`: with `@p4runtime_translation("uri", W)` (W an integer or
`bit<W>`) as `translated_type {uri, sdn_bitwidth: W}` and the field's P4Info bitwidth becomes
W; with `string` as `sdn_string` and no bitwidth; otherwise as `original_type` (the
underlying bit string).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import ast as A
from .resolve import Globals

__all__ = ["NewTypeModel", "new_type_of", "p4runtime_width"]

_TRANSLATION = re.compile(r'\s*"([^"]*)"\s*,\s*(.*?)\s*$', re.S)


@dataclass(frozen=True, slots=True)
class NewTypeModel:
    name: str
    width: int                  # the underlying bit string's width
    signed: bool
    uri: str = ""               # translated when set
    sdn_width: int | None = None  # None with a uri: sdn_string
    annotations: tuple[str, ...] = ()


def _decl(texpr: object, g: Globals) -> A.Typedef | None:
    seen = 0
    while isinstance(texpr, A.TypeName) and not texpr.args and seen < 64:
        d = g.typedefs.get(texpr.name)
        if d is None:
            return None
        if d.is_new_type:
            return d
        texpr, seen = d.type, seen + 1
    return None


def new_type_of(texpr: object, g: Globals) -> NewTypeModel | None:
    """The new type a declared type names (None: not a `type`, or not a bit string)."""
    from .lower_table import annotation_strings   # lower_table imports this module's users
    from .types import Bits
    d = _decl(texpr, g)
    if d is None:
        return None
    t = g.types.get(d.name)
    if not isinstance(t, Bits):
        return None
    uri, sdn = "", None
    annos = []
    for a in d.annotations:
        if a.name == "p4runtime_translation":
            m = _TRANSLATION.match(a.body)
            if m is None:
                continue
            uri, width = m.group(1), m.group(2)
            wm = re.fullmatch(r"(?:bit\s*<\s*)?(\d+)(?:w\d+)?\s*>?", width)
            sdn = int(wm.group(1)) if wm else None
        else:
            annos.append(a)
    return NewTypeModel(d.name, t.width, t.signed, uri, sdn, annotation_strings(tuple(annos)))


def p4runtime_width(nt: NewTypeModel | None, width: int) -> int:
    """A field's P4Info bitwidth: the translated width, 0 for a string, else its own."""
    if nt is None or not nt.uri:
        return width
    return nt.sdn_width or 0
