"""Loops inside actions: p4c (>= 2025, `for` in action bodies) writes them with a backward
`_jump` to the condition check, `break` as a `_jump` past the loop and `continue` as a `_jump`
to the update statements.  The JSON here follows p4c's convertActionBody for p4c's own test
program forloop-bmv2.p4; the expected results are the loops' values worked out by hand.
Real p4c's JSON of loops of our own runs in test_switch_p4c_loops_unions.py."""
from __future__ import annotations

from typing import Any

import pytest

from bmv2json import F, expr, hexstr, prim, program
from netsum.switch.device import Device

M8, M32 = 0xFF, 0xFFFFFFFF
SUM, PROD, COUNT = F("h", "sum"), F("h", "product"), F("h", "count")
I, J = F("scalars", "i"), F("scalars", "j")


def assign(dst: dict[str, Any], value: Any) -> dict[str, Any]:
    return prim("assign", dst, value)


def inc(dst: dict[str, Any], mask: int) -> dict[str, Any]:
    return assign(dst, expr("&", expr("+", dst, hexstr(1)), hexstr(mask), wrap=2))


def jiz(cond: dict[str, Any], target: int) -> dict[str, Any]:
    return prim("_jump_if_zero", expr("b2d", None, cond, wrap=2), hexstr(target))


def jump(target: int) -> dict[str, Any]:
    return prim("_jump", hexstr(target))


def lt(a: Any, b: Any) -> dict[str, Any]:
    return expr("<", a, b)


LOOPS: dict[str, list[dict[str, Any]]] = {
    # for (bit<8> i = 1; i <= h.count; i = i + 1) { sum = sum + (bit<32>)i; }
    "sum_loop": [assign(SUM, hexstr(0)), assign(I, hexstr(1)), jiz(expr("<=", I, COUNT), 6),
                 assign(SUM, expr("&", expr("+", SUM, I), hexstr(M32), wrap=2)),
                 inc(I, M8), jump(2)],
    # two nested loops to count, product + 1 in the inner one
    "nested_loop": [assign(PROD, hexstr(0)), assign(I, hexstr(0)), jiz(lt(I, COUNT), 10),
                    assign(J, hexstr(0)), jiz(lt(J, COUNT), 8), inc(PROD, M32), inc(J, M8),
                    jump(4), inc(I, M8), jump(2)],
    # for (i = 0; i < count; i++) { if (i == 5) { break; } sum = sum + 1; }
    "break_loop": [assign(SUM, hexstr(0)), assign(I, hexstr(0)), jiz(lt(I, COUNT), 8),
                   jiz(expr("==", I, hexstr(5)), 5), jump(8), inc(SUM, M32), inc(I, M8),
                   jump(2)],
    # for (i = 0; i < 10; i++) { if ((i & 1) == 0) { continue; } sum = sum + 1; }
    "continue_loop": [assign(SUM, hexstr(0)), assign(I, hexstr(0)),
                      jiz(lt(I, hexstr(10)), 8),
                      jiz(expr("==", expr("&", I, hexstr(1)), hexstr(0)), 5), jump(6),
                      inc(SUM, M32), inc(I, M8), jump(2)],
}


def device(prims: list[dict[str, Any]]) -> Device:
    doc = program(
        header_types=[{"name": "h_t", "fields": [["count", 8, False], ["sum", 32, False],
                                                 ["product", 32, False]]},
                      {"name": "scalars_0", "fields": [["i", 8, False], ["j", 8, False]]}],
        headers=[{"name": "h", "header_type": "h_t"},
                 {"name": "scalars", "header_type": "scalars_0", "metadata": True}],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [{"op": "extract", "parameters": [{"type": "regular",
                                                              "value": "h"}]}]}],
        actions=[prims], deparse=["h"])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    return dev


def run(dev: Device, count: int) -> tuple[int, int]:
    outs = dev.process(1, bytes([count]) + b"\xee" * 8)
    assert len(outs) == 1
    data = outs[0][1]
    return int.from_bytes(data[1:5], "big"), int.from_bytes(data[5:9], "big")


@pytest.mark.parametrize("name, count, want", [
    ("sum_loop", 0, (0, 0xEEEEEEEE)), ("sum_loop", 1, (1, 0xEEEEEEEE)),
    ("sum_loop", 10, (55, 0xEEEEEEEE)), ("sum_loop", 254, (254 * 255 // 2, 0xEEEEEEEE)),
    ("nested_loop", 0, (0xEEEEEEEE, 0)), ("nested_loop", 7, (0xEEEEEEEE, 49)),
    ("nested_loop", 200, (0xEEEEEEEE, 40000)),
    ("break_loop", 3, (3, 0xEEEEEEEE)), ("break_loop", 5, (5, 0xEEEEEEEE)),
    ("break_loop", 9, (5, 0xEEEEEEEE)),
    ("continue_loop", 0, (5, 0xEEEEEEEE)),
])
def test_loop_results(name: str, count: int, want: tuple[int, int]) -> None:
    assert run(device(LOOPS[name]), count) == want


def test_endless_loop_drops_the_packet_and_the_switch_goes_on() -> None:
    # i <= 255 holds for every bit<8> i: the P4 loop never ends for count 255.
    dev = device(LOOPS["sum_loop"])
    assert dev.process(1, bytes([255]) + b"\x00" * 8) == []
    assert dev.stats.loop_limit == 1 and dev.stats.internal_errors == 0
    assert run(dev, 3) == (6, 0xEEEEEEEE)
