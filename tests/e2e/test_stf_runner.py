"""The STF runner end to end: programs of this repository (tests/stf/, expectations worked out
by hand) compiled by netsum-p4c and played on a netsum-switch daemon over P4Runtime and UDP
ports; then deliberate breakage of each kind, which the runner must report as such."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum.tools.stf.run import Outcome, Verdict, run_commands
from netsum.tools.stf.sweep import Program, compile_netsum
from netsum.tools.stf.syntax import parse_stf

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent.parent / "stf"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    out = tmp_path_factory.mktemp("stf-build")
    made = {}
    for name in ("stf_tables", "stf_replicate", "stf_state"):
        res = compile_netsum(Program(name, HERE / f"{name}.p4", HERE / f"{name}.stf"), out)
        assert not isinstance(res, Outcome), res.reason
        made[name] = res
    return made


def play(built: dict[str, tuple[Path, Path]], name: str, text: str | None = None) -> Outcome:
    text = text if text is not None else (HERE / f"{name}.stf").read_text()
    json_path, info = built[name]
    return run_commands(parse_stf(text), json_path, info)


@pytest.mark.parametrize("name", ["stf_tables", "stf_replicate", "stf_state"])
def test_own_programs_pass(built: dict[str, tuple[Path, Path]], name: str) -> None:
    out = play(built, name)
    assert out.verdict is Verdict.PASS, out.details
    assert out.frames_in > 0 and out.frames_out > 0


def _edit(name: str, old: str, new: str) -> str:
    text = (HERE / f"{name}.stf").read_text()
    assert old in text
    return text.replace(old, new, 1)


def test_a_wrong_nibble_is_a_wrong_packet(built: dict[str, tuple[Path, Path]]) -> None:
    # the ternary result of the first probe: 02 (priority 20) -> 01 (what priority 10 gives)
    text = _edit("stf_tables", "0a0b0c01 07 11 10 02 cafe $", "0a0b0c01 07 11 10 01 cafe $")
    out = play(built, "stf_tables", text)
    assert out.verdict is Verdict.WRONG
    # byte 21 = 14 (Ethernet) + 4 (addr) + 1 (tag) + 2 (exact_out, lpm_out)
    assert out.reason.startswith("port 2 (stf line 16): frame 0: byte 21 differs: expected 01, "
                                 "got 02")


def test_missing_extra_and_length(built: dict[str, tuple[Path, Path]]) -> None:
    extra = _edit("stf_replicate", "expect 4 0000000000bb", "# expect 4 0000000000bb")
    out = play(built, "stf_replicate", extra)
    assert out.verdict is Verdict.WRONG and "port 4: 1 unexpected frame(s)" in out.reason
    missing = _edit("stf_tables", "packet 3 000000000009", "expect 3\npacket 3 000000000009")
    out = play(built, "stf_tables", missing)
    assert out.verdict is Verdict.WRONG and "port 3" in out.reason and "never sent" in out.reason
    longer = _edit("stf_tables", "0800 45000014 $", "0800 4500 $")
    out = play(built, "stf_tables", longer)
    assert out.verdict is Verdict.WRONG and "frame too long" in out.reason


@pytest.mark.parametrize("old,new", [
    ("register_reset cells", "# register_reset cells"),      # the second frame reads abcd
    ("counter_write per_cell 1 5 0", "counter_write per_cell 1 4 0"),
    ("remove all", "# remove all"),                          # the last lookup hits: 11
])
def test_state_commands_take_effect(built: dict[str, tuple[Path, Path]], old: str,
                                    new: str) -> None:
    out = play(built, "stf_state", _edit("stf_state", old, new))
    assert out.verdict is Verdict.WRONG, out


def test_counter_check_can_fail(built: dict[str, tuple[Path, Path]]) -> None:
    text = _edit("stf_tables", "check_counter port_in(3) packets == 1",
                 "check_counter port_in(3) packets == 2")
    out = play(built, "stf_tables", text)
    assert out.verdict is Verdict.WRONG
    assert "check_counter port_in(3): packets = 1, expected == 2" in out.reason


def test_refused_write_unknown_name_and_bad_program(built: dict[str, tuple[Path, Path]],
                                                     tmp_path: Path) -> None:
    dup = _edit("stf_tables", "add by_tag hdr.probe.tag:0x07 set_exact(v:0x11)",
                "add by_tag hdr.probe.tag:0x07 set_exact(v:0x11)\n"
                "add by_tag tag:7 set_exact(v:0x12)")
    out = play(built, "stf_tables", dup)
    assert out.verdict is Verdict.REFUSED and out.reason.startswith("line 6: add refused: "
                                                                    "ALREADY_EXISTS")
    out = play(built, "stf_tables", "add by_tags tag:7 set_exact(v:1)\npacket 1 00")
    assert out.verdict is Verdict.UNSUPPORTED
    assert out.reason == "line 1: no table named 'by_tags'. Did you mean 'TIngress.by_tag'?"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"header_types": 7}')
    out = run_commands(parse_stf("packet 1 00"), bad_json, built["stf_tables"][1])
    assert out.verdict is Verdict.REFUSED and out.reason.startswith("at load: ")
    broken = tmp_path / "broken.p4"
    broken.write_text((HERE / "stf_tables.p4").read_text().replace("bit<9> port", "bit<9 port"))
    res = compile_netsum(Program("broken", broken, HERE / "stf_tables.stf"), tmp_path / "o")
    assert isinstance(res, Outcome) and res.verdict is Verdict.NOT_COMPILED
    assert "error" in res.reason
