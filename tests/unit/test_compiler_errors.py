"""Bad programs (tests/p4programs/errors/*.p4) and the exact diagnostics each must produce
(*.expected; regenerate with UPDATE_GOLDEN=1), plus the CLI's exit codes and robustness:
mangled input gives diagnostics, never a Python traceback."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.p4c.cli import main

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "tests" / "p4programs" / "errors"
CASES = sorted(p.stem for p in ERRORS.glob("*.p4"))


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("name", CASES)
def test_error_case(name: str) -> None:
    src = ERRORS / f"{name}.p4"
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(src.read_text(), filename=src.name)
    got = str(info.value) + "\n"
    expected = src.with_suffix(".expected")
    if os.environ.get("UPDATE_GOLDEN") == "1":
        expected.write_text(got)
    assert got == expected.read_text()
    assert info.value.diagnostics, "an error must carry its diagnostics"


def test_cli_reports_errors_with_exit_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc = main([str(ERRORS / "unknown_field.p4"), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "unknown_field.p4:32:26: error: unknown field of header 'ipv4_t': 'dstt'." in err
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_cli_writes_json_and_p4info(tmp_path: Path) -> None:
    prog = ROOT / "tests" / "p4programs" / "basic_router.p4"
    info = tmp_path / "x" / "basic_router.p4info.txtpb"
    rc = main([str(prog), "-o", str(tmp_path), "--p4runtime-files", str(info),
               "--std", "p4-16", "--arch", "v1model", "--target", "bmv2", "-DUNUSED=1"])
    assert rc == 0
    assert (tmp_path / "basic_router.json").read_text().startswith("{")
    assert info.read_text().startswith("# proto-file: p4/config/v1/p4info.proto\n")


def test_cli_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([str(tmp_path / "nope.p4"), "-o", str(tmp_path)]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_defines_reach_the_preprocessor() -> None:
    src = (ROOT / "tests" / "p4programs" / "basic_router.p4").read_text()
    src = src.replace("size = 1024;", "size = TABLE_SIZE;")
    res = compiler.compile_source(src, "r.p4", defines={"TABLE_SIZE": "77"})
    assert res.p4info.tables[0].size == 77


@pytest.mark.parametrize("seed", range(6))
def test_mangled_programs_never_crash(seed: int) -> None:
    """Truncations and token swaps of a valid program: CompileError or success, nothing else."""
    text = (ROOT / "tests" / "p4programs" / "checksum_hash.p4").read_text()
    rng = random.Random(seed)
    for _ in range(8):
        cut = rng.randrange(len(text))
        variants = [text[:cut], text[:cut] + text[cut + rng.randrange(1, 40):],
                    text[:cut] + rng.choice(["{", "}", ";", "(", "<", "8w", "..", "&&&", "@"])
                    + text[cut:]]
        for v in variants:
            try:
                compiler.compile_source(v, "m.p4")
            except compiler.CompileError:
                pass


_WORD = r"[A-Za-z_][A-Za-z0-9_]*|0x[0-9a-fA-F]+|\d+"


@pytest.mark.parametrize("seed", range(4))
def test_mutated_programs_never_crash(seed: int) -> None:
    """Words swapped for other words of the program, numbers, types or nothing: the semantic
    passes see well-formed but wrong programs.  Only CompileError (or success) may come out."""
    import re

    name = ["calc", "stateful", "mcast", "tutorial_mix"][seed]
    text = (ROOT / "tests" / "p4programs" / f"{name}.p4").read_text()
    rng = random.Random(seed)
    words = [m.group() for m in re.finditer(_WORD, text)]
    for _ in range(15):
        v = text
        for _ in range(rng.randint(1, 3)):
            ms = list(re.finditer(_WORD, v))
            m = rng.choice(ms)
            new = rng.choice([rng.choice(words), "7", "65536", "bit<8>", "bool", "true", ""])
            v = v[:m.start()] + new + v[m.end():]
        try:
            compiler.compile_source(v, "m.p4")
        except compiler.CompileError:
            pass


@pytest.mark.parametrize("depth,ok", [(300, True), (5000, False)])
def test_deep_nesting(depth: int, ok: bool) -> None:
    src = (ROOT / "tests" / "p4programs" / "basic_router.p4").read_text()
    src = src.replace("hdr.ipv4.ttl = hdr.ipv4.ttl - 1;",
                      "hdr.ipv4.ttl = " + "(" * depth + "hdr.ipv4.ttl" + ")" * depth + " - 1;")
    if ok:
        compiler.compile_source(src, "deep.p4")
    else:
        with pytest.raises(compiler.CompileError, match="nested too deeply"):
            compiler.compile_source(src, "deep.p4")


def test_cli_older_p4runtime_file_flag(tmp_path: Path) -> None:
    from google.protobuf import json_format
    from p4.config.v1 import p4info_pb2

    prog = ROOT / "tests" / "p4programs" / "basic_router.p4"
    out = tmp_path / "info.json"
    assert main([str(prog), "-o", str(tmp_path), "--p4runtime-file", str(out),
                 "--p4runtime-format", "json"]) == 0
    info = json_format.Parse(out.read_text(), p4info_pb2.P4Info())
    assert info.tables[0].preamble.id == 37375156
