"""DigestManager against PI's digest_mgr.cpp semantics, worked out from that source: codes of
DigestEntry writes and reads, the cache of samples held by unacknowledged lists, the
max_timeout / ack_timeout timers (two sweeps each), max_list_size, and the memory bound."""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.p4rt import digests as dg
from netsum.switch.p4rt.digests import DigestManager
from netsum.switch.p4rt.errors import P4RTError

P4INFO = """
digests { preamble { id: 385000001 name: "learn_t" } type_spec { struct { name: "learn_t" } } }
digests { preamble { id: 385000002 name: "orphan" } type_spec { bitstring { bit { bitwidth: 8 } } } }
digests { preamble { id: 385000003 name: "varbit" } type_spec { bitstring { varbit { max_bitwidth: 8 } } } }
type_info { structs { key: "learn_t" value {
  members { name: "mac" type_spec { bitstring { bit { bitwidth: 48 } } } }
  members { name: "port" type_spec { bitstring { bit { bitwidth: 9 } } } } } } }
"""
LEARN, ORPHAN, VARBIT = 385000001, 385000002, 385000003
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE
MS = 1_000_000


class Rig:
    def __init__(self) -> None:
        self.now = 0
        self.sent: list[pb.DigestList] = []
        self.mgr = DigestManager(lambda m: self.sent.append(m.digest), clock=lambda: self.now)
        info = text_format.Parse(P4INFO, p4info_pb2.P4Info())
        self.mgr.configure(info, {1: "learn_t"})      # "orphan" has no learn list

    def config(self, kind: int = INSERT, digest_id: int = LEARN, **cfg: int) -> None:
        e = pb.DigestEntry(digest_id=digest_id)
        for k, v in cfg.items():
            setattr(e.config, k, v)
        self.mgr.write(kind, e)

    def samples(self) -> list[list[tuple[int, int]]]:
        return [[tuple(int.from_bytes(m.bitstring, "big") for m in d.struct.members)
                 for d in dl.data] for dl in self.sent]

    def tick(self, at_ms: int) -> None:
        self.now = at_ms * MS
        self.mgr.tick()


def code(fn: object) -> int:
    with pytest.raises(P4RTError) as exc:
        fn()      # type: ignore[operator]
    return int(exc.value.code)


def test_write_and_read_codes_as_pi() -> None:
    r = Rig()
    assert code(lambda: r.config(digest_id=999)) == 5                  # NOT_FOUND
    assert code(lambda: r.config(MODIFY)) == 5
    assert code(lambda: r.config(DELETE)) == 5
    assert code(lambda: r.mgr.read(pb.DigestEntry(digest_id=LEARN))) == 5
    assert code(lambda: r.mgr.read(pb.DigestEntry())) == 12            # UNIMPLEMENTED
    assert code(lambda: r.config(digest_id=ORPHAN)) == 2               # no learn list: UNKNOWN
    assert code(lambda: r.config(digest_id=VARBIT)) == 12
    assert code(lambda: r.config(max_timeout_ns=-1)) == 3
    r.config(max_list_size=4, ack_timeout_ns=7)
    assert code(lambda: r.config()) == 6                               # ALREADY_EXISTS
    (e,) = r.mgr.read(pb.DigestEntry(digest_id=LEARN))
    assert (e.digest_entry.config.max_list_size, e.digest_entry.config.ack_timeout_ns) == (4, 7)
    r.config(MODIFY, max_list_size=1)
    r.config(DELETE)
    assert code(lambda: r.mgr.read(pb.DigestEntry(digest_id=LEARN))) == 5


def test_unconfigured_digest_drops_samples() -> None:
    r = Rig()
    r.mgr.learn(1, (5, 1))
    r.config()
    assert r.sent == []


def test_cache_suppresses_repeats_until_ack_or_two_ack_sweeps() -> None:
    r = Rig()
    r.config(max_list_size=1, ack_timeout_ns=1000 * MS)     # max_timeout 0: send at once
    r.mgr.learn(1, (0xAA, 1))
    r.mgr.learn(1, (0xAA, 1))                               # in an unacked list: dropped
    r.mgr.learn(1, (0xBB, 2))
    assert r.samples() == [[(0xAA, 1)], [(0xBB, 2)]]
    assert [d.list_id for d in r.sent] == [1, 2]
    r.mgr.ack(pb.DigestListAck(digest_id=LEARN, list_id=1))
    r.mgr.learn(1, (0xAA, 1))                               # acked: sent again
    r.mgr.learn(1, (0xBB, 2))                               # list 2 still pending
    assert r.samples()[2:] == [[(0xAA, 1)]]
    # ack_timeout: the first sweep (t=1 s) marks list 2, the second (t=2 s) forgets it.
    r.tick(1000)
    r.mgr.learn(1, (0xBB, 2))
    assert len(r.sent) == 3
    r.tick(2000)
    r.mgr.learn(1, (0xBB, 2))
    assert r.samples()[3:] == [[(0xBB, 2)]]
    assert r.mgr.stats()[0] == ("learn_t", 1, 0)    # lists 2 and 3 expired; 4 waits


def test_max_timeout_sends_a_list_after_a_whole_period_and_max_list_size_at_once() -> None:
    r = Rig()
    r.config(max_timeout_ns=50 * MS, max_list_size=3)       # period raised to PI's 100 ms
    r.mgr.learn(1, (1, 1))
    r.mgr.learn(1, (2, 1))
    r.tick(100)                                             # first sweep: timeout bit set
    assert r.sent == []
    r.tick(200)                                             # second: sent
    assert r.samples() == [[(1, 1), (2, 1)]]
    for mac in (3, 4, 5):
        r.mgr.learn(1, (mac, 1))                            # the third fills the list
    assert r.samples()[1:] == [[(3, 1), (4, 1), (5, 1)]]


def test_waiting_samples_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dg, "MAX_PENDING", 10)
    r = Rig()
    r.config(max_timeout_ns=10**12, ack_timeout_ns=10**12)  # nothing ever leaves
    for mac in range(25):
        r.mgr.learn(1, (mac, 1))
    assert r.mgr.stats()[0] == ("learn_t", 10, 15)
