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
from netsum.switch.p4rt import entities, tables, vsets
from netsum.switch.p4rt.context import Context, ReadStep
from netsum.switch.p4rt.errors import P4RTError, code_and_message
from netsum.switch.p4rt.packetio import decode_packet_in, encode_packet_out
from netsum.switch.p4rt.binding import bind_tables
from netsum.switch.p4rt.pipeline_config import (PipelineConfig, check_p4info_consistent,
                                         decode_device_config)
from netsum.switch.p4rt.schema import Schema

__all__ = ["DeviceService", "NO_PIPELINE"]

NO_PIPELINE = "No forwarding pipeline config set for this device"
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
    "action_profile_member": entities.read_action_profile_entries,
    "action_profile_group": entities.read_action_profile_entries,
}


class DeviceService:
    """The P4Runtime view of one `netsum.switch.device.Device`."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._committed: PipelineConfig | None = None
        self._saved: PipelineConfig | None = None
        self._ctx: Context | None = None
        self._lock = threading.RLock()

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
        writer = _WRITERS.get(kind)
        if writer is None:
            raise P4RTError(Code.UNIMPLEMENTED, f"Writing {kind} is not supported")
        with self.device.lock:
            writer(ctx, update.type, getattr(update.entity, kind))

    def read(self, entities_: Any) -> list[p4runtime_pb2.Entity]:
        with self._lock:
            return self._read(entities_)

    def _read(self, entities_: Any) -> list[p4runtime_pb2.Entity]:
        ctx = self.context
        out: list[p4runtime_pb2.Entity] = []
        for entity in entities_:
            kind = entity.WhichOneof("entity")
            if kind is None:
                raise P4RTError(Code.INVALID_ARGUMENT, "Read of an empty entity")
            reader = _READERS.get(kind)
            if reader is None:
                raise P4RTError(Code.UNIMPLEMENTED, f"Reading {kind} is not supported")
            # device.lock is held only while a step copies data-plane values (one table, or up
            # to 1024 cells); encoding runs outside it, so a wildcard read of a big program
            # (~300k register cells) never stalls the packet path for long.
            steps = reader(ctx, getattr(entity, kind))
            while True:
                with self.device.lock:
                    step = next(steps, None)
                if step is None:
                    break
                out.extend(step())
        return out

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
        entries={n: [e for e in t.entries() if not e.is_const]
                 for n, t in pl.tables.items() if n in visible},
        defaults={n: t.default for n, t in pl.tables.items()
                  if n in visible and not t.default_is_const},
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
