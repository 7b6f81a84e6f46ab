"""The packet replication engine's control rules (PI's ranges and codes)."""
from __future__ import annotations

import pytest

from netsum.switch.entries import Replica
from netsum.switch.errors import AlreadyExists, InvalidArgument, NotFound, OutOfRange, SwitchError
from netsum.switch.replication import PRE


@pytest.mark.parametrize("call, exc", [
    (lambda p: p.mc_group_insert(0, []), InvalidArgument),
    (lambda p: p.mc_group_insert(32768, []), OutOfRange),
    (lambda p: p.mc_group_insert(1, [Replica(1, 0), Replica(1, 0)]), InvalidArgument),
    (lambda p: p.mc_group_insert(1, [Replica(512, 0)]), InvalidArgument),
    (lambda p: p.mc_group_insert(1, [Replica(1, 1 << 16)]), InvalidArgument),
    (lambda p: p.mc_group_modify(5, []), NotFound),
    (lambda p: p.mc_group_delete(5), NotFound),
    (lambda p: p.clone_session_insert(0, []), InvalidArgument),
    (lambda p: p.clone_session_insert(40000, []), OutOfRange),
    (lambda p: p.clone_session_insert(3, [], packet_length_bytes=-1), InvalidArgument),
    (lambda p: p.clone_session_delete(3), NotFound),
])
def test_rejections(call: object, exc: type[SwitchError]) -> None:
    with pytest.raises(exc):
        call(PRE())  # type: ignore[operator]


def test_group_and_session_lifecycle() -> None:
    p = PRE()
    p.mc_group_insert(1, [Replica(1, 0), Replica(1, 1), Replica(2, 0)])   # same port, two rids
    with pytest.raises(AlreadyExists):
        p.mc_group_insert(1, [])
    p.mc_group_modify(1, [Replica(3, 3)])
    assert p.mc_groups() == {1: (Replica(3, 3),)} and p.mc_group(1) == (Replica(3, 3),)
    p.mc_group_delete(1)
    assert p.mc_group(1) == ()
    p.clone_session_insert(5, [Replica(9, 0)], 64)
    assert p.clone_session(5) == ((Replica(9, 0),), 64)
    p.clone_session_modify(5, [Replica(8, 0)])
    assert p.clone_sessions() == {5: ((Replica(8, 0),), 0)}
    p.reset()
    assert p.mc_groups() == {} and p.clone_sessions() == {}
