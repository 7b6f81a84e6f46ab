"""netsum.workers.core loss recovery on the virtual clock: fast retransmit on a gap in the results
(not on a same-burst reordering), its statistics and validation, and the whole job under
random loss through the oracle against the timer-only scheme with the old window floor."""
from __future__ import annotations

import numpy as np
import pytest
from checks import assert_sum_of_inputs
from oracle import LossyLink, Network, OracleSwitch

from netsum.wire import Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import JobConfig, Retransmitted, Timing, WorkerCore

#: The K of every job here, given explicitly (not the default): the sizes are counted in
#: blocks of 32 (32 blocks on 8 slots; 16Ki elements on a 256-slot window).
K = 32
FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)


def result_for(data: bytes) -> bytes:
    pkt = wire.decode(data, K)
    h = pkt.header
    head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id, round=h.round,
                       slot=h.slot, exp=h.exp, count=1, offset=h.offset)
    return wire.encode(head, pkt.values, K)


def lose_first(timing: Timing) -> tuple[WorkerCore, list[bytes], list[bytes]]:
    """One worker, 8 slots, 32 blocks, window open: every bootstrap goes out at t=0.  The
    first one is lost; the other 7 are answered at 1 ms, their next uses at 2 ms.  Returns
    the core, what it sent at 1 ms and what at 2 ms."""
    core = WorkerCore(np.ones(32 * K, np.float32), JobConfig(5, 1, 8, K), timing)
    boot = list(core.start(0.0).send)
    assert len(boot) == 8
    at_1ms: list[bytes] = []
    for pkt in boot[1:]:
        at_1ms += core.receive(result_for(pkt), 0.001).send
    at_2ms: list[bytes] = []
    for pkt in list(at_1ms):
        if wire.decode(pkt, K).header.slot != 0:
            at_2ms += core.receive(result_for(pkt), 0.002).send
    return core, at_1ms, at_2ms


def retx_of_slot0(sent: list[bytes]) -> list[bytes]:
    return [p for p in sent if p[1] & Flags.RETX and wire.decode(p, K).header.slot == 0]


def test_a_gap_resends_the_oldest_before_its_timer() -> None:
    core, at_1ms, at_2ms = lose_first(FAST)
    # Same burst: results of packets sent together may come back in any order - no resend.
    assert retx_of_slot0(at_1ms) == []
    # Results of packets sent 1 ms after it: slot 0's bootstrap is lost.  Long before the
    # 5 ms timer, it goes again, flagged, once.
    again = retx_of_slot0(at_2ms)
    assert len(again) == 1
    assert wire.decode(again[0], K).header.offset == 0     # the bootstrap of block 0
    st = core.stats()
    assert st.retransmissions == st.fast_retransmissions == 1
    # Its timer restarts from now without backoff; nothing is due before it.
    deadline = core.next_deadline()
    assert deadline is not None and 0.002 < deadline <= 0.002 + FAST.rto_initial + 1e-9
    assert core.tick(0.0025).send == ()


def test_without_fast_retransmit_the_loss_waits_for_the_timer() -> None:
    core, at_1ms, at_2ms = lose_first(Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1,
                                             progress_deadline=2.0, fast_retransmit=0))
    assert retx_of_slot0(at_1ms + at_2ms) == []
    assert core.stats().retransmissions == 0
    step = core.tick(0.005)
    assert len(retx_of_slot0(list(step.send))) == 1
    assert [e for e in step.events if isinstance(e, Retransmitted)][0].fast is False


def test_fast_retransmit_event_says_fast() -> None:
    core = WorkerCore(np.ones(32 * K, np.float32), JobConfig(5, 1, 8, K), FAST)
    boot = list(core.start(0.0).send)
    nxt: list[bytes] = []
    for pkt in boot[1:]:
        nxt += core.receive(result_for(pkt), 0.001).send
    events = []
    for pkt in nxt:
        events += core.receive(result_for(pkt), 0.002).events
    fast = [e for e in events if isinstance(e, Retransmitted)]
    assert len(fast) == 1 and fast[0].fast and fast[0].slot == 0 and fast[0].attempt == 1


@pytest.mark.parametrize("value", [-1, True, 1.5])
def test_bad_fast_retransmit(value: object) -> None:
    with pytest.raises(ValueError, match="fast_retransmit"):
        Timing(fast_retransmit=value)  # type: ignore[arg-type]


def lossy_job(loss: float, timing: Timing, seed: int = 3) -> tuple[float, int]:
    """4 workers, 256 slots, 16k elements through the oracle with `loss` on every link in
    both directions (no reordering, as on the rig): the slowest worker's virtual time and the
    retransmissions.  Checks every sum exactly."""
    n, slots = 4, 256
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=K, members={5: list(range(n))}, num_slots={5: slots})
    net = Network(switch, LossyLink(rng, loss=loss, fifo=True), LossyLink(rng, loss=loss))
    xs = [np.random.default_rng([seed, r]).standard_normal(16_384).astype(np.float32)
          for r in range(n)]
    job = JobConfig(5, n, slots, K)
    cores = {i: WorkerCore(xs[i], job, timing) for i in range(n)}
    net.run(cores)
    assert_sum_of_inputs([c.result() for c in cores.values()], xs, K)
    return (max(c.stats().elapsed for c in cores.values()),
            sum(c.stats().retransmissions for c in cores.values()))


OLD = Timing(fast_retransmit=0, window_min=2)   # the timer-only scheme this replaced


@pytest.mark.parametrize("loss, speedup", [(0.01, 2.0), (0.05, 20.0), (0.10, 20.0)])
def test_random_loss_costs_round_trips_not_timeouts(loss: float, speedup: float) -> None:
    new_time, new_retx = lossy_job(loss, Timing())
    old_time, old_retx = lossy_job(loss, OLD)
    assert new_time * speedup < old_time, (new_time, old_time)
    assert new_retx <= old_retx, (new_retx, old_retx)


def test_no_loss_no_retransmission() -> None:
    elapsed, retx = lossy_job(0.0, Timing())
    assert retx == 0 and elapsed < 0.05


@pytest.mark.parametrize("args, message", [
    (["--fast-retransmit", "-1"], "fast_retransmit >= 0"),
    (["--rto-min", "0.2"], "rto_min <= rto_initial"),
    (["--window-min", "0"], "window_min"),
])
def test_cli_timing_options_are_checked(args: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from netsum.workers import cli
    code = cli.main(["--job", "1", "--workers", "2", "--slots", "4", "--size", "8",
                     "--udp", "127.0.0.1", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_timing_options_reach_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    from netsum.workers import cli
    seen: list[Timing] = []

    class Stop(Exception):
        pass

    def fake_transport(a: object) -> object:
        raise Stop

    monkeypatch.setattr(cli, "Timing", lambda **kw: seen.append(Timing(**kw)) or seen[-1])
    monkeypatch.setattr(cli, "_transport", fake_transport)
    with pytest.raises(Stop):
        cli.run(cli.build_parser().parse_args(
            ["--job", "1", "--workers", "2", "--slots", "4", "--size", "8", "--udp", "x",
             "--fast-retransmit", "5", "--rto-min", "0.01", "--window-min", "4",
             "--all-timers"]))
    assert (seen[0].fast_retransmit, seen[0].rto_min, seen[0].window_min) == (5, 0.01, 4)
    assert seen[0].hold_timers is False
