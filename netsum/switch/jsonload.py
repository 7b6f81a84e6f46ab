"""Parsing JSON that comes from outside (device configs, control messages) within bounds.

`strict_loads` refuses, with one-line ValueErrors that callers turn into their own error kind:
- documents over `max_bytes` (checked before parsing: json builds the whole tree in memory);
- nesting deeper than the parser's recursion allows (CPython's decoder raises RecursionError
  past ~1000 levels; a 10^5-deep config used to surface as an internal error);
- non-finite numbers: `1e999` parses as float('inf') and NaN/Infinity literals are not JSON,
  yet Python accepts all three; no config value can be infinite;
- integers of more than 4300 digits (Python's own limit on int parsing).
"""
from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["strict_loads", "MAX_CONFIG_BYTES"]

#: The largest device config accepted (netsum.p4 at K=256 is ~3 MB; p4c's biggest sample
#: programs are well under 20 MB).
MAX_CONFIG_BYTES = 256 << 20


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range (not a finite double)")
    return value


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def strict_loads(data: bytes | str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    if len(data) > max_bytes:
        raise ValueError(f"{len(data)} bytes is more than the {max_bytes} accepted")
    try:
        return json.loads(data, parse_float=_finite, parse_constant=_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8: {e.reason} at byte {e.start}") from None
