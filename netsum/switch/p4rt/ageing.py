"""Idle timeouts (P4Runtime §9.1.6 idle_timeout_ns, §16.3 IdleTimeoutNotification), as bmv2's
ageing monitor and PI's idle_timeout_buffer serve them.

Tables whose P4Info says `idle_timeout_behavior: NOTIFY_CONTROL` (p4c: `support_timeout =
true`) and whose JSON table has `support_timeout` age: the data plane marks each hit
(`netsum.switch.tables.Table.sweep`), and `IdleTimeouts.tick` -- run every SWEEP_NS by the
server -- collects, under device.lock, the entries with a TTL that have had no hit for at least
that long and were not yet reported in this idle period.  bmv2 reports such an entry once per
idle period (a hit re-arms it); the report is one IdleTimeoutNotification per sweep holding
every entry that aged (table id, match, priority, idle_timeout_ns, metadata), sent to the
primary.  Precision: an entry is reported between TTL and TTL + SWEEP_NS after its last hit.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from p4.v1 import p4runtime_pb2

from netsum.switch.p4rt.context import Context
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.tables import encode_key

__all__ = ["IdleTimeouts", "SWEEP_NS"]

#: How often ageing tables are swept (bmv2's monitor defaults to 1 s; PI sets 500 ms as the
#: smallest TTL it expects to honour, so a finer sweep keeps reports within 20 % of it).
SWEEP_NS = 100_000_000
Send = Callable[[p4runtime_pb2.StreamMessageResponse], None]


class IdleTimeouts:
    def __init__(self, send: Send, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._send = send
        self._clock = clock
        self._ctx: Context | None = None
        self._tables: list[tuple[Any, Any]] = []    # (TableInfo, data-plane table)
        self._next = 0

    def configure(self, ctx: Context) -> None:
        """The tables of a newly committed pipeline that age."""
        tables = []
        for info in ctx.schema.tables.values():
            b = ctx.bindings.get(info.id)
            if b is None or b.key_problem:
                continue
            if info.supports_timeout and getattr(b.table, "support_timeout", False):
                tables.append((info, b.table))
        self._ctx, self._tables = ctx, tables

    def tick(self) -> None:
        ctx, tables = self._ctx, self._tables
        now = self._clock()
        if ctx is None or not tables or now < self._next:
            return
        self._next = now + SWEEP_NS
        aged: list[tuple[Any, list[Any]]] = []
        with ctx.device.lock:
            for info, dp in tables:
                entries = dp.sweep()
                if entries:
                    aged.append((info, [(e, dp.ttl(e.key, e.priority)) for e in entries]))
        if not aged:
            return
        # Encoding runs outside device.lock (bindings and schema are immutable per context).
        msg = p4runtime_pb2.StreamMessageResponse()
        note = msg.idle_timeout_notification
        for info, entries in aged:
            fields = ctx.bindings[info.id].fields
            for entry, ttl in entries:
                try:
                    match = encode_key(info, entry.key, fields)
                except P4RTError:     # cannot happen for an entry the server wrote
                    continue
                te = note.table_entry.add()
                te.table_id = info.id
                te.match.extend(match)
                te.priority = entry.priority
                te.idle_timeout_ns = ttl
                cookie = ctx.entry_metadata.get((info.name, entry.key, entry.priority))
                if cookie:
                    te.metadata = cookie
        note.timestamp = self._clock()
        if note.table_entry:
            self._send(msg)
