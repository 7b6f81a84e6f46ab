"""Generated parts of docs/protocol.md and docs/quantization.md: the header byte diagram, the
field and constant tables, and the scale-shift table, all rendered from netsum/wire/ and
workers/quant.py.  A test compares the docs with these renderings, so the docs cannot drift from
the code.  `python -m netsum.workers.docgen` rewrites the generated blocks in place.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from netsum import wire as protocol
from netsum.wire import HEADER_FIELDS, MsgType
from netsum.workers import quant

__all__ = ["byte_diagram", "field_table", "constants_table", "scale_table", "BLOCKS",
           "render_into", "main"]

_ROW_BITS = 32


def _ruler() -> list[str]:
    tens = " " + " ".join(str(i // 10) if i % 10 == 0 else " " for i in range(_ROW_BITS))
    ones = " " + " ".join(str(i % 10) for i in range(_ROW_BITS))
    return [tens.rstrip(), ones]


def _cell(label: str, bits: int) -> str:
    width = 2 * bits - 1
    return label[:width].center(width)


def byte_diagram(k: int = protocol.K_DEFAULT, values_shown: int = 2) -> str:
    """RFC-style diagram, 32 bits per row: the header fields, then the K int32 values."""
    border = "+" + "-+" * _ROW_BITS
    lines = _ruler() + [border]
    row: list[str] = []
    used = 0
    for f in HEADER_FIELDS:
        if used + f.bits > _ROW_BITS:
            raise AssertionError(f"field {f.name} crosses a 32-bit row; extend byte_diagram")
        row.append(_cell(f.name, f.bits))
        used += f.bits
        if used == _ROW_BITS:
            lines += ["|" + "|".join(row) + "|", border]
            row, used = [], 0
    if row:
        raise AssertionError("header does not end on a 32-bit row")
    for i in range(values_shown):
        lines += ["|" + _cell(f"value[{i}] (int32, big-endian)", 32) + "|", border]
    lines += ["|" + _cell("...", 32) + "|", border]
    lines += ["|" + _cell(f"value[K-1]   (K = 32 ... {max(protocol.K_SUPPORTED)}, power of 2)",
                          32) + "|", border]
    return "\n".join(lines)


def field_table() -> str:
    rows = ["| field | bits | bit offset | meaning |", "|---|---|---|---|"]
    at = 0
    for f in HEADER_FIELDS:
        rows.append(f"| `{f.name}` | {f.bits} | {at} | {f.doc} |")
        at += f.bits
    return "\n".join(rows)


def constants_table() -> str:
    rows = ["| constant | value |", "|---|---|"]
    items: list[tuple[str, object]] = [
        ("UDP_PORT", protocol.UDP_PORT), ("K_DEFAULT", protocol.K_DEFAULT),
        ("K_SUPPORTED", ", ".join(map(str, protocol.K_SUPPORTED))),
        ("K_HARDWARE_MAX", f"{protocol.K_HARDWARE_MAX} (larger K: emulation only, jumbo frames)"),
        ("EXP_BIAS", protocol.EXP_BIAS), ("EXP_ZERO", protocol.EXP_ZERO),
        ("MAX_WORKERS", protocol.MAX_WORKERS), ("MAX_SLOTS", protocol.MAX_SLOTS),
        ("HEADER_BYTES", protocol.HEADER_BYTES),
        ("DEST_ALL", f"0x{protocol.DEST_ALL:02x}"), ("RANK_SWITCH", f"0x{protocol.RANK_SWITCH:02x}"),
    ]
    items += [(f"MsgType.{m.name}", int(m)) for m in MsgType]
    items += [(f"Flags.{f.name}", f"0x{int(f):02x}") for f in protocol.Flags if f.name != "NONE"]
    items += [(f"Reason.{r.name}", f"{int(r)} (switch's value in `{protocol.REASON_FIELD[r]}`)")
              for r in protocol.Reason if r in protocol.REASON_FIELD]
    items += [(f"packet_bytes({k})", protocol.packet_bytes(k)) for k in protocol.K_SUPPORTED]
    items += [("header_only_bytes()", protocol.header_only_bytes())]
    rows += [f"| `{name}` | {value} |" for name, value in items]
    return "\n".join(rows)


def scale_table() -> str:
    rows = ["| workers n | shift s | n * 2^s | max per-element error |", "|---|---|---|---|"]
    for n in (1, 2, 3, 4, 8, 16, 32):
        s = quant.scale_shift(n)
        rows.append(f"| {n} | {s} | {n * 2 ** s} | {n} * 2^(E-{s + 1}) |")
    return "\n".join(rows)


#: name of a generated block -> (document, renderer)
BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "byte-diagram": ("protocol.md", lambda: "```\n" + byte_diagram() + "\n```"),
    "field-table": ("protocol.md", field_table),
    "constants": ("protocol.md", constants_table),
    "scale-table": ("quantization.md", scale_table),
}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN GENERATED {name} -->\n)(.*?)(\n<!-- END GENERATED {name} -->)",
                      re.S)


def render_into(text: str, doc: str) -> str:
    """`text` with every generated block of `doc` replaced by its current rendering."""
    for name, (target, render) in BLOCKS.items():
        if target != doc:
            continue
        pat = _pattern(name)
        if not pat.search(text):
            raise ValueError(f"{doc}: generated block {name!r} markers not found")
        body = render()
        text = pat.sub(lambda m: m.group(1) + body + m.group(3), text)
    return text


def main(argv: list[str] | None = None) -> int:
    docs = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "docs")
    for doc in sorted({d for d, _ in BLOCKS.values()}):
        path = docs / doc
        path.write_text(render_into(path.read_text(), doc))
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
