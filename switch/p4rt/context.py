"""What a Write/Read handler works on: the committed pipeline, its P4Info index, the device.

One `Context` exists per committed config; replacing the config replaces the context, so no
handler can mix ids of one P4Info with objects of another pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switch.p4rt.schema import Schema

__all__ = ["Context", "EntryKey"]

#: (table name, key, priority): identifies a table entry across the P4Runtime layer.
EntryKey = tuple[str, tuple[Any, ...], int]


@dataclass(frozen=True, slots=True)
class Context:
    schema: Schema
    pipeline: Any        # switch.device pipeline (pl.tables, pl.counters, ..., pl.pre)
    device: Any          # switch.device.Device (device.lock)
    #: TableEntry.metadata (the controller's opaque cookie, P4Runtime §9.1) per entry.  The data
    #: plane has no slot for it; PI stores it beside the entry and returns it on reads.
    entry_metadata: dict[EntryKey, bytes] = field(default_factory=dict)
