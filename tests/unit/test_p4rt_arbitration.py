"""Arbitration rules (PI `pi_server.cpp`): highest election id is primary, every stream hears
about primary changes, duplicate ids and device-id changes are refused."""
from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code
from netsum.switch.p4rt.arbitration import Arbitrator, Connection
from netsum.switch.p4rt.errors import P4RTError

DEVICE = 3


class Inbox(list):  # type: ignore[type-arg]
    def codes(self) -> list[tuple[int, int]]:
        """(status code, primary election id) of each arbitration message received."""
        return [(m.arbitration.status.code, m.arbitration.election_id.low) for m in self]


def update(eid: int, device_id: int = DEVICE, role: str | None = None
           ) -> p4runtime_pb2.MasterArbitrationUpdate:
    u = p4runtime_pb2.MasterArbitrationUpdate(device_id=device_id)
    u.election_id.low = eid
    if role is not None:
        u.role.name = role
    return u


def connect(arb: Arbitrator) -> tuple[Connection, Inbox]:
    box = Inbox()
    return arb.connect(box.append), box


def test_first_connection_is_primary_and_told_so() -> None:
    arb = Arbitrator(DEVICE)
    c, box = connect(arb)
    arb.arbitrate(c, update(5))
    assert box.codes() == [(Code.OK, 5)]
    assert box[0].arbitration.status.message == "Is primary"
    assert box[0].arbitration.device_id == DEVICE
    assert arb.is_primary(c)


def test_lower_id_becomes_backup_and_only_it_hears() -> None:
    arb = Arbitrator(DEVICE)
    a, abox = connect(arb)
    b, bbox = connect(arb)
    arb.arbitrate(a, update(10))
    arb.arbitrate(b, update(2))
    assert abox.codes() == [(Code.OK, 10)]
    assert bbox.codes() == [(Code.ALREADY_EXISTS, 10)]
    assert bbox[0].arbitration.status.message == "Is backup"


def test_higher_id_takes_over_and_everyone_is_notified() -> None:
    arb = Arbitrator(DEVICE)
    a, abox = connect(arb)
    b, bbox = connect(arb)
    arb.arbitrate(a, update(1))
    arb.arbitrate(b, update(9))
    assert abox.codes() == [(Code.OK, 1), (Code.ALREADY_EXISTS, 9)]
    assert bbox.codes() == [(Code.OK, 9)]
    assert arb.primary() is b


def test_primary_disconnect_promotes_next_and_notifies_all() -> None:
    arb = Arbitrator(DEVICE)
    conns = [connect(arb) for _ in range(3)]
    for (c, _), eid in zip(conns, (3, 7, 5)):
        arb.arbitrate(c, update(eid))
    for _, box in conns:
        box.clear()
    arb.disconnect(conns[1][0])
    assert conns[0][1].codes() == [(Code.ALREADY_EXISTS, 5)]
    assert conns[2][1].codes() == [(Code.OK, 5)]
    assert conns[1][1] == []
    # A backup leaving changes nothing and tells nobody.
    for _, box in conns:
        box.clear()
    arb.disconnect(conns[0][0])
    assert all(box == [] for _, box in conns)


def test_election_id_zero_is_accepted() -> None:
    arb = Arbitrator(DEVICE)
    c, box = connect(arb)
    arb.arbitrate(c, update(0))
    assert box.codes() == [(Code.OK, 0)]


def test_128_bit_election_ids_compare_as_numbers() -> None:
    arb = Arbitrator(DEVICE)
    a, _ = connect(arb)
    b, bbox = connect(arb)
    ua = update(0)
    ua.election_id.high = 1            # 2**64
    arb.arbitrate(a, ua)
    arb.arbitrate(b, update((1 << 64) - 1))
    assert bbox.codes()[0][0] == Code.ALREADY_EXISTS


@pytest.mark.parametrize("second,code", [
    (update(4), Code.INVALID_ARGUMENT),                  # duplicate election id
    (update(6, device_id=DEVICE + 1), Code.FAILED_PRECONDITION),
    (update(6, role="spine"), Code.UNIMPLEMENTED),
])
def test_refused_arbitrations(second: p4runtime_pb2.MasterArbitrationUpdate, code: Code) -> None:
    arb = Arbitrator(DEVICE)
    a, _ = connect(arb)
    b, bbox = connect(arb)
    arb.arbitrate(a, update(4))
    with pytest.raises(P4RTError) as err:
        arb.arbitrate(b, second)
    assert err.value.code == code
    assert bbox == [] and arb.connections() == 1 and arb.primary() is a


def test_same_connection_may_change_its_id() -> None:
    arb = Arbitrator(DEVICE)
    a, abox = connect(arb)
    b, bbox = connect(arb)
    arb.arbitrate(a, update(4))
    arb.arbitrate(b, update(2))
    arb.arbitrate(b, update(8))   # b re-arbitrates higher: takes over
    assert arb.primary() is b
    assert abox.codes()[-1] == (Code.ALREADY_EXISTS, 8)


@pytest.mark.parametrize("streams,has_id,eid,ok", [
    ([], False, 0, True),           # no stream, no election id: accepted (PI, for grpc_cli)
    ([], True, 1, False),           # no stream, an election id: not primary
    ([7], True, 7, True),
    ([7], True, 6, False),
    ([7, 9], True, 7, False),       # a backup's id
    ([7, 9], True, 9, True),
])
def test_check_writer(streams: list[int], has_id: bool, eid: int, ok: bool) -> None:
    arb = Arbitrator(DEVICE)
    for e in streams:
        c, _ = connect(arb)
        arb.arbitrate(c, update(e))
    if ok:
        arb.check_writer(has_id, eid)
    else:
        with pytest.raises(P4RTError) as err:
            arb.check_writer(has_id, eid)
        assert err.value.code == Code.PERMISSION_DENIED
        assert err.value.message == "Not primary"
