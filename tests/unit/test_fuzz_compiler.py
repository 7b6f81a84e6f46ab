"""Mutation fuzz of netsum-p4c: thousands of broken variants of real programs (the repository's
test programs, the p4c construct fixtures and p4/netsum.p4) must each compile or fail with
p4c-style diagnostics that carry a source position, never with any other exception (which the
command line would report as an internal compiler error).

A mutation is one or two of: truncation, a deleted span, an inserted token or snippet (unbalanced
braces, comment and string openers, huge widths, NUL and non-ASCII bytes, preprocessor lines), a
word replaced by another word of the program or a type, a number replaced by an edge value, a
deleted or duplicated line, and two tokens swapped.  Seeded (tests/fuzzing.py): the seed is
printed and a failure names the case.

Size: 1000 variants by default (NETSUM_FUZZ_SCALE multiplies it); docs/reliability.md gives the
figures of a larger run.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.p4c.diagnostics import Severity
from fuzzing import fuzz_count, fuzz_rng

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "tests" / "p4programs").glob("*.p4")) + \
    sorted((ROOT / "tests" / "fixtures" / "p4c" / "constructs").glob("*.p4"))
#: netsum.p4 compiles ~10x slower than the small programs: a few percent of the cases.
NETSUM_P4 = ROOT / "p4" / "netsum.p4"
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|0x[0-9a-fA-F]+|\d+|[{}();,<>=.&|+\-*/\[\]:!~^?@]")
NUMBER = re.compile(r"\b\d+\b|\b0x[0-9a-fA-F]+\b")
SNIPPETS = ["{", "}", ";", "(", ")", "<", ">", "8w", "..", "&&&", "@", "bit<0>", "bit<99999>",
            "int<1>", "varbit<8>", "0xFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "-1", "1w2", "transition",
            "apply", "return", "exit", "\n#include <nonexistent.p4>\n", "\n#define A A\n",
            "\n#if 1\n", "\n#endif\n", "\x00", "\u00e9", "/*", "\"", "'", "table", "action",
            "extern", "header_union", "...", "@name(\"\")", "@id(0)", "=", "++", "[", "]", "<<",
            "?", ":", "\\", "#", "this", "default", "_", "switch", "8s255", "(bit<8>)"]
EDGE_NUMBERS = ["0", "1", "4294967296", "99999999999999999999999999", "0x0", "512", "8w256",
                "65535", "1w1"]
#: Whole-program errors that have no single source position but say what is missing.
UNPOSITIONED = re.compile(r"no 'main' package instantiation|nested too deeply|^@id\(")
#: The C preprocessor's own messages carry `file:line:col` inside the message text.
CPP_POSITION = re.compile(r"\S+:\d+:(\d+:)? ")


def mutate(rng: random.Random, text: str) -> tuple[str, str]:
    """One mutation of `text`: (mutant, what was done)."""
    toks = list(TOKEN.finditer(text))
    nums = list(NUMBER.finditer(text))
    op = rng.randrange(9)
    if len(toks) < 2 or (op == 4 and not nums):
        s = rng.choice(SNIPPETS)             # a tiny mutant: nothing left to swap
        return text + s, f"appended {s!r}"
    if op == 0:
        cut = rng.randrange(len(text))
        return text[:cut], f"truncated at {cut}"
    if op == 1:
        cut, n = rng.randrange(len(text)), rng.randrange(1, 80)
        return text[:cut] + text[cut + n:], f"deleted {n} chars at {cut}"
    if op == 2:
        cut, s = rng.randrange(len(text)), rng.choice(SNIPPETS)
        return text[:cut] + s + text[cut:], f"inserted {s!r} at {cut}"
    if op == 3:
        m = rng.choice(toks)
        new = rng.choice([rng.choice(toks).group(), "bit<8>", "bool", "true", "", "int", "error",
                          "packet_in", "standard_metadata_t", "H"])
        return text[:m.start()] + new + text[m.end():], f"word {m.group()!r} at {m.start()} -> {new!r}"
    if op == 4:
        m = rng.choice(nums)
        new = rng.choice(EDGE_NUMBERS)
        return text[:m.start()] + new + text[m.end():], f"number at {m.start()} -> {new}"
    lines = text.splitlines(keepends=True)
    if op == 5:
        i = rng.randrange(len(lines))
        return "".join(lines[:i] + lines[i + 1:]), f"deleted line {i + 1}"
    if op == 6:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        return "".join(lines[:j] + [lines[i]] + lines[j:]), f"line {i + 1} copied before {j + 1}"
    if op == 7:
        cut = rng.randrange(len(text))
        noise = "".join(chr(rng.choice([0, 1, 9, 127, 0xe9, 0x2028, rng.randrange(32, 127)]))
                        for _ in range(rng.randrange(1, 6)))
        return text[:cut] + noise + text[cut:], f"noise {noise!r} at {cut}"
    a, b = sorted(rng.sample(range(len(toks)), 2))
    ma, mb = toks[a], toks[b]
    return (text[:ma.start()] + mb.group() + text[ma.end():mb.start()] + ma.group()
            + text[mb.end():]), f"swapped {ma.group()!r}@{ma.start()} and {mb.group()!r}@{mb.start()}"


def unpositioned(err: compiler.CompileError) -> list[str]:
    """The error diagnostics of `err` that say neither where nor what (should be none)."""
    return [d.message for d in err.diagnostics
            if d.severity is Severity.ERROR and d.pos.line <= 0
            and not UNPOSITIONED.search(d.message) and not CPP_POSITION.search(d.message)]


@pytest.mark.slow
def test_mutated_programs_get_positioned_errors_never_a_crash() -> None:
    rng, seed = fuzz_rng("compiler fuzz", 1701)
    n = fuzz_count(1000)
    texts = {p: p.read_text() for p in SOURCES + [NETSUM_P4]}
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    for case in range(n):
        path = NETSUM_P4 if rng.random() < 0.03 else rng.choice(SOURCES)
        text, what = mutate(rng, texts[path])
        if rng.random() < 0.3:
            text, more = mutate(rng, text)
            what += "; " + more
        where = f"case {case} ({path.name}: {what})"
        try:
            compiler.compile_source(text, path.name, include_dirs=[path.parent])
            outcomes["compiled"] += 1
        except compiler.CompileError as err:
            outcomes["error"] += 1
            if not err.diagnostics:
                failures.append(f"{where}: CompileError without diagnostics")
            elif bad := unpositioned(err):
                failures.append(f"{where}: error without a position: {bad[0]}")
        except Exception as exc:  # noqa: BLE001 - the point of the test: nothing else escapes
            outcomes["crash"] += 1
            failures.append(f"{where}: {type(exc).__name__}: {exc}")
    print(f"compiler fuzz: {n} variants, {dict(outcomes)}")
    assert not failures, f"seed {seed}: {len(failures)} failures, first: " + "\n".join(failures[:5])
    # Both outcomes must occur, or the mutations are too weak (or too strong) to prove much.
    assert outcomes["compiled"] > n // 20 and outcomes["error"] > n // 2, outcomes


SIZES = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> x; }
struct headers { h_t h; }
struct meta_t { bit<8> y; }
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<32>>(REGISTER_SIZE) reg;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t {
        key = { hdr.h.x: exact; }
        actions = { fwd; NoAction; }
        default_action = NoAction();
        size = TABLE_SIZE;
    }
    apply { reg.write(0, 1); t.apply(); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.mark.parametrize("register_size, table_size, message", [
    # Found by this fuzz (seed 1701): sizes that do not fit P4Info's fields crashed p4info.py.
    ("4294967295", "16", "register size 4294967295 does not fit P4Info's int32 size"),
    ("4294967296", "16", "value 4294967296 does not fit in bit<32> (register size)"),
    ("16", "99999999999999999999", "table size 99999999999999999999 does not fit P4Info's "
                                   "int64 size"),
])
def test_sizes_past_p4info_fields_are_positioned_errors(register_size: str, table_size: str,
                                                        message: str) -> None:
    compiler.compile_source(SIZES.replace("REGISTER_SIZE", "16").replace("TABLE_SIZE", "16"),
                            "sizes.p4")
    mutant = SIZES.replace("REGISTER_SIZE", register_size).replace("TABLE_SIZE", table_size)
    with pytest.raises(compiler.CompileError) as err:
        compiler.compile_source(mutant, "sizes.p4")
    diag = err.value.diagnostics[0]
    assert diag.pos.line > 0 and message in diag.message, diag.render()
