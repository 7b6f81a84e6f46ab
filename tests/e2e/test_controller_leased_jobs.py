"""Leased jobs on an embedded switch over real gRPC (issue 22, point 5: a crashed run's jobs
never stop the next run).

Runs are real processes (`RUN`): each reclaims the dead leases it finds, creates its jobs with
its own lease, starts the heartbeat and says so; the test SIGKILLs it there.  Each run takes 2
jobs of 128 slots of the switch's 1024: without the reclaim the fifth run already finds the
pool full (on main 315630c training registrations failed after four crashes); with it, the
sixth run starts, sums exactly through the switch, and releases its jobs on SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from test_controller_fabric import (data_frame, netsum_program, switches,  # noqa: F401
                                    topology, vec)
from test_controller_setup import assert_results_to_h1_h2, run_ctl
from netsum.controller.fabric import Controller
from netsum.controller.leases import (Heartbeat, Lease, Owner, create_leased, lease_of,
                                      reclaim_dead)
from netsum.controller.topology import JobSpec, parse_topology
from netsum.controller.watchdog import reclaim
from netsum.p4rt.client import Endpoint, SwitchClient

ROOT = Path(__file__).resolve().parents[2]

#: One run: argv = topology path.  Prints one JSON line once its jobs are leased and its
#: heartbeat runs, then waits; SIGTERM releases its jobs (a clean end), SIGKILL is a crash.
RUN = """
import json, signal, sys, threading
from netsum.controller.fabric import Controller
from netsum.controller.leases import Heartbeat, Lease, create_leased, reclaim_dead, release
from netsum.controller.topology import JobSpec, load_topology
topo = load_topology(sys.argv[1])
lease = Lease.new(ttl=30.0, info={"hosts": ["h1", "h2"]})
with Controller(topo, timeout=60) as ctl:
    ctl.connect()
    ctl.adopt()
    gone = [r.line() for r in reclaim_dead(ctl)]
    free = [j for j in range(1, 256) if j not in ctl.jobs][:2]
    jobs = create_leased(ctl, [JobSpec(j, ("h1", "h2"), 128) for j in free], lease)
beat = Heartbeat(topo, jobs, lease).start()
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
print(json.dumps({"run": lease.run, "jobs": [j.spec.id for j in jobs],
                  "slots": [str(p.slots) for j in jobs for p in j.plans], "reclaimed": gone}),
      flush=True)
done.wait()
beat.stop()
print(json.dumps({"released": release(topo, [j.spec.id for j in jobs], lease.run)}), flush=True)
"""


def start_run(topo: Path) -> tuple[subprocess.Popen[str], dict]:
    p = subprocess.Popen([sys.executable, "-c", RUN, str(topo)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line:
        p.wait(30)
        pytest.fail(f"the run failed to start: {p.stderr.read() if p.stderr else ''}")
    return p, json.loads(line)


def controller(topo: Path) -> Controller:
    ctl = Controller(parse_topology(topo.read_text(), str(topo)), timeout=60)
    ctl.connect()
    ctl.adopt()
    return ctl


@pytest.mark.slow
def test_five_crashed_runs_do_not_stop_a_sixth(netsum_program, switches,  # noqa: F811
                                               tmp_path: Path) -> None:
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    rc, _, err = run_ctl(topo_path, "setup", "--p4info", str(info), str(js))
    assert rc == 0, err
    # The file's own jobs (1: 512 slots, 2: 256) have no lease and stay; 256 slots are left,
    # one run's worth: without the reclaim the second run already finds the pool full.
    before: list[str] = []
    for n in range(5):
        proc, got = start_run(topo_path)
        assert len(got["jobs"]) == 2, got
        # Each run found the previous run's jobs dead (its owner SIGKILLed) and reclaimed them.
        assert len(got["reclaimed"]) == (0 if n == 0 else 2), got
        assert all("has exited" in line for line in got["reclaimed"]), got
        assert all(f"run {before[-1]}" in line for line in got["reclaimed"]) if before else True
        before.append(got["run"])
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert proc.stdout is not None and proc.stdout.read() == ""   # no clean-up ran
    # The fifth crash left its jobs: the switch holds them, leased to a process gone.
    with controller(topo_path) as ctl:
        leased = {j: lease_of(job) for j, job in ctl.jobs.items()}
        mine = [j for j, x in leased.items() if x is not None]
        assert len(mine) == 2 and all(leased[j].run == before[-1] for j in mine)  # type: ignore[union-attr]
        assert sorted(j for j, x in leased.items() if x is None) == [1, 2]
    # What an operator sees, and reclaims by hand (the next run would do it as well).
    rows = json.loads(run_ctl(topo_path, "job", "list", "--json")[1])["jobs"]
    assert [r["lease"].startswith(f"run {before[-1]}, pid ") for r in rows] == \
        [False, False, True, True]
    rc, out, err = run_ctl(topo_path, "job", "reap", "--json")
    assert rc == 0 and sorted(r["reclaimed"] for r in json.loads(out)) == sorted(mine), err
    assert json.loads(run_ctl(topo_path, "job", "reap", "--json")[1]) == []

    sixth, got = start_run(topo_path)
    try:
        assert got["reclaimed"] == [] and got["slots"] == ["768..895", "896..1023"], got
        # It sums through the switch: h1's and h2's contributions to slot 3 of its first job.
        topo = parse_topology(topo_path.read_text())
        dev = switches["s1"].dev
        job = got["jobs"][0]
        port, f = data_frame(topo, "h1", job, 3, vec(4), workers=2)
        assert dev.process(port, f) == []
        port, f = data_frame(topo, "h2", job, 3, vec(7), workers=2)
        assert_results_to_h1_h2(dev.process(port, f), vec(4) + vec(7))
    finally:
        sixth.send_signal(signal.SIGTERM)
        out, err = sixth.communicate(timeout=60)
    assert json.loads(out)["released"] == got["jobs"], err
    with controller(topo_path) as ctl:
        assert sorted(ctl.jobs) == [1, 2]           # the file's jobs, untouched throughout


@pytest.mark.slow
def test_renewal_expiry_and_a_lost_job(netsum_program, switches, tmp_path: Path) -> None:
    """In one process, step by step: a renewal moves the expiry on every switch of a tree; a
    lease of an owner out of sight (another machine) is reclaimed only once expired; a job
    reclaimed and created again by another run under the same id is reported lost and not
    touched by the first run's renewals."""
    info, js = netsum_program
    topo_path = topology("tree.yaml", switches, tmp_path)
    rc, _, err = run_ctl(topo_path, "setup", "--p4info", str(info), str(js))
    assert rc == 0, err
    topo = parse_topology(topo_path.read_text(), str(topo_path))
    mine = Lease.new(ttl=30.0)
    with controller(topo_path) as ctl:
        jobs = create_leased(ctl, [JobSpec(7, ("h1", "h3"), 16)], mine)
    assert {p.switch for p in jobs[0].plans} == {"leaf1", "leaf2", "root"}
    beat = Heartbeat(topo, jobs, mine)
    first = mine.expires
    time.sleep(0.01)
    beat.beat()
    assert beat.renewals == 1 and beat.lost == [] and beat.lease.expires > first
    with controller(topo_path) as ctl:
        on_switches = [Lease.decode(e.metadata) for p in ctl.jobs[7].plans for e in p.entries
                       if e.metadata]
        assert len(on_switches) == 3 and all(x == beat.lease for x in on_switches)

    # Another machine's run: its owner cannot be seen from here, so only the expiry counts.
    far = Lease("far", Owner("elsewhere", "other-boot", 1, 4242, 99),
                time.time() + 30, 30.0)
    with controller(topo_path) as ctl:
        create_leased(ctl, [JobSpec(8, ("h2", "h4"), 16)], far)
        assert reclaim_dead(ctl) == []
        gone = reclaim_dead(ctl, now=far.expires + 1)
        assert [(r.job_id, "the lease of run far expired 1.0 s ago" in r.why) for r in gone] == \
            [(8, True)]

    # Job 7 reclaimed (say, by `job fail`) and made again by run "other": ours is lost.
    other = Lease.new(run="other", ttl=30.0)
    with controller(topo_path) as ctl:
        reclaim(ctl, 7, "reported failed")
        create_leased(ctl, [JobSpec(7, ("h1", "h3"), 16)], other)
    beat.beat()
    assert beat.lost == [7]
    with controller(topo_path) as ctl:
        assert lease_of(ctl.jobs[7]) == other        # untouched by run mine's renewal


def test_sessions_with_one_election_id_take_turns(netsum_program, switches,  # noqa: F811
                                                  tmp_path: Path) -> None:
    """A renewal (or registration) while another short session holds the topology's election
    id waits for it instead of failing (main: 'refused arbitration ... already exists')."""
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    rc, _, err = run_ctl(topo_path, "pipeline", "push", "--p4info", str(info), str(js))
    assert rc == 0, err
    addr = parse_topology(topo_path.read_text()).switches[0].grpc_addr
    first = SwitchClient(Endpoint(addr, 0, (0, 1)), 30)
    first.connect()
    threading.Timer(1.0, first.close).start()
    second = SwitchClient(Endpoint(addr, 0, (0, 1)), 30)
    started = time.monotonic()
    second.connect()
    try:
        assert second.is_primary and time.monotonic() - started >= 0.5
    finally:
        second.close()
    # With nobody giving the id back, the wait ends at the timeout with the switch's reason.
    first.connect()
    try:
        third = SwitchClient(Endpoint(addr, 0, (0, 1)), 1.0)
        with pytest.raises(Exception, match="already exists"):
            third.connect()
    finally:
        first.close()
