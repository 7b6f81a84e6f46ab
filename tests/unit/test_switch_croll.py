"""Loop rolling of the native backend's generated C (netsum/switch/native/croll.py): the
expected loops are written out by hand from the input lines; what the rolled code computes is
held to the Python path by test_switch_native.py (netsum.p4 at every K, random lane
programs), which runs on rolled code."""
from __future__ import annotations

from netsum.switch.native.croll import MIN_RUN, roll


def _lanes(n: int, first: int = 120, reg: int = 0) -> list[str]:
    out = []
    for j in range(n):
        out.append(f"    F[{first + j}] = ((F[{first + j}] + F[52]) & 4294967295ULL);")
        out.append(f"    {{ u64 _i = F[38]; if (_i < 8192ULL) REG_SET(&c->reg[{reg + j}], _i, 4, "
                   f"F[{first + j}]); else c->stats[S_REGISTER_OOB]++; }}")
    return out


def test_a_run_of_two_line_blocks_becomes_one_loop() -> None:
    text = "\n".join(["static void A1(Ctx *c, Pkt *p) {", *_lanes(10), "}"])
    assert roll(text) == "\n".join([
        "static void A1(Ctx *c, Pkt *p) {",
        "    for (long long _rl = 0; _rl < 10; _rl++) {",
        "    F[(120 + 1 * _rl)] = ((F[(120 + 1 * _rl)] + F[52]) & 4294967295ULL);",
        "    { u64 _i = F[38]; if (_i < 8192ULL) REG_SET(&c->reg[(0 + 1 * _rl)], _i, 4, "
        "F[(120 + 1 * _rl)]); else c->stats[S_REGISTER_OOB]++; }",
        "    }",
        "}"])


def test_steps_other_than_one_and_constants_are_kept() -> None:
    lines = [f"    F[{200 + j}] = ld32(buf + off + {4 * j + 8});" for j in range(MIN_RUN)]
    assert roll("\n".join(lines)).split("\n") == [
        f"    for (long long _rl = 0; _rl < {MIN_RUN}; _rl++) {{",
        "    F[(200 + 1 * _rl)] = ld32(buf + off + (8 + 4 * _rl));",
        "    }"]


def test_short_runs_and_unsafe_lines_stay_as_they_are() -> None:
    short = "\n".join(f"    F[{j}] = F[{j + 50}];" for j in range(MIN_RUN - 1))
    assert roll(short) == short
    jumps = "\n".join(f"    {{ if (F[{j}]) goto L{j}; }}" for j in range(20))
    assert roll(jumps) == jumps                 # a jump leaves the loop: never rolled
    breaks = "\n".join(f"    {{ if (F[{j}]) break; }}" for j in range(20))
    assert roll(breaks) == breaks               # break would end the rolled loop instead
    decl = "\n".join(f"    u64 x{j} = F[{j}];" for j in range(20))
    assert roll(decl) == decl                   # declarations at the line's level
    labels = "\n".join(f"L{j}: F[{j}] = 0;" for j in range(20))
    assert roll(labels) == labels


def test_a_run_ends_where_the_progression_breaks() -> None:
    lines = [f"    F[{10 + j}] = F[{10 + j}] + 1;" for j in range(12)]
    lines[9] = "    F[99] = F[19] + 1;"           # block 9 breaks the step of the first number
    out = roll("\n".join(lines)).split("\n")
    assert out[:3] == ["    for (long long _rl = 0; _rl < 9; _rl++) {",
                       "    F[(10 + 1 * _rl)] = F[(10 + 1 * _rl)] + 1;", "    }"]
    assert out[3:] == lines[9:]                 # the rest: too short to roll, as it was


def test_numbers_inside_names_and_suffixed_literals_are_not_numbers() -> None:
    lines = [f"    F[{j}] = ld32(buf + 0x10 + 4ULL) + val1023;" for j in range(MIN_RUN)]
    assert roll("\n".join(lines)).split("\n")[1] == \
        "    F[(0 + 1 * _rl)] = ld32(buf + 0x10 + 4ULL) + val1023;"
