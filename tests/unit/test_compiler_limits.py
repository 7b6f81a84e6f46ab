"""Hostile P4 sources end in one error, bounded in memory and time (issue 25 point 5): a source
over the size limit is refused before it is read, `#include "/dev/zero"` and macros that
expand exponentially stop the preprocessor at its memory or output bound."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.p4c import driver, preprocess


def _error(path: Path) -> str:
    with pytest.raises(compiler.CompileError) as exc:
        compiler.compile_file(path)
    (d,) = exc.value.diagnostics
    return d.render()


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same code paths with smaller bounds, so the test takes a second, not ten.
    monkeypatch.setattr(preprocess, "CPP_MEMORY", 64 << 20)
    monkeypatch.setattr(preprocess, "MAX_PREPROCESSED", 1 << 20)
    monkeypatch.setattr(driver, "MAX_SOURCE_BYTES", 1 << 20)


def test_oversized_source_is_refused_before_reading(tmp_path: Path, small_bounds: None) -> None:
    big = tmp_path / "big.p4"
    big.write_text("// " + "x" * (2 << 20) + "\n")
    assert "accepts sources of at most 1 MiB" in _error(big)
    with pytest.raises(compiler.CompileError):
        compiler.compile_source(big.read_text(), "big.p4")


@pytest.mark.skipif(preprocess._PRLIMIT is None, reason="util-linux prlimit is missing")
def test_include_of_an_endless_file_stops_at_the_memory_bound(tmp_path: Path,
                                                              small_bounds: None) -> None:
    src = tmp_path / "zero.p4"
    src.write_text('#include "/dev/zero"\n')
    t0 = time.monotonic()
    message = _error(src)
    assert "ran out of its 64 MiB" in message and "\n" not in message
    assert time.monotonic() - t0 < 25       # bounded by memory, far below CPP_SECONDS x 2


def test_exponential_macros_stop_at_a_bound(tmp_path: Path, small_bounds: None) -> None:
    lines = ["#define A0 x"] + [f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, 40)]
    src = tmp_path / "expo.p4"
    src.write_text("\n".join(lines + ["A39"]) + "\n")
    message = _error(src)
    assert ("ran out of its 64 MiB" in message or "larger than 1 MiB" in message), message


def test_output_cap_on_a_large_but_finite_expansion(tmp_path: Path, small_bounds: None) -> None:
    # 2^17 tokens of 8 bytes: 1 MiB+ of output, little memory in cpp.
    lines = ["#define A0 abcdefg"] + [f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, 18)]
    src = tmp_path / "wide.p4"
    src.write_text("\n".join(lines + ["A17"]) + "\n")
    assert "larger than 1 MiB" in _error(src)
