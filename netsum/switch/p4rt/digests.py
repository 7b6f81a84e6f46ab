"""Digests over P4Runtime (spec §9.8 DigestEntry, §16.2 DigestList / DigestListAck), as PI's
`digest_mgr.cpp` serves them for bmv2.

`DigestManager` owns, per P4Info digest: its DigestEntry config, the DigestList being built,
the lists sent and not yet acknowledged, and the cache of samples those lists hold (a sample
already in an unacknowledged list is not sent again).  The data plane hands it samples
(`learn`, called with device.lock held: it only appends and, at most, puts one message on the
primary's queue); `tick` runs the two timers PI runs per digest:
- max_timeout_ns (at least 100 ms): a non-empty list is sent once it has waited a whole period;
  0 sends each sample at once;
- ack_timeout_ns (at least 100 ms): a list unacknowledged for a whole period is forgotten, so
  its samples may be sent again; 0 keeps no cache at all.
A list is also sent as soon as it holds max_list_size samples (0: no limit).  PI counts only
cached samples there, so with ack_timeout_ns 0 its lists ignore max_list_size; here the list
itself is counted, which is what the spec says the field means.

Codes, as PI: a digest id the P4Info lacks -> NOT_FOUND "<id> is not a valid digest id";
INSERT of a configured digest -> ALREADY_EXISTS; MODIFY/DELETE/read of an unconfigured one ->
NOT_FOUND; a read with digest_id 0 -> UNIMPLEMENTED.  A digest whose learn list the device
config lacks (bound by name, as bmv2's PI layer does) fails its writes with UNKNOWN.
Lists go to the primary only (PI's send_stream_message); with no primary they are dropped, but
stay pending until acknowledged or expired, as in PI.
Memory bound: at most MAX_PENDING samples per digest wait (in the list being built and in
unacknowledged lists); further samples are dropped and counted in `dropped`.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.codec import encode_uint
from netsum.switch.p4rt.errors import P4RTError

__all__ = ["DigestManager", "MIN_PERIOD_NS", "MAX_PENDING"]

Update = p4runtime_pb2.Update
#: PI's floor for both timers (min_max_timeout_ns, min_ack_timeout_ns).
MIN_PERIOD_NS = 100_000_000
#: Samples one digest may hold waiting (being built + sent and unacknowledged).
MAX_PENDING = 65536
Sample = tuple[int, ...]
Send = Callable[[p4runtime_pb2.StreamMessageResponse], None]


@dataclass(slots=True)
class _Digest:
    id: int
    name: str
    #: "struct", "tuple" or "bitstring" (a single value) and the members' widths.
    shape: str
    widths: tuple[int, ...]
    lid: int | None                       # the learn list it binds to, None: unbound
    config: p4runtime_pb2.DigestEntry.Config | None = None
    list_id: int = 1
    building: list[Sample] = field(default_factory=list)
    building_cached: list[Sample] = field(default_factory=list)
    timeout_bit: bool = False
    #: list_id -> [samples it holds in the cache, timeout bit]
    pending: dict[int, list[Any]] = field(default_factory=dict)
    cache: set[Sample] = field(default_factory=set)
    next_send: int = 0                    # monotonic ns of the next max_timeout sweep
    next_purge: int = 0                   # monotonic ns of the next ack_timeout sweep
    dropped: int = 0

    def waiting(self) -> int:
        return len(self.building) + sum(len(p[0]) for p in self.pending.values())


def _shape(d: p4info_pb2.Digest, info: p4info_pb2.P4Info) -> tuple[str, tuple[int, ...]] | str:
    """(shape, widths) of a digest's type spec, or why PI would refuse it."""
    ts = d.type_spec

    def width(b: Any) -> int | None:
        if b.HasField("bit"):
            return int(b.bit.bitwidth)
        if b.HasField("int"):
            return int(getattr(b, "int").bitwidth)
        return None

    kind = ts.WhichOneof("type_spec")
    if kind == "bitstring":
        w = width(ts.bitstring)
        return ("bitstring", (w,)) if w is not None else "Varbits not supported for digests"
    if kind == "tuple":
        members = [m.bitstring for m in ts.tuple.members if m.HasField("bitstring")]
        if len(members) != len(ts.tuple.members):
            return "Tuple can only include bitstring members for digests"
    elif kind == "struct":
        st = info.type_info.structs.get(ts.struct.name)
        if st is None:
            return f"Struct name '{ts.struct.name}' not found in P4TypeInfo struct map"
        if not all(m.type_spec.HasField("bitstring") for m in st.members):
            return "Struct can only include bitstring members for digests"
        members = [m.type_spec.bitstring for m in st.members]
    else:
        return "Packed type for digest can only be bitstring, struct or tuple"
    widths = [width(b) for b in members]
    if any(w is None for w in widths):
        return "Varbits not supported for digests"
    return kind, tuple(w for w in widths if w is not None)


class DigestManager:
    """The digest state of one device's committed pipeline (see the module docstring)."""

    def __init__(self, send: Send, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._send = send
        self._clock = clock
        self._lock = threading.Lock()
        self._by_id: dict[int, _Digest] = {}
        self._by_lid: dict[int, _Digest] = {}
        self._refused: dict[int, str] = {}

    def configure(self, p4info: p4info_pb2.P4Info, learn_lists: dict[int, str]) -> None:
        """A new pipeline: every digest starts unconfigured (PI builds a fresh state)."""
        by_name = {name: lid for lid, name in learn_lists.items()}
        by_id: dict[int, _Digest] = {}
        refused: dict[int, str] = {}
        for d in p4info.digests:
            shape = _shape(d, p4info)
            if isinstance(shape, str):
                refused[d.preamble.id] = shape
                continue
            by_id[d.preamble.id] = _Digest(d.preamble.id, d.preamble.name, shape[0], shape[1],
                                           by_name.get(d.preamble.name))
        with self._lock:
            self._by_id = by_id
            self._refused = refused
            self._by_lid = {d.lid: d for d in by_id.values() if d.lid is not None}

    # ------------------------------------------------------------ P4Runtime Write / Read
    def _get(self, digest_id: int) -> _Digest:
        d = self._by_id.get(digest_id)
        if d is None:
            if digest_id in self._refused:
                raise P4RTError(Code.UNIMPLEMENTED, self._refused[digest_id])
            raise P4RTError(Code.NOT_FOUND, f"{digest_id} is not a valid digest id")
        return d

    def write(self, kind: int, entry: p4runtime_pb2.DigestEntry) -> None:
        cfg = entry.config
        for name in ("max_timeout_ns", "ack_timeout_ns", "max_list_size"):
            if getattr(cfg, name) < 0:
                raise P4RTError(Code.INVALID_ARGUMENT,
                                f"DigestEntry {entry.digest_id}: {name} must not be negative")
        with self._lock:
            d = self._get(entry.digest_id)
            if kind == Update.INSERT and d.config is not None:
                raise P4RTError(Code.ALREADY_EXISTS, f"Digest {d.id} already configured")
            if kind in (Update.MODIFY, Update.DELETE) and d.config is None:
                raise P4RTError(Code.NOT_FOUND, f"Digest {d.id} not configured")
            if kind not in (Update.INSERT, Update.MODIFY, Update.DELETE):
                raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type for DigestEntry")
            if d.lid is None:
                raise P4RTError(Code.UNKNOWN, f"digest '{d.name}': the device config has no "
                                "learn list of that name (error when configuring digest with "
                                "target)")
            if kind == Update.DELETE:
                self._reset(d)
                return
            d.config = p4runtime_pb2.DigestEntry.Config()
            d.config.CopyFrom(cfg)
            now = self._clock()
            # PI re-arms both periodic tasks on every INSERT/MODIFY (wait_first).
            d.next_send = now + max(cfg.max_timeout_ns, MIN_PERIOD_NS)
            d.next_purge = now + max(cfg.ack_timeout_ns, MIN_PERIOD_NS)

    def read(self, entry: p4runtime_pb2.DigestEntry) -> list[p4runtime_pb2.Entity]:
        if entry.digest_id == 0:
            raise P4RTError(Code.UNIMPLEMENTED, "digest_id must be set when reading DigestEntry")
        with self._lock:
            d = self._get(entry.digest_id)
            if d.config is None:
                raise P4RTError(Code.NOT_FOUND, f"Digest {d.id} not configured")
            e = p4runtime_pb2.Entity()
            e.digest_entry.digest_id = d.id
            e.digest_entry.config.CopyFrom(d.config)
            return [e]

    def _reset(self, d: _Digest) -> None:
        d.config = None
        d.building.clear()
        d.building_cached.clear()
        d.pending.clear()
        d.cache.clear()
        d.timeout_bit = False

    # ------------------------------------------------------------ data plane and stream
    def learn(self, lid: int, values: Sample) -> None:
        """One sample of learn list `lid` from the data plane."""
        with self._lock:
            d = self._by_lid.get(lid)
            if d is None or d.config is None:
                return
            cfg = d.config
            if cfg.ack_timeout_ns > 0:
                if values in d.cache:
                    return
                if d.waiting() >= MAX_PENDING:
                    d.dropped += 1
                    return
                d.cache.add(values)
                d.building_cached.append(values)
            elif len(d.building) >= MAX_PENDING:
                d.dropped += 1
                return
            d.building.append(values)
            if (cfg.max_list_size and len(d.building) >= cfg.max_list_size) \
                    or cfg.max_timeout_ns == 0:
                self._flush(d)

    def ack(self, ack: p4runtime_pb2.DigestListAck) -> None:
        with self._lock:
            d = self._by_id.get(ack.digest_id)
            if d is None:
                return
            held = d.pending.pop(ack.list_id, None)
            if held is not None:
                d.cache.difference_update(held[0])

    def tick(self) -> None:
        """Run the timers that are due (called every few tens of ms by the server)."""
        now = self._clock()
        with self._lock:
            for d in self._by_id.values():
                cfg = d.config
                if cfg is None:
                    continue
                if cfg.max_timeout_ns and now >= d.next_send:
                    d.next_send = now + max(cfg.max_timeout_ns, MIN_PERIOD_NS)
                    if d.building:
                        if d.timeout_bit:
                            self._flush(d)
                        else:
                            d.timeout_bit = True
                if cfg.ack_timeout_ns and now >= d.next_purge:
                    d.next_purge = now + max(cfg.ack_timeout_ns, MIN_PERIOD_NS)
                    for list_id, held in list(d.pending.items()):
                        if held[1]:
                            del d.pending[list_id]
                            d.cache.difference_update(held[0])
                        else:
                            held[1] = True

    def _flush(self, d: _Digest) -> None:
        msg = p4runtime_pb2.StreamMessageResponse()
        dl = msg.digest
        dl.digest_id = d.id
        dl.list_id = d.list_id
        for sample in d.building:
            self._encode(d, sample, dl.data.add())
        dl.timestamp = self._clock()
        self._send(msg)
        if d.building_cached:
            d.pending[d.list_id] = [d.building_cached, False]
        d.building_cached = []
        d.building = []
        d.timeout_bit = False
        d.list_id += 1

    @staticmethod
    def _encode(d: _Digest, sample: Sample, out: p4runtime_pb2.P4Data) -> None:
        # PI converts each member to its canonical byte string (no leading zero bytes).
        if d.shape == "bitstring":
            out.bitstring = encode_uint(sample[0] if sample else 0)
            return
        members = out.struct.members if d.shape == "struct" else out.tuple.members
        for _w, v in zip(d.widths, sample):
            members.add().bitstring = encode_uint(v)

    def stats(self) -> list[tuple[str, int, int]]:
        """(name, samples waiting, samples dropped) per digest (for tests and status)."""
        with self._lock:
            return [(d.name, d.waiting(), d.dropped) for d in self._by_id.values()]
