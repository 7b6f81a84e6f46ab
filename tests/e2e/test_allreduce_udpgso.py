"""All-reduce over UDP-tunnel ports with UDP GSO/GRO on (netsum/udpgso.py) end to end: a real
netsum-switch daemon (its C port loop: coalesced receives split, outputs as GSO sends) and
real netsum-worker processes (their C I/O: GSO sends, GRO reads), netsum.p4 at K = 256.

Every worker's result must be, bit for bit, the integer sums computed from the inputs alone
(tests/exactsums.py) dequantized, and the switch's GetStats must show that GSO sends and
coalesced receives really happened.  Then, on the ports the workers used, a coalesced buffer
whose last datagram is 10 bytes (cut inside the Ethernet header) goes to the switch: it must
count exactly what the same datagrams sent one by one make it count (each datagram its own
frame, the short one a parser error, no internal error), and the next job is exact again.
Where the C port loop cannot be built (no C compiler: the container tier), the Python loop
serves the same sockets with GRO and splits coalesced buffers by the same rule, so the sums
and the counts are checked all the same; only the C loop's GSO counters are missing, and the
checks that read them skip, saying why."""
from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from exactsums import reference_results
from helpers import assert_switch_clean, started_rigs, switch_stats
from netsum import udpgso
from netsum.rig import Rig
from netsum.switch.native import build
from netsum.tensors import synthetic_inputs
from test_allreduce_udp import assert_exact

K = 256
WORKERS = 4


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    old = os.environ.get(udpgso.ENV)
    os.environ[udpgso.ENV] = "1"            # the daemon and the workers inherit it
    try:
        with started_rigs((WORKERS,), lambda n: tmp_path_factory.mktemp("udpgso"), slots=64,
                          timeout=30, k=K) as made:
            yield made[WORKERS]
    finally:
        if old is None:
            os.environ.pop(udpgso.ENV, None)
        else:
            os.environ[udpgso.ENV] = old


def _exact_job(rig: Rig, n: int, seed: int) -> None:
    xs = synthetic_inputs(WORKERS, (n,), seed=seed)
    out = rig.run_job(xs, keep_results=True)
    assert_exact(out)
    assert out.problems == ()
    want = reference_results(xs, K)
    assert len(out.results) == WORKERS
    for r in out.results:
        assert r.reshape(-1).tobytes() == want.tobytes()


def _gso(rig: Rig) -> dict[str, int] | None:
    """The C loop's GSO/GRO counters; None where it is not built here (and only there)."""
    (addr,) = rig.grpc_addrs.values()
    got: dict[str, int] | None = switch_stats(addr)["udp_gso"]
    if got is None:
        assert build.available() is not None, "the C loop builds here but served no counters"
    return got


def _no_counters() -> NoReturn:
    pytest.skip(f"the switch's C port loop is not built here ({build.available()}): the "
                "GSO/GRO counters come from it (the sums and counts above were checked)")


def test_sums_are_the_reference_bit_for_bit_and_gso_was_used(rig: Rig) -> None:
    before = _gso(rig)
    for n, seed in ((1, 1), (K + 1, 2), (300 * K + 7, 3)):
        _exact_job(rig, n, seed)
    after = _gso(rig)
    if before is None or after is None:
        _no_counters()
    assert after["ports_on"] == WORKERS and after["refused"] == 0
    # the workers' windows arrived coalesced, and the results left as GSO sends
    assert after["rx_buffers"] > before["rx_buffers"]
    assert after["rx_segments"] - before["rx_segments"] > \
        2 * (after["rx_buffers"] - before["rx_buffers"])
    assert after["tx_sends"] > before["tx_sends"]


def _stats(rig: Rig) -> dict[str, Any]:
    (addr,) = rig.grpc_addrs.values()
    stats: dict[str, Any] = switch_stats(addr)["stats"]
    return stats


def _delta_after(rig: Rig, send: Any, frames: int) -> dict[str, int]:
    before = _stats(rig)
    send()
    deadline = time.monotonic() + 10
    while True:
        now = _stats(rig)
        if now["rx_packets"] - before["rx_packets"] >= frames:
            break
        assert time.monotonic() < deadline, "the switch did not take the datagrams"
        time.sleep(0.01)
    return {k: now[k] - before[k] for k in now if now[k] != before[k]}


def test_a_short_last_segment_counts_as_one_by_one_and_breaks_nothing(rig: Rig) -> None:
    host = rig.layout.hosts[0].name
    peer, port = rig.peers[host], rig.port_udp[host]
    # three 60-byte frames nobody handles (an unknown EtherType) and a 10-byte cut one
    junk = [bytes.fromhex("02000000fe00" "020000000001" "88b5") + bytes([i]) * 46
            for i in range(3)]
    frames = [*junk, b"\x02" * 10]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(peer)                         # the port's one peer: the worker has exited
        dest = ("127.0.0.1", port)
        cm = [(udpgso.SOL_UDP, udpgso.UDP_SEGMENT, struct.pack("=H", 60))]
        gso_before = _gso(rig)
        coalesced = _delta_after(rig, lambda: s.sendmsg(frames, cm, 0, dest), 4)
        gso_after = _gso(rig)
        one_by_one = _delta_after(rig, lambda: [s.sendto(f, dest) for f in frames], 4)
    assert coalesced == one_by_one
    assert coalesced["rx_packets"] == 4 and coalesced.get("parser_errors", 0) >= 1
    assert not coalesced.get("internal_errors") and not coalesced.get("udp_foreign")
    _exact_job(rig, 40 * K + 7, 4)
    (addr,) = rig.grpc_addrs.values()
    assert_switch_clean(addr)
    if gso_before is None or gso_after is None:
        _no_counters()
    assert gso_after["rx_buffers"] == gso_before["rx_buffers"] + 1
    assert gso_after["rx_segments"] == gso_before["rx_segments"] + 4
