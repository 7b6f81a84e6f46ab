"""Loop rolling of the generated C: runs of lines that repeat with numbers in arithmetic
progression become one `for` loop.

An aggregation program spells its K value lanes out one by one, so the generated C holds K
copies of each lane's statements (`F[1023] = ((F[1023] + F[52]) & ...); REG_SET(&c->reg[903],
...)`, then the same with 1024 and 904, ...).  At K=1024 that is 13,000 lines, 36-45 s of
`cc -O2` and a 600 KB module.  This pass, on the generated text only and knowing nothing of
aggregation, finds n >= MIN_RUN consecutive blocks of m lines that are equal up to their
decimal numbers, where each number steps by a constant from block to block, and writes them as

    for (long long _rl = 0; _rl < n; _rl++) {
    <the first block, each number that steps written (first + step * _rl)>
    }

The loop runs the same statements in the same order on the same values: nothing else
changes.  Only self-contained lines are rolled: a one-line `{ ... }` block or one assignment
`F[i] = ...;`, without labels, jumps, `break`/`continue`/`return`, string or char literals, or
declarations at the line's own level (a loop body is a scope).
"""
from __future__ import annotations

import re

__all__ = ["roll", "MIN_RUN", "MAX_BLOCK"]

#: Fewer repetitions than this stay as they are.
MIN_RUN = 8
#: The longest block (in lines) looked for.
MAX_BLOCK = 8

# A decimal number on its own: not part of a name (ld32, val1023), of a hex or suffixed
# literal (0x1F, 4ULL) or of a float.
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")
_ASSIGN = re.compile(r"F\[\d+\] = [^;{}]*;")
_BARRED = re.compile(r"\b(goto|return|break|continue|case|default)\b|[\"']|^\w+:")


def _rollable(stripped: str) -> bool:
    if _BARRED.search(stripped):
        return False
    if stripped.startswith("{ ") and stripped.endswith(" }"):
        depth = 0
        for ch in stripped:       # one balanced block: the line opens and closes it
            depth += (ch == "{") - (ch == "}")
            if depth < 0:
                return False
        return depth == 0
    return _ASSIGN.fullmatch(stripped) is not None


def _split(line: str) -> tuple[str, list[int]] | None:
    """(the line with its numbers blanked, the numbers), or None if it may not be rolled."""
    if not _rollable(line.strip()):
        return None
    return _INT.sub("#", line), [int(x) for x in _INT.findall(line)]


def _run(parts: list[tuple[str, list[int]] | None], i: int, m: int) -> int:
    """How many blocks of m lines from line i repeat with stepping numbers (>= 1)."""
    first = parts[i:i + m]
    if len(first) < m or any(p is None for p in first):
        return 0
    if i + 2 * m > len(parts):
        return 1
    steps = []
    for a, b in zip(first, parts[i + m:i + 2 * m]):
        if b is None or a[0] != b[0]:           # type: ignore[index]
            return 1
        steps.append([y - x for x, y in zip(a[1], b[1])])  # type: ignore[index]
    n = 2
    while i + (n + 1) * m <= len(parts):
        for j in range(m):
            a, c = first[j], parts[i + n * m + j]
            if c is None or c[0] != a[0]:       # type: ignore[index]
                return n
            if any(v != x + s * n for v, x, s in zip(c[1], a[1], steps[j])):  # type: ignore[index]
                return n
        n += 1
    return n


def _body(line: str, part: tuple[str, list[int]], nxt: tuple[str, list[int]]) -> str:
    values = iter(zip(part[1], nxt[1]))

    def sub(_m: re.Match[str]) -> str:
        x, y = next(values)
        return str(x) if x == y else f"({x} + {y - x} * _rl)"
    return _INT.sub(sub, line)


def roll(text: str, min_run: int = MIN_RUN) -> str:
    """`text` with every run of at least `min_run` repeating blocks rolled into a loop."""
    lines = text.split("\n")
    parts = [_split(line) for line in lines]
    out: list[str] = []
    i = 0
    while i < len(lines):
        best_m, best_n = 0, 0
        if parts[i] is not None:
            for m in range(1, MAX_BLOCK + 1):
                n = _run(parts, i, m)
                if n >= min_run and n * m > best_n * best_m:
                    best_m, best_n = m, n
        if not best_m:
            out.append(lines[i])
            i += 1
            continue
        m, n = best_m, best_n
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        out.append(f"{indent}for (long long _rl = 0; _rl < {n}; _rl++) {{")
        for j in range(m):
            out.append(_body(lines[i + j], parts[i + j], parts[i + m + j]))  # type: ignore[arg-type]
        out.append(f"{indent}}}")
        i += n * m
    return "\n".join(out)
