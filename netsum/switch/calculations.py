"""Hash and checksum calculations (`calculations` in BMv2 JSON) and the checksum units.

Input bytes are built as bmv2 does: the listed fields' bits concatenated MSB first, zero padded at
the end to a whole byte.  Algorithms: crc16 (poly 0x8005 reflected, init 0, i.e. CRC-16/ARC),
crc32 (IEEE, as zlib), csum16 (Internet checksum, RFC 1071), xor16, identity, random, and
crc16_custom / crc32_custom at bmv2's start-up parameters (those of crc16 and crc32).
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

from netsum.switch.expressions import ExprCompiler
from netsum.switch.layout import MAX_FIELD_WIDTH, Layout, cfg_error, loads
from netsum.switch.varbit import vl_field_bits

__all__ = ["ALGORITHMS", "crc16", "csum16", "xor16", "build_calculation", "needs_payload"]


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    crc = 0
    t = _CRC16
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def csum16(data: bytes) -> int:
    if len(data) & 1:
        data += b"\x00"
    n = int.from_bytes(data, "big")
    # Fold the whole buffer 16 bits at a time: sum of words mod 0xffff equals the number mod 0xffff
    # (2**16 == 1 mod 0xffff); one's complement sum is that residue, with 0xffff for non-zero 0.
    total = n % 0xFFFF
    if total == 0 and n != 0:
        total = 0xFFFF
    return (~total) & 0xFFFF


def xor16(data: bytes) -> int:
    if len(data) & 1:
        data += b"\x00"
    r = 0
    for i in range(0, len(data), 2):
        r ^= (data[i] << 8) | data[i + 1]
    return r


def identity(data: bytes) -> int:
    return int.from_bytes(data, "big")


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16, "crc32": crc32, "csum16": csum16, "xor16": xor16, "identity": identity,
    # v1model's HashAlgorithm.crc16_custom / crc32_custom: bmv2 starts them with the parameters
    # of crc16 and crc32 (polynomial, initial remainder, final xor, both reflections) and lets
    # only its Thrift API (set_crc16/32_parameters) change them, which is not served here.
    "crc16_custom": crc16, "crc32_custom": crc32,
}


def _width(w: Any, path: str) -> int:
    if type(w) is not int or not 0 < w <= MAX_FIELD_WIDTH:
        raise cfg_error(path, f"bad input width {w!r}")
    return w


@loads("path")
def build_calculation(calc: dict[str, Any], path: str, layout: Layout,
                      rng: random.Random) -> Callable[..., int]:
    """A function F -> hash value for one JSON calculation object (F, payload -> value when
    `needs_payload`)."""
    algo = calc.get("algo")
    inputs = calc.get("input", [])
    if algo == "random":
        return lambda F: rng.getrandbits(32)
    fn = ALGORITHMS.get(algo) if algo is not None else None
    if fn is None:
        raise cfg_error(path, f"hash algorithm {algo!r} is not supported (supported: "
                              f"{sorted(ALGORITHMS) + ['random']})")
    parts: list[tuple[str, int]] = []
    comp = ExprCompiler(layout, path)
    varbits: dict[int, str] = {}          # position in parts -> source of its current width
    payload = False                       # `*_with_payload`: the unparsed bytes follow
    for k, el in enumerate(inputs):
        t = el.get("type") if isinstance(el, dict) else None
        if t == "field":
            s = layout.slot(el["value"], f"{path}.input[{k}]")
            vl = vl_field_bits(layout, s.index)
            if vl is not None:
                varbits[len(parts)] = vl
            parts.append((f"F[{s.index}]", s.width))
        elif t == "hexstr":
            # constants in a field list carry their width in `bitwidth` (p4c) when present
            v = int(el["value"], 16)
            parts.append((repr(v), _width(el.get("bitwidth", max(8, v.bit_length())), path)))
        elif t == "expression":
            src, bits = comp.compile(el)
            parts.append((src, _width(el.get("bitwidth", bits or 32), path)))
        elif t == "header":
            # A whole header (p4c: a checksum or hash over `hdr.h` itself): bmv2 deparses it
            # when valid and adds nothing when not, so every field's width depends on $valid$.
            h = layout.header(el.get("value"), f"{path}.input[{k}]")
            for i, (_fname, fs) in enumerate(h.fields):
                width = f"F[{h.vl_len}]" if i == h.varbit else str(fs.width)
                varbits[len(parts)] = f"({width} if F[{h.valid}] else 0)"
                parts.append((f"F[{fs.index}]", fs.width))
        elif t == "payload" and k == len(inputs) - 1:
            payload = True
        else:
            raise cfg_error(f"{path}.input[{k}]", f"input of type {t!r} is not supported")
    if varbits or payload:
        return _dynamic_calc(parts, varbits, payload, fn, str(calc.get("name")))
    total = sum(w for _, w in parts)
    pad = (-total) % 8
    nbytes = (total + pad) // 8
    terms = []
    shift = pad
    for src, w in reversed(parts):
        terms.append(f"(({src}) & {(1 << w) - 1}) << {shift}" if shift else
                     f"(({src}) & {(1 << w) - 1})")
        shift += w
    body = " | ".join(terms) if terms else "0"
    if algo == "csum16":
        # Sum of 16-bit words modulo 0xffff equals the whole big-endian number modulo 0xffff
        # (2**16 == 1 mod 0xffff), so no byte conversion is needed; odd lengths pad a zero byte.
        if nbytes % 2:
            body = f"({body}) << 8"
        src = ("def _calc(F):\n"
               f"    n = {body}\n"
               "    t = n % 65535\n"
               "    if t == 0 and n:\n"
               "        t = 65535\n"
               "    return ~t & 65535\n")
        ns0: dict[str, Any] = {}
        exec(compile(src, f"<calc {calc.get('name')}>", "exec"), ns0)
        return ns0["_calc"]
    src = (f"def _calc(F):\n    return _algo(({body}).to_bytes({nbytes}, 'big'))\n")
    ns: dict[str, Any] = {"_algo": fn}
    exec(compile(src, f"<calc {calc.get('name')}>", "exec"), ns)
    return ns["_calc"]


def needs_payload(calc: Any) -> bool:
    """True for a calculation that takes the packet's unparsed bytes as a second argument."""
    return bool(getattr(calc, "with_payload", False))


def _dynamic_calc(parts: list[tuple[str, int]], varbits: dict[int, str], payload: bool,
                  fn: Callable[[bytes], int], name: str) -> Callable[..., int]:
    """A field list holding varbit fields (each at its current width: bmv2 serialises the
    fields as they are) or followed by the payload (`verify/update_checksum_with_payload`:
    bmv2 appends the packet's unparsed bytes, `D`, after the fields' bytes)."""
    lines = ["def _calc(F, D=b''):", "    n = b = 0"]
    for k, (src, w) in enumerate(parts):
        if k in varbits:
            lines += [f"    _l = {varbits[k]}", f"    n = n << _l | (({src}) & ((1 << _l) - 1))",
                      "    b += _l"]
        else:
            lines += [f"    n = n << {w} | (({src}) & {(1 << w) - 1})", f"    b += {w}"]
    tail = " + D" if payload else ""
    lines += ["    p = -b % 8", f"    return _algo((n << p).to_bytes((b + p) >> 3, 'big'){tail})"]
    ns: dict[str, Any] = {"_algo": fn}
    exec(compile("\n".join(lines) + "\n", f"<calc {name}>", "exec"), ns)
    calc = ns["_calc"]
    calc.with_payload = payload
    return calc
