"""Output for `netsum-ctl`: aligned text tables for people, JSON for scripts."""
from __future__ import annotations

import json
from typing import Any, Sequence, TextIO

__all__ = ["table", "emit", "with_rates"]


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows as an aligned text table under a header line; "(none)" when empty."""
    if not rows:
        return "(none)"
    cols = list(columns) if columns is not None else list(rows[0])
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def emit(out: TextIO, as_json: bool, data: Any, text: str) -> None:
    """Print `data` as JSON when asked, else the human `text`."""
    if as_json:
        out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        out.write(text + ("\n" if text and not text.endswith("\n") else ""))


def with_rates(rows: Sequence[dict[str, Any]], previous: Sequence[dict[str, Any]] | None,
               seconds: float, keys: Sequence[str],
               counters: Sequence[str]) -> list[dict[str, Any]]:
    """`rows` with a `<counter>/s` column per counter: its growth since the row with the same
    `keys` in `previous`, per second (blank on the first sample, for a new row, or after a
    counter went down, as when a switch restarted)."""
    before = {tuple(r.get(k) for k in keys): r for r in previous or ()}
    out = []
    for r in rows:
        prev = before.get(tuple(r.get(k) for k in keys))
        extra: dict[str, Any] = {}
        for c in counters:
            rate: Any = ""
            if prev is not None and seconds > 0:
                delta = r.get(c, 0) - prev.get(c, 0)
                if delta >= 0:
                    rate = round(delta / seconds, 1)
            extra[f"{c}/s"] = rate
        out.append({**r, **extra})
    return out
