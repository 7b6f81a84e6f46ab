"""Source positions, diagnostics and the CompileError raised between passes.

Owns the p4c-style rendering ``file:line:col: error: message`` followed by the offending
source line and a caret.  Passes append to one :class:`Diagnostics` collector; the pipeline
stops between passes when it holds errors, so one run reports as many errors as it can.
"""
from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

__all__ = ["Pos", "Severity", "Diagnostic", "Diagnostics", "CompileError", "suggest", "unknown",
           "NOPOS"]


@dataclass(frozen=True, slots=True)
class Pos:
    """A position in an original source file (after #line mapping); line and col are 1-based."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOPOS = Pos("<builtin>", 0, 0)


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    pos: Pos
    message: str
    source_line: str | None = None

    def render(self) -> str:
        if self.pos.line <= 0:
            return f"{self.severity.value}: {self.message}"
        head = f"{self.pos}: {self.severity.value}: {self.message}"
        if self.source_line is None or self.pos.line <= 0:
            return head
        line = self.source_line.rstrip("\n").expandtabs(1)
        caret = " " * max(self.pos.col - 1, 0) + "^"
        return f"{head}\n{line}\n{caret}"


@dataclass
class Diagnostics:
    """Collects diagnostics for one compilation; knows the source text to quote lines."""

    sources: dict[str, list[str]] = field(default_factory=dict)
    items: list[Diagnostic] = field(default_factory=list)

    def _line(self, pos: Pos) -> str | None:
        lines = self.sources.get(pos.file)
        if lines is None:
            try:
                lines = Path(pos.file).read_text(errors="replace").splitlines()
            except OSError:
                lines = []
            self.sources[pos.file] = lines
        if 1 <= pos.line <= len(lines):
            return lines[pos.line - 1]
        return None

    def error(self, pos: Pos, message: str) -> None:
        if any(d.pos == pos and d.message == message for d in self.items):
            return  # one construct reached twice (e.g. inlined action) reports once
        self.items.append(Diagnostic(Severity.ERROR, pos, message, self._line(pos)))

    def warning(self, pos: Pos, message: str) -> None:
        if any(d.pos == pos and d.message == message for d in self.items):
            return
        self.items.append(Diagnostic(Severity.WARNING, pos, message, self._line(pos)))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.WARNING]

    def check(self) -> None:
        """Raise CompileError if any error was collected (called between passes)."""
        if self.errors:
            raise CompileError(self.errors)


class CompileError(Exception):
    """Compilation failed; ``diagnostics`` lists every error found before the failing pass ended."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))


def suggest(name: str, candidates: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the nearest candidate, or '' when nothing is close."""
    best = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" Did you mean '{best[0]}'?" if best else ""


def unknown(what: str, name: str, candidates: Iterable[str]) -> str:
    """"unknown table 'ipv4_lmp'. Did you mean 'ipv4_lpm'?" """
    hint = suggest(name, candidates)
    return f"unknown {what} '{name}'" + (f".{hint}" if hint else "")
