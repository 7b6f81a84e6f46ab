"""No host that is not a member of a job can change or read its sums, end to end: real
netsum-worker processes through a netsum-switch daemon set up by the controller, in both tiers
(UDP-tunnel ports on loopback; and, as root, network namespaces with veth pairs, kernel UDP
workers and AF_PACKET switch ports).

Jobs A (h1, h2) and B (h3, h4) run side by side; h5 is on port 5 and in no job.  The switch
records what each port received (--pcap), so the attacks replay what a member really sent:

1. h5 replays h1's captured DATA (h1's IPv4 and MAC) after A finished, when a member's
   duplicate would be answered with the result: nothing comes back, nothing changes, every
   frame is counted as drop_non_member.
2. A runs again (a new registration: reset, new epoch, rounds from 0 -- the replay's rounds)
   while h5 replays the same frames: the sums are exact, h5 gets no RESULT, and the refusals
   are exactly the frames h5 sent.
3. From h1's own place (port, address), its frames forged to job B's id, or to slots beyond
   A's range, while B runs again: dropped and counted (drop_non_member at B, drop_bad_slot
   at A); B's sums are exact.
4. UDP tier: a process that is not a port's peer sends h1's frames to h1's port: dropped before
   the program, counted in the switch's udp_foreign.
Every expected count is the number of frames the test sent.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import privileged_skip_reason
from helpers import assert_switch_clean, switch_stats
from netsum.rig import Mode, Rig, RigConfig
from netsum.tensors import synthetic_inputs
from rogue import NetnsRogue, UdpRogue, captured_data, is_netsum, with_field
from netsum.wire import K_DEFAULT

K = K_DEFAULT
SLOTS = 32
ELEMENTS = 3000 * K // 32   # 94 blocks at every K: 94 + 32 bootstrap uses per worker
USES = -(-ELEMENTS // K) + SLOTS


def rogue_at(rig: Rig, host: str, work: Path) -> UdpRogue | NetnsRogue:
    """A sender at `host`'s place: its switch port and address."""
    if rig.config.mode is Mode.UDP:
        return UdpRogue(rig.peers[host], ("127.0.0.1", rig.port_udp[host]))
    assert rig.lab is not None
    h = rig.host(host)
    net = next(n for n in rig.lab.hosts if n.ipv4 == h.ipv4)
    return NetnsRogue(net.name, net.host_if, work)


def refusals(rig: Rig, job_id: int) -> dict[str, int]:
    row = next(r for r in rig.controller.job_stats() if r["job"] == job_id)
    return {k: int(v) for k, v in row.items()  # type: ignore[call-overload]
            if k.startswith("drop_") and v}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Mode.UDP, pytest.param(Mode.NETNS, marks=pytest.mark.privileged)],
                         ids=["udp", "netns"])
def test_hosts_outside_a_job_change_and_see_nothing(mode: Mode, tmp_path: Path) -> None:
    if mode is Mode.NETNS and privileged_skip_reason():
        pytest.skip(privileged_skip_reason() or "")
    cfg = RigConfig(tmp_path / "rig", workers=4, k=K, mode=mode, bystanders=1, pcap=True,
                    slots=SLOTS, timeout=30)
    with Rig(cfg) as rig:
        ja = rig.start_job(synthetic_inputs(2, (ELEMENTS,), seed=1), ranks=(0, 1))
        jb = rig.start_job(synthetic_inputs(2, (ELEMENTS,), seed=2), ranks=(2, 3))
        oa, ob = rig.wait_job(ja), rig.wait_job(jb)
        assert oa.ok and ob.ok, (oa.problems, ob.problems, [w.error for w in oa.workers])
        a, b = oa.job_id, ob.job_id
        captured = captured_data(rig.pcap_in("h1"), a, want=USES)
        assert len(captured) >= USES

        # 1. after A finished: a duplicate from a member would draw the stored result
        rogue = rogue_at(rig, "h5", tmp_path / "r1")
        rogue.start(captured, 0.5)
        sent, got = rogue.wait()
        assert sent == len(captured)
        assert not [f for f in got if is_netsum(f)], "the rogue received netsum packets"
        assert refusals(rig, a) == {"drop_non_member": sent}

        # 2. A again, with the rogue replaying into the running rounds
        xa = synthetic_inputs(2, (ELEMENTS,), seed=3)
        ja = rig.start_job(xa, job_id=a)
        rogue = rogue_at(rig, "h5", tmp_path / "r2")
        rogue.start(captured * 3, 3.0)
        sent, got = rogue.wait()
        oa = rig.wait_job(ja)
        assert all(w.ok for w in oa.workers), [w.error for w in oa.workers]
        assert oa.problems == (f"switch s1: refused drop_non_member {sent}",)
        assert not [f for f in got if is_netsum(f)], "the rogue received netsum packets"

        # 3. h1 (a member of A) forges B's id and slots beyond A's range, while B runs again
        jb = rig.start_job(synthetic_inputs(2, (ELEMENTS,), seed=4), job_id=b)
        forged_b = [with_field(f, "job_id", b) for f in captured]
        forged_slots = [with_field(f, "slot", SLOTS + i % SLOTS) for i, f in enumerate(captured)]
        forger = rogue_at(rig, "h1", tmp_path / "r3")
        forger.start([f for pair in zip(forged_b, forged_slots) for f in pair], 3.0)
        sent, got = forger.wait()
        ob = rig.wait_job(jb)
        assert all(w.ok for w in ob.workers), [w.error for w in ob.workers]
        assert sent == 2 * len(captured)
        assert ob.problems == (f"switch s1: refused drop_non_member {len(forged_b)}",)
        assert refusals(rig, a) == {"drop_non_member": oa_refused(oa),
                                    "drop_bad_slot": len(forged_slots)}

        # 4. UDP tier: the right frames from the wrong address
        if mode is Mode.UDP:
            before = switch_stats(rig.grpc_addrs["s1"])["stats"]
            stranger = UdpRogue(("127.0.0.1", 0), ("127.0.0.1", rig.port_udp["h1"]))
            stranger.start(captured, 0.3)
            sent, got = stranger.wait()
            after = assert_switch_clean(rig.grpc_addrs["s1"], udp_foreign=sent)
            assert not got
            assert after["rx_packets"] == before["rx_packets"]     # never reached the program
        else:
            assert_switch_clean(rig.grpc_addrs["s1"])


def oa_refused(outcome: object) -> int:
    """The drop_non_member count a job's outcome reported (step 2's replays)."""
    (line,) = outcome.problems  # type: ignore[attr-defined]
    return int(line.rsplit(" ", 1)[1])
