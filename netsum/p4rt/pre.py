"""Packet replication engine entities (spec §9.5): multicast groups and clone sessions.

Neither is described by the P4Info, so `encode`/`decode` take the schema only to share the
other entities' signature.  Replicas are (egress port, instance) pairs; `instance` becomes the
copy's egress_rid.  Ports travel in the deprecated uint32 `egress_port`, which PI-based servers
(simple_switch_grpc) and p4runtime-shell use; the `port` bytes only exist from P4Runtime 1.4 and
are read when a server sends them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4runtime_pb2

__all__ = ["MulticastGroup", "CloneSession", "groups_wildcard"]

_pb = p4runtime_pb2


def _encode_replicas(out: Any, replicas: Iterable[tuple[int, int]]) -> None:
    for port, rid in replicas:
        r = out.add()
        r.egress_port = port
        r.instance = rid


def _decode_replicas(msgs: Iterable[p4runtime_pb2.Replica]) -> tuple[tuple[int, int], ...]:
    reps = []
    for r in msgs:
        port = r.egress_port
        if not port and r.port:
            port = int.from_bytes(r.port, "big")
        reps.append((port, r.instance))
    return tuple(reps)


@dataclass(frozen=True, slots=True)
class MulticastGroup:
    """A multicast group.  Replica order means nothing to PI (it reads them back grouped by
    rid), so by default the replicas are kept sorted and groups compare equal however they were
    written or read.  `ordered=True` keeps the order given: netsum-switch makes the copies in
    that order, which the copies leaving one port show (the STF runner needs BMv2's node
    order)."""
    mgid: int
    replicas: tuple[tuple[int, int], ...] = ()
    ordered: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.ordered:
            object.__setattr__(self, "replicas", tuple(sorted(self.replicas)))

    def identity(self) -> tuple[object, ...]:
        return ("mcast", self.mgid)

    def encode(self, schema: object = None) -> p4runtime_pb2.Entity:
        ent = _pb.Entity()
        g = ent.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = self.mgid
        _encode_replicas(g.replicas, self.replicas)
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: object = None) -> "MulticastGroup":
        g = ent.packet_replication_engine_entry.multicast_group_entry
        return cls(g.multicast_group_id, _decode_replicas(g.replicas))


@dataclass(frozen=True, slots=True)
class CloneSession:
    """A clone (mirroring) session: its replicas in the order given, the class of service and
    the length copies are truncated to (0 = whole packet)."""
    session_id: int
    replicas: tuple[tuple[int, int], ...] = ()
    class_of_service: int = 0
    packet_length_bytes: int = 0

    def identity(self) -> tuple[object, ...]:
        return ("clone", self.session_id)

    def encode(self, schema: object = None) -> p4runtime_pb2.Entity:
        ent = _pb.Entity()
        cs = ent.packet_replication_engine_entry.clone_session_entry
        cs.session_id = self.session_id
        _encode_replicas(cs.replicas, self.replicas)
        cs.class_of_service = self.class_of_service
        cs.packet_length_bytes = self.packet_length_bytes
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: object = None) -> "CloneSession":
        cs = ent.packet_replication_engine_entry.clone_session_entry
        return cls(cs.session_id, _decode_replicas(cs.replicas), cs.class_of_service,
                   cs.packet_length_bytes)


def groups_wildcard() -> p4runtime_pb2.Entity:
    """Read request for every multicast group."""
    ent = _pb.Entity()
    ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    return ent
