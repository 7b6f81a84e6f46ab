"""Client arbitration (P4Runtime spec §5 "Client arbitration", PI `pi_server.cpp`).

Each StreamChannel is one `Connection`.  The primary is the connection with the highest election
id; every other one is a backup.  Invariants, as in PI:
- two live connections never share an election id (the second gets INVALID_ARGUMENT);
- a connection's first arbitration fixes its device id (a later different one: FAILED_PRECONDITION);
- whenever the primary changes, every connection is told (status OK "Is primary" to the primary,
  ALREADY_EXISTS "Is backup" to the others, each with the primary's election id); otherwise only
  the connection that sent the update hears back.
The class knows nothing of gRPC: a connection is given a `send` callable.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError

__all__ = ["Arbitrator", "Connection", "election_id_of", "NOT_PRIMARY"]

#: The message PI uses for writes from anyone but the primary.
NOT_PRIMARY = "Not primary"
#: PI's cap on concurrent StreamChannels per device.
MAX_CONNECTIONS = 16

Send = Callable[[p4runtime_pb2.StreamMessageResponse], None]


def election_id_of(msg: p4runtime_pb2.Uint128) -> int:
    return (msg.high << 64) | msg.low


@dataclass(slots=True, eq=False)
class Connection:
    """One StreamChannel.  `election_id` is None until its first arbitration succeeds."""
    cid: int
    send: Send
    election_id: int | None = None


class Arbitrator:
    """Election state of one device.  Thread-safe: gRPC serves streams on several threads."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._live: list[Connection] = []   # arbitrated connections only

    def connect(self, send: Send) -> Connection:
        return Connection(next(self._ids), send)

    def arbitrate(self, conn: Connection, update: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Apply one MasterArbitrationUpdate.  Raises P4RTError: the stream must then close."""
        if update.device_id != self.device_id:
            raise P4RTError(Code.FAILED_PRECONDITION,
                            f"Invalid device id {update.device_id} (this switch is device "
                            f"{self.device_id})")
        if update.HasField("role") and (update.role.name or update.role.HasField("config")):
            raise P4RTError(Code.UNIMPLEMENTED,
                            "Roles are not supported: arbitrate without a role name")
        new_id = election_id_of(update.election_id)
        with self._lock:
            old_primary = self._primary()
            if any(c is not conn and c.election_id == new_id for c in self._live):
                raise P4RTError(Code.INVALID_ARGUMENT, "Election id already exists")
            if conn.election_id is None:
                if len(self._live) >= MAX_CONNECTIONS:
                    raise P4RTError(Code.RESOURCE_EXHAUSTED, "Too many connections")
                self._live.append(conn)
            conn.election_id = new_id
            if self._primary() is not old_primary:
                self._notify_all()
            else:
                self._notify(conn)

    def disconnect(self, conn: Connection) -> None:
        with self._lock:
            if conn not in self._live:
                return
            was_primary = self._primary() is conn
            self._live.remove(conn)
            if was_primary and self._live:
                self._notify_all()

    def primary(self) -> Connection | None:
        with self._lock:
            return self._primary()

    def is_primary(self, conn: Connection) -> bool:
        with self._lock:
            return conn.election_id is not None and self._primary() is conn

    def check_writer(self, has_election_id: bool, election_id: int) -> None:
        """PI's rule for Write / SetForwardingPipelineConfig: with no stream open only requests
        without an election id pass (convenient for grpc_cli); otherwise the id must be the
        primary's."""
        with self._lock:
            primary = self._primary()
            if primary is None:
                if has_election_id:
                    raise P4RTError(Code.PERMISSION_DENIED, NOT_PRIMARY)
                return
            if primary.election_id != election_id:
                raise P4RTError(Code.PERMISSION_DENIED, NOT_PRIMARY)

    def connections(self) -> int:
        with self._lock:
            return len(self._live)

    # -- under self._lock --
    def _primary(self) -> Connection | None:
        return max(self._live, key=lambda c: c.election_id or 0, default=None)

    def _notify_all(self) -> None:
        for c in self._live:
            self._notify(c)

    def _notify(self, conn: Connection) -> None:
        primary = self._primary()
        assert primary is not None and primary.election_id is not None
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        arb.election_id.high = primary.election_id >> 64
        arb.election_id.low = primary.election_id & ((1 << 64) - 1)
        if conn is primary:
            arb.status.code = Code.OK
            arb.status.message = "Is primary"
        else:
            arb.status.code = Code.ALREADY_EXISTS
            arb.status.message = "Is backup"
        conn.send(msg)
