"""Deparser: BMv2 JSON deparser order -> one packing function per header-validity pattern."""
from __future__ import annotations

import struct
from typing import Any

from netsum.switch.layout import HeaderInfo, loading
from netsum.switch.parser import check_whole_bytes, pack_parts
from netsum.switch.primregistry import Namespace
from netsum.switch.program import Deparser
from netsum.switch.varbit import check_vl_header, vl_pack_source

__all__ = ["deparser_source"]


class _Deparser:
    """Deparser specialised per header-validity pattern: the valid headers of a pattern are
    packed by one combined `struct.Struct` call (all headers are whole bytes, so their struct
    formats concatenate); a header with a varbit field breaks the run and packs itself.
    Patterns are compiled on first sight and cached."""

    MAX_PATTERNS = 256

    def __init__(self, headers: list[HeaderInfo], vl_packers: dict[str, Any]) -> None:
        self.headers = headers
        self.vl_packers = vl_packers          # header name -> F -> bytes
        self.cache: dict[tuple[int, ...], Any] = {}

    def build(self, key: tuple[int, ...]) -> Any:
        ns: dict[str, Any] = {}
        parts: list[str] = []
        codes = ""
        args: list[str] = []

        def flush() -> None:
            nonlocal codes, args
            if codes:
                name = f"S{len(ns)}"
                ns[name] = struct.Struct(">" + codes)
                parts.append(f"{name}.pack({', '.join(args)})")
            codes, args = "", []
        for h, valid in zip(self.headers, key):
            if not valid:
                continue
            if h.varbit >= 0:
                flush()
                name = f"V{len(ns)}"
                ns[name] = self.vl_packers[h.name]
                parts.append(f"{name}(F)")
                continue
            c, a = pack_parts(h)
            codes += c
            args += a
        flush()
        body = " + ".join(parts) if parts else "b''"
        src = f"def dep(F):\n    return {body}\n"
        exec(compile(src, "<netsum deparser pattern>", "exec"), ns)
        fn = ns["dep"]
        if len(self.cache) < self.MAX_PATTERNS:
            self.cache[key] = fn
        return fn


def deparser_source(deparser: Deparser, ns: Namespace) -> str:
    """The source of `DEPARSE(F)` for the loaded deparser (netsum.switch.program)."""
    headers = list(deparser.headers)
    if not headers:
        return "def DEPARSE(F):\n    return b''\n"
    packers: dict[str, Any] = {}
    with loading(deparser.path):
        for h in headers:
            if h.varbit < 0:
                check_whole_bytes(h)          # at load time
                continue
            check_vl_header(h)
            code: dict[str, Any] = {}
            exec(compile(vl_pack_source(h, "pack"), f"<netsum pack {h.name}>", "exec"), code)
            packers[h.name] = code["pack"]
    dp = _Deparser(headers, packers)
    ns.names["DCACHE"] = dp.cache
    ns.names["DBUILD"] = dp.build
    key = "(" + "".join(f"F[{h.valid}], " for h in headers) + ")"
    return ("def DEPARSE(F):\n"
            f"    key = {key}\n"
            "    fn = DCACHE.get(key)\n"
            "    if fn is None:\n"
            "        fn = DBUILD(key)\n"
            "    return fn(F)\n")
