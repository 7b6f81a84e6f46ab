"""`for` loops (P4_16 1.2.5) compiled as p4c's BMv2 back end compiles them: primitives with
a backward `_jump` inside an action, `break`/`continue` as jumps to the loop's end and its
update.  Expectations come from outside the compiler: real p4c 1.2.5.16's output for
tests/switch_p4/loops_unions.p4 (tests/switch_p4/p4c/: P4Info and the primitives of a loop),
and packets worked out by hand from the P4 source (the comments give the arithmetic).

Deliberate miscompiles these tests caught: `continue` jumping to the condition instead of the
update (op 2 never ends: dropped); the copy-propagation knowledge kept across the loop head
(op 7 writes every register cell with the first iteration's constants); `break` jumping to the
update instead of the end (op 2 counts past the break); a return inside a loop of an inlined
action not leaving the loop (op 4 counts every round); a function's loop not stopped by its
`return` (op 3 returns a later i)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

SWITCH_P4 = Path(__file__).resolve().parents[1] / "switch_p4"
PAYLOAD = b"\xee" * 4

LOOPS = """
#include <core.p4>
#include <v1model.p4>
header c_t { bit<8> op; bit<8> n; bit<8> a; bit<8> b; }
struct hs { c_t c; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.c); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }

bit<8> half_over(in bit<8> n) {
    for (bit<8> i = 0; i < 100; i = i + 1) {
        if (i + i > n) {
            return i;
        }
    }
    return 255;
}

control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action find(inout bit<8> x) {
        for (bit<8> i = 0; i < 8; i = i + 1) {
            h.c.n = h.c.n + 1;
            if (x[0:0] == 1) {
                return;
            }
            x = x >> 1;
        }
    }
    action norm() { find(h.c.a); h.c.b = h.c.b + 1; }
    register<bit<8>>(4) r;
    apply {
        sm.egress_spec = 1;
        if (h.c.op == 1) {
            bit<3> i;
            for (i = 0; i < 7; i = i + 3) {
                h.c.b = h.c.b + (bit<8>)i;
            }
            h.c.a = (bit<8>)i;
        } else if (h.c.op == 2) {
            for (bit<8> i = 0; i < h.c.n; i = i + 1) {
                for (bit<8> j = 0; j < h.c.n; j = j + 1) {
                    if (j == i) {
                        continue;
                    }
                    if (j > 5) {
                        break;
                    }
                    h.c.b = h.c.b + 1;
                }
            }
        } else if (h.c.op == 3) {
            h.c.a = half_over(h.c.n);
        } else if (h.c.op == 4) {
            norm();
        } else if (h.c.op == 5) {
            for (bit<8> i = 0; i <= h.c.n; i = i + 1) {
                h.c.a = i;
            }
        } else if (h.c.op == 7) {
            bit<8> x = h.c.a;
            for (bit<8> i = 0; i < 4; i = i + 1) {
                r.write((bit<32>)i, x);
                x = x + 1;
            }
            r.read(h.c.b, (bit<32>)h.c.n);
        } else if (h.c.op == 6) {
            for (bit<8> i = 0; ; i = i + 1) {
                if (i == h.c.n) {
                    h.c.a = i;
                    exit;
                }
            }
        }
        sm.egress_spec = 2;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.c); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _device(doc: dict[str, object]) -> Device:
    d = Device()
    d.install(Device.build_pipeline(json.dumps(doc).encode()))
    return d


@pytest.fixture(scope="module")
def loops() -> Device:
    return _device(compiler.compile_source(LOOPS, "loops.p4").bmv2_json)


def run(d: Device, op: int, n: int = 0, a: int = 0, b: int = 0) -> list[tuple[int, bytes]]:
    return [(port, out[:4]) for port, out in d.process(0, bytes([op, n, a, b]) + PAYLOAD)]


def test_wrapping_loop_in_the_apply_block(loops: Device) -> None:
    # bit<3> i = 0, 3, 6, 9 & 7 = 1, 4, 7: stops at 7; b = 0 + 3 + 6 + 1 + 4 = 14.
    assert run(loops, 1) == [(2, bytes([1, 0, 7, 14]))]


@pytest.mark.parametrize("n, count", [
    (0, 0),
    (3, 6),      # every i < 3: j in 0..2 except j == i -> 2 each
    (8, 42),     # i < 6: j 0..5 except i (5 each, 30); i = 6, 7: j 0..5 (6 each, 12)
])
def test_nested_loops_with_continue_and_break(loops: Device, n: int, count: int) -> None:
    assert run(loops, 2, n) == [(2, bytes([2, n, 0, count]))]


@pytest.mark.parametrize("n, first", [(10, 6), (0, 1), (250, 255)])
def test_return_from_a_loop_in_a_function(loops: Device, n: int, first: int) -> None:
    # half_over(n): the first i with i + i > n (i < 100), else 255.
    assert run(loops, 3, n) == [(2, bytes([3, n, first, 0]))]


@pytest.mark.parametrize("a, shifted, rounds", [(20, 5, 3), (0, 0, 8), (1, 1, 1), (0x80, 1, 8)])
def test_return_from_a_loop_in_an_inlined_action(loops: Device, a: int, shifted: int,
                                                 rounds: int) -> None:
    # find(x): count the round in n, shift x right until its low bit is set (at most 8
    # rounds), then return; the caller goes on after the call (b + 1) and the copy-out writes
    # x back.  20 = 0b10100: rounds 1, 2 shift, round 3 returns.
    assert run(loops, 4, 0, a, 7) == [(2, bytes([4, rounds, shifted, 8]))]


def test_endless_loop_is_dropped_and_the_switch_goes_on(loops: Device) -> None:
    # i <= n holds for every bit<8> i when n = 255.
    before = loops.stats.loop_limit
    assert run(loops, 5, 3) == [(2, bytes([5, 3, 3, 0]))]
    assert run(loops, 5, 255) == []
    assert loops.stats.loop_limit == before + 1
    assert run(loops, 5, 1) == [(2, bytes([5, 1, 1, 0]))]


@pytest.mark.parametrize("n", [0, 9])
def test_exit_inside_a_loop_without_condition(loops: Device, n: int) -> None:
    # exit skips `egress_spec = 2`: the packet leaves on port 1 with a = n.
    assert run(loops, 6, n) == [(1, bytes([6, n, n, 0]))]


@pytest.mark.parametrize("a, n", [(5, 2), (5, 0), (200, 3)])
def test_extern_arguments_inside_a_loop_are_read_each_iteration(loops: Device, a: int,
                                                                  n: int) -> None:
    # r[i] = a + i for i in 0..3; b = r[n].
    assert run(loops, 7, n, a) == [(2, bytes([7, n, a, (a + n) & 0xFF]))]


# ---------------------------------------------------------------- real p4c's output
def test_loops_unions_p4info_and_loop_primitives_are_p4c_s() -> None:
    res = compiler.compile_file(SWITCH_P4 / "loops_unions.p4")
    p4c = SWITCH_P4 / "p4c"
    assert res.p4info_text() == (p4c / "loops_unions.p4info.txtpb").read_text()
    theirs = {a["name"]: a for a in json.loads((p4c / "loops_unions.json").read_text())["actions"]}
    ours = {a["name"]: a for a in res.bmv2_json["actions"]}
    # init; L2: _jump_if_zero(i <= n, end); body; update; _jump L2; end.
    assert ours["I.sum_to_n"]["primitives"] == [
        {k: v for k, v in p.items() if k != "source_info"}
        for p in theirs["I.sum_to_n"]["primitives"]]


@pytest.mark.parametrize("kind, n, lo, res", [
    (0x01, 10, 0, 55),          # sum_to_n: 1 + ... + 10
    (0x01, 0, 0, 0),            # i = 1 <= 0 fails at once
    (0x01, 23, 0, 20),          # 276 mod 256
    (0x02, 20, 1, 16),          # odd 1..7 (8 * 8 = 64 > 60 breaks): 1 + 3 + 5 + 7
    (0x02, 6, 4, 5),            # 4 even (continue), 5 odd, 6 < 6 ends
    (0x02, 3, 9, 0),            # lo >= n: no iteration
    (0x02, 30, 17, 17),         # 17 * 17 = 289 -> 33 in bit<8>: kept; 18 * 18 -> 68 breaks
])
def test_loops_unions_loops_on_the_switch(kind: int, n: int, lo: int, res: int) -> None:
    d = _device(compiler.compile_file(SWITCH_P4 / "loops_unions.p4").bmv2_json)
    ctl = bytes([kind, n, lo, 0, 0, 0, 0xC0, 0xA8, 0, 1])   # 192.168.0.1: default port 1
    assert d.process(0, ctl + PAYLOAD) == [(1, bytes([kind, n, lo, res]) + ctl[4:] + PAYLOAD)]


# ---------------------------------------------------------------- refused by name
BASE = """
#include <core.p4>
#include <v1model.p4>
header c_t { bit<8> n; }
struct hs { c_t c; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { PARSER transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    table t { actions = { NoAction; } }
    apply { APPLY }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.c); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("parser, apply, message", [
    ("p.extract(h.c);", "for (bit<8> x in 1 .. 3) { h.c.n = h.c.n + x; }",
     "unsupported construct: a for-in loop (p4c's BMv2 back end rejects it too"),
    ("for (bit<8> i = 0; i < 2; i = i + 1) { p.extract(h.c); }", "",
     "unsupported construct: a for loop in a parser state"),
    ("p.extract(h.c);", "for (bit<8> i = 0; i < h.c.n; i = i + 1) { t.apply(); }",
     "unsupported construct: a for loop in an apply block that applies a table"),
    ("p.extract(h.c);", "for (bit<8> i = 0; i < h.c.n; i = i + 1) { return; }",
     "unsupported construct: a for loop in an apply block that applies a table or a "
     "control, or returns"),
    ("p.extract(h.c);", "break;", "break statement outside of a loop"),
    ("p.extract(h.c);", "if (h.c.n == 1) { continue; }", "continue statement outside of a loop"),
])
def test_refused_loops_name_the_construct(parser: str, apply: str, message: str) -> None:
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(BASE.replace("PARSER", parser).replace("APPLY", apply), "l.p4")
    assert info.value.diagnostics[0].message.startswith(message), str(info.value)
