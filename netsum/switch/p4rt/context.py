"""What a Write/Read handler works on: the committed pipeline, its P4Info index, the device.

One `Context` exists per committed config; replacing the config replaces the context, so no
handler can mix ids of one P4Info with objects of another pipeline.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4runtime_pb2

from netsum.switch.p4rt.binding import TableBinding
from netsum.switch.p4rt.schema import Schema

__all__ = ["Context", "EntryKey", "ReadStep"]

#: (table name, key, priority): identifies a table entry across the P4Runtime layer.
EntryKey = tuple[str, tuple[Any, ...], int]
#: One step of a read: created under device.lock (data already copied), run outside it to
#: build the entities -- as messages, or as ReadResponse records already encoded
#: (netsum.switch.p4rt.wire), the fast form of big array reads.
ReadStep = Callable[[], "list[p4runtime_pb2.Entity] | bytes"]


@dataclass(frozen=True, slots=True)
class Context:
    schema: Schema
    pipeline: Any        # netsum.switch.device pipeline (pl.tables, pl.counters, ..., pl.pre)
    device: Any          # netsum.switch.device.Device (device.lock)
    #: P4Info table id -> the data-plane table it binds to (netsum.switch.p4rt.binding).
    bindings: dict[int, TableBinding]
    #: TableEntry.metadata (the controller's opaque cookie, P4Runtime §9.1) per entry.  The data
    #: plane has no slot for it; PI stores it beside the entry and returns it on reads.
    entry_metadata: dict[EntryKey, bytes] = field(default_factory=dict)
    #: P4Runtime state of each action profile by P4Info id (netsum.switch.p4rt.profiles):
    #: member and group ids and the data-plane handles they map to.
    profiles: dict[int, Any] = field(default_factory=dict)
