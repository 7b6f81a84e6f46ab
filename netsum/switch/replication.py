"""The packet replication engine (PRE): multicast groups and clone sessions.

Control side: P4Runtime-style calls (ranges and error codes as PI's).  Data side: `mc_group(mgid)`
and `clone_session(session)` give the replicas to make, nothing else.  Clone sessions are kept
apart from multicast groups (PI maps them to groups 32768+id; nobody can observe the difference).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from netsum.switch.entries import Replica
from netsum.switch.errors import AlreadyExists, InvalidArgument, NotFound, OutOfRange

__all__ = ["PRE", "MAX_GROUP_ID", "MAX_SESSION_ID"]

MAX_GROUP_ID = 32767     # P4Runtime via PI: 1..32767; >= 32768 is reserved for clone sessions
MAX_SESSION_ID = 32767
_MAX_PORT = 511          # v1model ports are bit<9>
_MAX_RID = 0xFFFF        # egress_rid is bit<16>


def _check_replicas(what: str, replicas: Iterable[Replica]) -> tuple[Replica, ...]:
    out: list[Replica] = []
    seen: set[tuple[int, int]] = set()
    for r in replicas:
        if not isinstance(r, Replica):
            raise InvalidArgument(f"{what}: replica {r!r} is not a Replica")
        if not 0 <= r.port <= _MAX_PORT:
            raise InvalidArgument(f"{what}: replica port {r.port} outside 0..{_MAX_PORT}")
        if not 0 <= r.rid <= _MAX_RID:
            raise InvalidArgument(f"{what}: replica instance {r.rid} outside 0..{_MAX_RID}")
        if (r.port, r.rid) in seen:
            raise InvalidArgument(f"{what}: duplicate replica (port {r.port}, instance {r.rid})")
        seen.add((r.port, r.rid))
        out.append(r)
    return tuple(out)


class PRE:
    """Multicast groups and clone sessions of one pipeline."""

    __slots__ = ("_groups", "_sessions", "on_change")

    def __init__(self) -> None:
        self._groups: dict[int, tuple[Replica, ...]] = {}
        self._sessions: dict[int, tuple[tuple[Replica, ...], int]] = {}
        #: Called after every change of the multicast groups (the native backend keeps a copy).
        self.on_change: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- multicast groups ------------------------------------------------------------------
    @staticmethod
    def _check_mgid(mgid: int) -> None:
        if mgid == 0:
            raise InvalidArgument("multicast group id 0 is invalid")
        if not 0 < mgid <= MAX_GROUP_ID:
            raise OutOfRange(f"multicast group id {mgid} outside 1..{MAX_GROUP_ID}")

    def mc_group_insert(self, mgid: int, replicas: Iterable[Replica]) -> None:
        self._check_mgid(mgid)
        reps = _check_replicas(f"multicast group {mgid}", replicas)
        if mgid in self._groups:
            raise AlreadyExists(f"multicast group {mgid} already exists")
        self._groups[mgid] = reps
        self._changed()

    def mc_group_modify(self, mgid: int, replicas: Iterable[Replica]) -> None:
        self._check_mgid(mgid)
        reps = _check_replicas(f"multicast group {mgid}", replicas)
        if mgid not in self._groups:
            raise NotFound(f"multicast group {mgid} does not exist")
        self._groups[mgid] = reps
        self._changed()

    def mc_group_delete(self, mgid: int, replicas: Iterable[Replica] = ()) -> None:
        self._check_mgid(mgid)
        if mgid not in self._groups:
            raise NotFound(f"multicast group {mgid} does not exist")
        del self._groups[mgid]
        self._changed()

    def mc_groups(self) -> dict[int, tuple[Replica, ...]]:
        return dict(self._groups)

    # -- clone sessions --------------------------------------------------------------------
    @staticmethod
    def _check_session(session: int) -> None:
        if session == 0:
            raise InvalidArgument("clone session id 0 is invalid")
        if not 0 < session <= MAX_SESSION_ID:
            raise OutOfRange(f"clone session id {session} outside 1..{MAX_SESSION_ID}")

    def clone_session_insert(self, session: int, replicas: Iterable[Replica],
                             packet_length_bytes: int = 0) -> None:
        self._check_session(session)
        reps = _check_replicas(f"clone session {session}", replicas)
        if packet_length_bytes < 0:
            raise InvalidArgument(f"clone session {session}: negative packet_length_bytes")
        if session in self._sessions:
            raise AlreadyExists(f"clone session {session} already exists")
        self._sessions[session] = (reps, packet_length_bytes)

    def clone_session_modify(self, session: int, replicas: Iterable[Replica],
                             packet_length_bytes: int = 0) -> None:
        self._check_session(session)
        reps = _check_replicas(f"clone session {session}", replicas)
        if packet_length_bytes < 0:
            raise InvalidArgument(f"clone session {session}: negative packet_length_bytes")
        if session not in self._sessions:
            raise NotFound(f"clone session {session} does not exist")
        self._sessions[session] = (reps, packet_length_bytes)

    def clone_session_delete(self, session: int, replicas: Iterable[Replica] = (),
                             packet_length_bytes: int = 0) -> None:
        self._check_session(session)
        if session not in self._sessions:
            raise NotFound(f"clone session {session} does not exist")
        del self._sessions[session]

    def clone_sessions(self) -> dict[int, tuple[tuple[Replica, ...], int]]:
        """session -> (replicas, packet_length_bytes)."""
        return dict(self._sessions)

    def reset(self) -> None:
        self._groups.clear()
        self._sessions.clear()
        self._changed()

    # -- data plane ------------------------------------------------------------------------
    def mc_group(self, mgid: int) -> tuple[Replica, ...]:
        return self._groups.get(mgid, ())

    def clone_session(self, session: int) -> tuple[tuple[Replica, ...], int] | None:
        return self._sessions.get(session)
