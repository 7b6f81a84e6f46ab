"""The typed program model: BMv2 JSON objects loaded once, checked, into dataclasses that every
consumer (the Python packet code, the native backend, the replica patcher, the use analysis)
reads instead of the JSON's dicts.

It grows one kind of object at a time, and a kind moves only with all its consumers.  Typed so
far: the header layout (netsum.switch.layout), register/counter/meter arrays
(netsum.switch.stateful), calculations (netsum.switch.calculations), parser value sets
(netsum.switch.valuesets) and, here, checksums.  Expressions inside objects (a checksum's
condition) stay JSON: each backend compiles them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netsum.switch.layout import FieldSlot, Layout, cfg_error, loading

__all__ = ["Checksum", "load_checksums"]


@dataclass(frozen=True, slots=True)
class Checksum:
    """One entry of `checksums`: verified after the parser, updated before the deparser."""
    name: str
    path: str               # "checksums[i] ('name')": where errors about it point
    calculation: str        # the name of a loaded calculation
    target_ref: Any         # the target as the JSON names it ([header, field] or an alias)
    target: FieldSlot       # ... and its slot
    if_cond: Any            # the condition's expression JSON; None: always
    verify: bool
    update: bool


def load_checksums(j: dict[str, Any], layout: Layout,
                   calculations: Mapping[str, Any]) -> tuple[Checksum, ...]:
    """The program's checksums; a ConfigError naming the entry for a malformed one, an unknown
    calculation or an unknown target field."""
    raw = j.get("checksums") or []
    if not isinstance(raw, list):
        raise cfg_error("checksums", "expected a list")
    out = []
    for i, c in enumerate(raw):
        with loading(f"checksums[{i}]"):
            path = f"checksums[{i}]"
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise cfg_error(path, "expected an object with a string 'name'")
            path = f"{path} ('{c['name']}')"
            cname = c.get("calculation")
            if not isinstance(cname, str) or cname not in calculations:
                raise cfg_error(path, f"unknown calculation {cname!r}")
            target = layout.slot(c.get("target"), f"{path}.target")
            out.append(Checksum(c["name"], path, cname, c.get("target"), target,
                                c.get("if_cond"), bool(c.get("verify", True)),
                                bool(c.get("update", True))))
    return tuple(out)
