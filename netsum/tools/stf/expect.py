"""Comparing the frames a switch sent with an STF file's `expect` lines.

The rules are those of p4c's bmv2 test driver:
- per port, the frames that came out are compared in order with that port's `expect` lines, in
  the order they appear in the file (ports are independent of each other);
- the counts must be equal: every port the test uses (named by a `packet` or an `expect`) must
  send exactly as many frames as it has `expect` lines, so a port with none must stay silent;
  frames on ports the test never names are not looked at (the test has no interface there);
- an expected frame is a hex pattern with `*` for any nibble: a received frame must be at least
  as long and equal on every other nibble; longer is fine (a payload the pattern leaves out)
  unless the line ends in `$`, which asks for the exact length;
- `expect PORT` with no data is one frame of any content.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from netsum.tools.stf.syntax import Expect

__all__ = ["Mismatch", "frame_mismatch", "compare_ports"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Why the output differs from an expectation; `line` is the STF line of the expectation
    concerned (0 when the problem is a frame nothing expected); `port` is None for a check
    that is not about frames (`check_counter`)."""
    port: int | None
    line: int
    message: str

    def __str__(self) -> str:
        at = f"stf line {self.line}" if self.line else ""
        if self.port is None:
            return f"{at}: {self.message}"
        return f"port {self.port}{f' ({at})' if at else ''}: {self.message}"


def frame_mismatch(pattern: str | None, exact_length: bool, frame: bytes) -> str | None:
    """None when `frame` matches; otherwise a one-line reason naming the first differing byte."""
    if pattern is None:
        return None
    got = frame.hex().upper()
    if len(got) < len(pattern):
        return (f"frame too short: {len(frame)} bytes, the expectation covers "
                f"{len(pattern) / 2:g}")
    if exact_length and len(got) > len(pattern):
        return f"frame too long: {len(frame)} bytes, expected exactly {len(pattern) / 2:g}"
    for i, want in enumerate(pattern):
        if want != "*" and want != got[i]:
            byte = i // 2
            lo, hi = byte * 2, byte * 2 + 2
            return (f"byte {byte} differs: expected {pattern[lo:hi]}, got {got[lo:hi]} "
                    f"(expected {_window(pattern, byte)}, got {_window(got, byte)})")
    return None


def _window(hexstr: str, byte: int, span: int = 4) -> str:
    lo = max(0, byte - span) * 2
    return hexstr[lo:(byte + span + 1) * 2]


def compare_ports(expects: Iterable[Expect], received: Mapping[int, Sequence[bytes]],
                  ports: Iterable[int]) -> list[Mismatch]:
    """Every difference between the expectations and the frames received per port.  `ports`
    are the ports the test uses; frames on others are ignored."""
    wanted: dict[int, list[Expect]] = {}
    for e in expects:
        wanted.setdefault(e.port, []).append(e)
    problems: list[Mismatch] = []
    for port in sorted(set(ports) | set(wanted)):
        exp = wanted.get(port, [])
        got = list(received.get(port, ()))
        for idx, (e, frame) in enumerate(zip(exp, got)):
            why = frame_mismatch(e.pattern, e.exact_length, frame)
            if why is not None:
                problems.append(Mismatch(port, e.line, f"frame {idx}: {why}"))
        if len(got) < len(exp):
            missing = exp[len(got):]
            problems.append(Mismatch(port, missing[0].line,
                                     f"{len(missing)} expected frame(s) never sent "
                                     f"({len(got)} of {len(exp)} arrived)"))
        elif len(got) > len(exp):
            extra = got[len(exp):]
            problems.append(Mismatch(port, 0, f"{len(extra)} unexpected frame(s) "
                                              f"({len(exp)} expected), first: "
                                              f"{extra[0][:24].hex()}…"))
    return problems
