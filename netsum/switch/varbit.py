"""Headers with a variable-length (varbit) field: unpacking, packing, field-list bits.

Such a header's byte size is known only per packet: its fixed fields plus the varbit field's
current width `F[h.vl_len]` (bits, a multiple of 8; 0 until extracted).  bmv2 handles these
field by field at any bit offset (`Header::extract_VL_common`, `Header::deparse`); here the
header's bytes are one big integer that the fields are shifted out of / into.  The varbit
field's value is unsigned (bmv2 keeps VL fields as raw bytes).
"""
from __future__ import annotations

from netsum.switch.layout import HeaderInfo, Layout, cfg_error

__all__ = ["vl_unpack", "vl_pack_source", "vl_field_bits", "check_vl_header"]


def check_vl_header(h: HeaderInfo) -> None:
    """bmv2 needs whole bytes; the varbit field's width is checked per packet (% 8)."""
    if h.nbits % 8:
        raise cfg_error(f"header '{h.name}'", f"type '{h.type_name}': its fixed fields total "
                                              f"{h.nbits} bits, not a whole number of bytes")


def vl_unpack(h: HeaderInfo, nbits: str, nbytes: str) -> list[str]:
    """Statements unpacking `h` from `buf` at `off` into F, its varbit field `nbits` (a
    local name) wide and the whole header `nbytes` (a local name) long, already checked."""
    out = [f"_x = int.from_bytes(buf[off:off + {nbytes}], 'big')"]
    for k in range(len(h.fields) - 1, -1, -1):
        s = h.fields[k][1]
        if k == h.varbit:
            out += [f"F[{s.index}] = _x & ((1 << {nbits}) - 1)", f"_x >>= {nbits}"]
            continue
        val = f"_x & {s.mask}"
        if s.signed:
            half = 1 << (s.width - 1)
            val = f"(({val}) ^ {half}) - {half}"
        out += [f"F[{s.index}] = {val}", f"_x >>= {s.width}"]
    out.append(f"F[{h.vl_len}] = {nbits}")
    return out


def vl_pack_source(h: HeaderInfo, fname: str) -> str:
    """Source of `fname(F) -> bytes`: the header's fields at their current widths."""
    acc = "0"
    for k, (_n, s) in enumerate(h.fields):
        if k == h.varbit:
            acc = f"({acc}) << _l | (F[{s.index}] & ((1 << _l) - 1))"
        else:
            acc = f"({acc}) << {s.width} | (F[{s.index}] & {s.mask})"
    return (f"def {fname}(F):\n"
            f"    _l = F[{h.vl_len}]\n"
            f"    return ({acc}).to_bytes(({h.nbits} + _l) >> 3, 'big')\n")


def vl_field_bits(layout: Layout, index: int) -> str | None:
    """Source of the current width of the field in slot `index` when it is a varbit field
    (None for a fixed-width field)."""
    w = layout.vl_len.get(index)
    return f"F[{w}]" if w is not None else None
