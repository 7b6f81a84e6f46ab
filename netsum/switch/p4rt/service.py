"""P4Runtime semantics of one device, free of gRPC: pipeline configs, Write, Read, packet I/O.

`DeviceService` owns the committed/saved forwarding-pipeline configs and dispatches each entity
to `tables` / `entities`.  Concurrency invariant: every update is applied while holding
`device.lock`, the lock the data plane holds per packet, so a packet sees each update entirely
or not at all; reads hold it per step (one table's entries, or a chunk of array cells), so
each table is read consistently and packets keep flowing during big reads.
Error invariant: a failed update changes nothing (validation happens before the data-plane call,
and each data-plane call validates before it mutates).
Config invariant: Write, Read and SetForwardingPipelineConfig are serialized by `_lock` (PI uses
a shared mutex the same way), so a batch never lands in a pipeline that a concurrent config
change has just replaced.  Lock order: `_lock` before `device.lock`; the packet-in path takes
neither `_lock` nor waits on it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code, SwitchError
from netsum.switch.p4rt import entities, profiles, tables, vsets, wire
from netsum.switch.p4rt.ageing import IdleTimeouts
from netsum.switch.p4rt.digests import DigestManager
from netsum.switch.p4rt.context import Context, ReadStep
from netsum.switch.p4rt.errors import P4RTError, code_and_message
from netsum.switch.p4rt.packetio import decode_packet_in, encode_packet_out
from netsum.switch.p4rt.binding import bind_tables
from netsum.switch.p4rt.pipeline_config import (PipelineConfig, check_p4info_consistent,
                                         decode_device_config)
from netsum.switch.p4rt.schema import Schema

__all__ = ["DeviceService", "NO_PIPELINE"]

NO_PIPELINE = "No forwarding pipeline config set for this device"
#: A Read's result is cut into ReadResponses of about this many bytes (PI sends one response;
#: a wildcard register read of netsum.p4 is ~60 MB, past every client's 4 MB receive limit).
READ_BYTES = 1 << 20
Action = p4runtime_pb2.SetForwardingPipelineConfigRequest
ResponseType = p4runtime_pb2.GetForwardingPipelineConfigRequest
Update = p4runtime_pb2.Update

_WRITERS: dict[str, Callable[[Context, int, Any], None]] = {
    "table_entry": tables.write_table_entry,
    "counter_entry": entities.write_counter,
    "direct_counter_entry": entities.write_direct_counter,
    "meter_entry": entities.write_meter,
    "direct_meter_entry": entities.write_direct_meter,
    "register_entry": entities.write_register,
    "packet_replication_engine_entry": entities.write_pre,
    "value_set_entry": vsets.write_value_set,
    "action_profile_member": profiles.write_member,
    "action_profile_group": profiles.write_group,
}
_READERS: dict[str, Callable[[Context, Any], Iterator[ReadStep]]] = {
    "table_entry": tables.read_table_entries,
    "counter_entry": entities.read_counters,
    "direct_counter_entry": entities.read_direct_counters,
    "meter_entry": entities.read_meters,
    "direct_meter_entry": entities.read_direct_meters,
    "register_entry": entities.read_registers,
    "packet_replication_engine_entry": entities.read_pre,
    "value_set_entry": vsets.read_value_sets,
    "action_profile_member": profiles.read_members,
    "action_profile_group": profiles.read_groups,
}


class DeviceService:
    """The P4Runtime view of one `netsum.switch.device.Device`."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._committed: PipelineConfig | None = None
        self._saved: PipelineConfig | None = None
        self._ctx: Context | None = None
        self._lock = threading.RLock()
        #: Stream messages the switch originates (DigestList, IdleTimeoutNotification) go
        #: through `notify`, which the gRPC layer points at the primary's stream.
        self.notify: Callable[[p4runtime_pb2.StreamMessageResponse], None] = lambda _m: None
        self.digests = DigestManager(lambda m: self.notify(m))
        self.ageing = IdleTimeouts(lambda m: self.notify(m))

    # ------------------------------------------------------------ pipeline config
    @property
    def context(self) -> Context:
        if self._ctx is None:
            raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
        return self._ctx

    def has_pipeline(self) -> bool:
        return self._ctx is not None

    def verify(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> PipelineConfig:
        """Parse and cross-check a config and build its pipeline; no side effect."""
        doc = decode_device_config(config.p4_device_config)
        check_p4info_consistent(config.p4info)
        schema = Schema(config.p4info)
        try:
            pipeline = type(self.device).build_pipeline(doc)
        except SwitchError as exc:
            raise P4RTError(Code.INVALID_ARGUMENT, f"device config rejected: {exc.message}") from None
        # As PI: nothing of the P4Info is compared with the JSON here; objects bind by name
        # and mismatches fail the requests that touch them (netsum.switch.p4rt.binding).
        return PipelineConfig(config.p4info, bytes(config.p4_device_config),
                              config.cookie.cookie if config.HasField("cookie") else None,
                              schema, pipeline, bind_tables(schema, pipeline))

    def set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig | None
                     ) -> None:
        with self._lock:
            self._set_pipeline(action, config)

    def _set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig | None
                      ) -> None:
        if action == Action.UNSPECIFIED or action not in Action.Action.values():
            raise P4RTError(Code.INVALID_ARGUMENT, f"Invalid SetForwardingPipelineConfig action "
                            f"{action}")
        if action == Action.COMMIT:
            if self._saved is None:
                raise P4RTError(Code.FAILED_PRECONDITION,
                                "COMMIT without a config saved by VERIFY_AND_SAVE")
            saved, self._saved = self._saved, None
            self._install(saved, reconcile=False)
            return
        if config is None:
            raise P4RTError(Code.INVALID_ARGUMENT, "Missing forwarding pipeline config")
        verified = self.verify(config)
        if action == Action.VERIFY:
            return
        if action == Action.VERIFY_AND_SAVE:
            self._saved = verified
            return
        self._install(verified, reconcile=action == Action.RECONCILE_AND_COMMIT)

    def _install(self, cfg: PipelineConfig, reconcile: bool) -> None:
        # Device.install resets the pipeline's state, so reconciling replays a snapshot after
        # the swap; if the old state does not fit the new program, the old pipeline goes back
        # with its state.  All of it under device.lock: packets see the old or the new switch.
        with self.device.lock:
            old = self._committed if reconcile else None
            snap = _snapshot(self._ctx) if reconcile and self._ctx is not None else None
            self.device.install(cfg.pipeline)
            metadata: dict[Any, bytes] = {}
            if snap is not None:
                try:
                    metadata = _restore(snap, cfg.pipeline, cfg.schema)
                except P4RTError:
                    assert old is not None
                    self.device.install(old.pipeline)
                    _restore(snap, old.pipeline, old.schema)
                    raise
            self._committed = cfg
            self._ctx = Context(cfg.schema, cfg.pipeline, self.device, cfg.bindings, metadata)
            self.digests.configure(cfg.p4info, cfg.pipeline.layout.learn_list_names)
            self.ageing.configure(self._ctx)

    def get_pipeline(self, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig:
        cfg = self._committed       # one reference read: consistent without the lock
        if cfg is None:
            raise P4RTError(Code.FAILED_PRECONDITION, NO_PIPELINE)
        if response_type not in ResponseType.ResponseType.values():
            raise P4RTError(Code.INVALID_ARGUMENT, f"Invalid response_type {response_type}")
        out = p4runtime_pb2.ForwardingPipelineConfig()
        if cfg.cookie is not None:
            out.cookie.cookie = cfg.cookie
        if response_type in (ResponseType.ALL, ResponseType.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(cfg.p4info)
        if response_type in (ResponseType.ALL, ResponseType.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = cfg.device_config
        return out

    # ------------------------------------------------------------ write / read
    def write(self, updates: Any) -> list[tuple[Code, str]]:
        """Apply updates in order (CONTINUE_ON_ERROR); one (code, message) per update."""
        with self._lock:
            return self._write(updates)

    def _write(self, updates: Any) -> list[tuple[Code, str]]:
        ctx = self.context
        results: list[tuple[Code, str]] = []
        for update in updates:
            try:
                self._write_one(ctx, update)
                results.append((Code.OK, ""))
            except Exception as exc:  # noqa: BLE001 - every failure becomes that update's error
                results.append(code_and_message(exc))
        return results

    def _write_one(self, ctx: Context, update: p4runtime_pb2.Update) -> None:
        if update.type not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise P4RTError(Code.INVALID_ARGUMENT, f"Invalid update type {update.type}")
        kind = update.entity.WhichOneof("entity")
        if kind is None:
            raise P4RTError(Code.INVALID_ARGUMENT, "Update without an entity")
        if kind == "digest_entry":
            self.digests.write(update.type, update.entity.digest_entry)
            return
        writer = _WRITERS.get(kind)
        if writer is None:
            raise P4RTError(Code.UNIMPLEMENTED, f"Writing {kind} is not supported")
        with self.device.lock:
            writer(ctx, update.type, getattr(update.entity, kind))

    def read(self, entities_: Any) -> list[p4runtime_pb2.Entity]:
        """Every entity the request selects, as messages (tests and tools; the server streams
        `read_bodies` instead)."""
        out: list[p4runtime_pb2.Entity] = []
        for body in self.read_bodies(entities_):
            out.extend(p4runtime_pb2.ReadResponse.FromString(body).entities)
        return out

    def read_bodies(self, entities_: Any, limit: int | None = None) -> Iterator[bytes]:
        """A Read as serialized ReadResponses of at most ~`limit` bytes each (one, possibly
        empty, for a small result -- as PI answers).  Lazy: a step's cells are copied only
        when the previous body has been taken, so memory stays flat whatever the read's size
        and however slowly the client consumes it.  No lock is held between bodies: the read
        works on the context committed when it began (Context is immutable per config), and
        each step holds device.lock only while it copies (one table, or 1024 cells)."""
        with self._lock:
            ctx = self.context
            kinds = []
            for entity in entities_:
                kind = entity.WhichOneof("entity")
                if kind is None:
                    raise P4RTError(Code.INVALID_ARGUMENT, "Read of an empty entity")
                if kind != "digest_entry" and kind not in _READERS:
                    raise P4RTError(Code.UNIMPLEMENTED, f"Reading {kind} is not supported")
                kinds.append((kind, getattr(entity, kind)))
        limit = READ_BYTES if limit is None else limit
        parts: list[bytes] = []
        size = 0
        sent = False
        for kind, msg in kinds:
            for chunk in self._read_one(ctx, kind, msg):
                parts.append(chunk)
                size += len(chunk)
                if size >= limit:
                    yield b"".join(parts)
                    parts, size, sent = [], 0, True
        if parts or not sent:
            yield b"".join(parts)

    def _read_one(self, ctx: Context, kind: str, msg: Any) -> Iterator[bytes]:
        if kind == "digest_entry":
            yield b"".join(wire.record(e.SerializeToString())
                           for e in self.digests.read(msg))
            return
        steps = _READERS[kind](ctx, msg)
        while True:
            with self.device.lock:
                step = next(steps, None)
            if step is None:
                return
            got = step()
            yield got if isinstance(got, bytes) else \
                b"".join(wire.record(e.SerializeToString()) for e in got)

    def tick(self) -> None:
        """The periodic work of digests and idle timeouts (the server calls it every
        TICK_S seconds from one thread)."""
        self.digests.tick()
        self.ageing.tick()

    # ------------------------------------------------------------ packet I/O
    def packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        ctx = self.context
        cpu_port = getattr(self.device, "cpu_port", None)
        if cpu_port is None:
            raise P4RTError(Code.FAILED_PRECONDITION,
                            "Packet I/O needs a CPU port (start the switch with --cpu-port)")
        frame = encode_packet_out(ctx.schema, packet)
        self.device.receive(cpu_port, frame)

    def packet_in(self, frame: bytes) -> p4runtime_pb2.PacketIn | None:
        ctx = self._ctx
        if ctx is None:
            return None
        return decode_packet_in(ctx.schema, frame)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """Forwarding state of a pipeline, by name (RECONCILE_AND_COMMIT)."""
    entries: dict[str, list[Any]]
    defaults: dict[str, Any]
    counters: dict[str, list[Any]]
    meters: dict[str, list[Any]]
    registers: dict[str, list[int]]
    groups: dict[int, Any]
    sessions: dict[int, Any]
    metadata: dict[Any, bytes]
    value_sets: dict[str, tuple[tuple[int, ...], ...]]


def _snapshot(ctx: Context) -> _Snapshot:
    pl = ctx.pipeline
    visible = ctx.schema.tables.by_name
    return _Snapshot(
        # Indirect tables' entries point at profile state that is not carried over.
        entries={n: [e for e in t.entries() if not e.is_const]
                 for n, t in pl.tables.items() if n in visible and t.profile is None},
        defaults={n: t.default for n, t in pl.tables.items()
                  if n in visible and not t.default_is_const and t.profile is None},
        counters={n: [c.read(i) for i in range(c.size)]
                  for n, c in pl.counters.items() if not c.is_direct},
        meters={n: [m.get_config(i) for i in range(m.size)]
                for n, m in pl.meters.items() if not m.is_direct},
        registers={n: [r.read(i) for i in range(r.size)] for n, r in pl.registers.items()},
        groups=pl.pre.mc_groups(), sessions=pl.pre.clone_sessions(),
        metadata=dict(ctx.entry_metadata),
        value_sets={n: v.values() for n, v in pl.value_sets.items() if v.values()})


def _restore(snap: _Snapshot, pl: Any, schema: Schema) -> dict[Any, bytes]:
    """Replay `snap` into the freshly installed `pl`; tables absent from the new P4Info are
    dropped, arrays are carried over when name and size match.  Entries that the new program
    rejects fail the request (INVALID_ARGUMENT naming the problem)."""
    metadata: dict[Any, bytes] = {}
    try:
        for name, entries in snap.entries.items():
            if name not in schema.tables.by_name or name not in pl.tables:
                continue
            table = pl.tables[name]
            for entry in entries:
                table.insert(entry)
                cookie = snap.metadata.get((name, entry.key, entry.priority))
                if cookie:
                    metadata[(name, entry.key, entry.priority)] = cookie
                if entry.counter.packets or entry.counter.bytes:
                    table.write_counter(entry.key, entry.priority, entry.counter)
            if name in snap.defaults and not table.default_is_const:
                table.set_default(snap.defaults[name])
        for name, values in snap.counters.items():
            if name in pl.counters and pl.counters[name].size == len(values):
                for i, v in enumerate(values):
                    pl.counters[name].write(i, v)
        for name, configs in snap.meters.items():
            if name in pl.meters and pl.meters[name].size == len(configs):
                for i, c in enumerate(configs):
                    pl.meters[name].set_config(i, c)
        for name, regs in snap.registers.items():
            if name in pl.registers and pl.registers[name].size == len(regs):
                for i, v in enumerate(regs):
                    pl.registers[name].write(i, v)
        for name, members in snap.value_sets.items():
            if name in pl.value_sets:
                try:
                    pl.value_sets[name].set_members(members)
                except (ValueError, OverflowError) as exc:
                    raise SwitchError(str(exc)) from None
        for mgid, replicas in snap.groups.items():
            pl.pre.mc_group_insert(mgid, replicas)
        for sid, (replicas, length) in snap.sessions.items():
            pl.pre.clone_session_insert(sid, replicas, length)
    except (SwitchError, KeyError) as exc:
        message = exc.message if isinstance(exc, SwitchError) else f"missing {exc}"
        raise P4RTError(Code.INVALID_ARGUMENT,
                        f"RECONCILE_AND_COMMIT: state does not fit the new pipeline: {message}"
                        ) from None
    return metadata
