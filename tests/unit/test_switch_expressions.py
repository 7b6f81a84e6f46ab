"""BMv2 expression ops compiled to Python: a table of cases evaluated on a field list."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from netsum.switch.calculations import crc16, csum16, xor16
from netsum.switch.expressions import ExprCompiler, write_src
from netsum.switch.layout import build_layout

LAYOUT = build_layout(json.loads((Path(__file__).resolve().parents[1] / "switch_json" /
                                  "features.json").read_text()))
S8 = LAYOUT.slot(["scalars", "s8"], "")          # int<8>
CNT = LAYOUT.slot(["scalars", "cnt"], "")        # bit<32>
COLOR = LAYOUT.slot(["scalars", "color"], "")    # bit<8>


def fld(slot: Any) -> dict[str, Any]:
    name = next(n for n, s in LAYOUT.headers["scalars"].fields if s.index == slot.index)
    return {"type": "field", "value": ["scalars", name]}


def hx(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(v)}


def ex(op: str, left: Any, right: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **kw}}


def run(node: Any, cnt: int = 0, s8: int = 0, color: int = 0) -> Any:
    F = list(LAYOUT.template)
    F[CNT.index], F[S8.index], F[COLOR.index] = cnt, s8, color
    src, _ = ExprCompiler(LAYOUT, "test", (8,)).compile(node)
    return eval(f"lambda F, P: {src}")(F, (200,))   # noqa: S307 - generated from the table


@pytest.mark.parametrize("node, fields, expected", [
    (ex("+", fld(CNT), hx(1)), {"cnt": 0xFFFFFFFF}, 1 << 32),       # unbounded until written
    (ex("&", ex("+", fld(CNT), hx(1)), hx(0xFFFFFFFF)), {"cnt": 0xFFFFFFFF}, 0),
    (ex("-", fld(CNT), hx(3)), {"cnt": 1}, -2),
    (ex("-", None, hx(5)), {}, -5),
    (ex("*", fld(CNT), hx(3)), {"cnt": 7}, 21),
    (ex("/", fld(CNT), hx(2)), {"cnt": 7}, 3),
    (ex("%", fld(CNT), hx(0)), {"cnt": 7}, 0),                         # /0 -> 0
    (ex("<<", fld(COLOR), fld(CNT)), {"color": 1, "cnt": 4}, 16),
    (ex("<<", fld(COLOR), fld(CNT)), {"color": 1, "cnt": 1 << 31}, 0),  # bounded shift
    (ex(">>", fld(CNT), hx(4)), {"cnt": 0x100}, 0x10),
    (ex("^", fld(CNT), hx(0xF)), {"cnt": 0xFF}, 0xF0),
    (ex("|", fld(CNT), hx(0xF)), {"cnt": 0xF0}, 0xFF),
    (ex("~", None, fld(COLOR)), {"color": 0}, -1),
    (ex("==", fld(CNT), hx(3)), {"cnt": 3}, True),
    (ex("!=", fld(CNT), hx(3)), {"cnt": 3}, False),
    (ex(">=", fld(S8), hx(0)), {"s8": -1}, False),                     # signed compare
    (ex("and", ex("d2b", None, fld(COLOR)), ex("<", fld(CNT), hx(2))),
     {"color": 1, "cnt": 1}, True),
    (ex("or", ex("d2b", None, fld(COLOR)), ex("<", fld(CNT), hx(2))),
     {"color": 0, "cnt": 5}, False),
    (ex("not", None, ex("d2b", None, fld(COLOR))), {"color": 0}, True),
    (ex("b2d", None, ex("==", fld(CNT), hx(0))), {"cnt": 0}, 1),
    (ex("?", hx(1), hx(2), cond=ex("==", fld(CNT), hx(0))), {"cnt": 0}, 1),
    (ex("?", hx(1), hx(2), cond=ex("==", fld(CNT), hx(0))), {"cnt": 9}, 2),
    (ex("two_comp_mod", hx(0xFF), hx(8)), {}, -1),
    (ex("two_comp_mod", hx(0x7F), hx(8)), {}, 127),
    (ex("usat_cast", hx(300), hx(8)), {}, 255),
    (ex("usat_cast", ex("-", hx(0), hx(3)), hx(8)), {}, 0),
    (ex("sat_cast", hx(300), hx(8)), {}, 127),
    (ex("sat_cast", ex("-", hx(0), hx(300)), hx(8)), {}, -128),
    ({"type": "local", "value": 0}, {}, 200),
    ({"type": "bool", "value": True}, {}, True),
    ({"type": "expression", "value": {"type": "expression", "value": hx(7)}}, {}, 7),
])
def test_ops(node: Any, fields: dict[str, int], expected: Any) -> None:
    assert run(node, **fields) == expected


@pytest.mark.parametrize("slot, value, stored", [
    (CNT, 1 << 32, 0), (CNT, -1, 0xFFFFFFFF), (COLOR, 0x1FF, 0xFF),
    (S8, 0xFF, -1), (S8, 128, -128), (S8, -129, 127),
])
def test_writes_truncate(slot: Any, value: int, stored: int) -> None:
    F = [0] * len(LAYOUT.template)
    exec(write_src(slot.index, slot.width, slot.signed, (repr(value), None)), {"F": F})
    assert F[slot.index] == stored


@pytest.mark.parametrize("algo, data, expected", [
    (crc16, b"123456789", 0xBB3D),                                   # CRC-16/ARC check value
    (csum16, bytes.fromhex("450000730000400040110000c0a80001c0a800c7"), 0xB861),
    (csum16, b"", 0xFFFF),
    (xor16, b"\x12\x34\x56\x78", 0x444C),
])
def test_algorithms(algo: Any, data: bytes, expected: int) -> None:
    assert algo(data) == expected
