"""controller/leases.py without a switch: the lease's encoding, and when a lease holds its job
(the owner seen running, seen gone, or out of sight and judged by the expiry)."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from netsum.controller.errors import ControllerError
from netsum.controller.leases import LEASE_PREFIX, Lease, Owner

NOW = 1_800_000_000.0


def lease(owner: Owner | None = None, expires: float = NOW + 60) -> Lease:
    return Lease("r1", owner or Owner.this_process(), expires, 60.0, {"hosts": ["h1", "h2"]})


def exited_owner() -> Owner:
    """A process of this machine that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "import os; print(os.getpid())"],
                             stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=60)
    return replace(Owner.this_process(), pid=int(out))


def test_a_lease_travels_as_the_job_entry_metadata() -> None:
    x = lease()
    data = x.encode()
    assert data.startswith(LEASE_PREFIX) and len(data) < 400
    assert Lease.decode(data) == x
    for other in (b"", b"reclaimed 2026: ...", LEASE_PREFIX + b"{not json",
                  LEASE_PREFIX + b'{"run": "r1"}', LEASE_PREFIX + b"[]"):
        assert Lease.decode(other) is None


def test_this_process_runs() -> None:
    me = Owner.this_process()
    assert me.pid == os.getpid() and me.start > 0 and me.alive() is True
    assert lease().dead(NOW) is None
    assert lease(expires=NOW - 1000).dead(NOW) is None     # seen running: kept past expiry


def test_an_exited_owner_loses_its_jobs_at_once() -> None:
    gone = exited_owner()
    assert gone.alive() is False
    why = lease(gone).dead(NOW)                              # before the expiry
    assert why is not None and f"pid {gone.pid}" in why and "has exited" in why


def test_a_reused_pid_does_not_pass_for_the_owner() -> None:
    me = Owner.this_process()
    impostor = replace(me, start=me.start - 1)               # same pid, another start
    assert impostor.alive() is False
    assert "the pid is reused" in (lease(impostor).dead(NOW) or "")


@pytest.mark.parametrize("change", [{"boot": "another-boot-id"}, {"host": "elsewhere"},
                                    {"pidns": 1}])
def test_an_owner_out_of_sight_is_judged_by_the_expiry(change: dict[str, object]) -> None:
    # Another machine, or a container with its own pid namespace: its pid means nothing here,
    # even a pid that exists (this process's) or one that does not.
    for base in (Owner.this_process(), exited_owner()):
        far = replace(base, **change)  # type: ignore[arg-type]
        assert far.alive() is None
        assert lease(far, expires=NOW + 1).dead(NOW) is None
        why = lease(far, expires=NOW - 2.5).dead(NOW)
        assert why is not None and "expired 2.5 s ago" in why and "run r1" in why


def test_renewal_moves_the_expiry_only() -> None:
    x = lease()
    y = x.renewed(clock=lambda: NOW + 100)
    assert y.expires == NOW + 160 and replace(y, expires=x.expires) == x


@pytest.mark.parametrize("ttl", [0.0, 1.0, float("nan"), 1e999])
def test_a_ttl_a_heartbeat_cannot_keep(ttl: float) -> None:
    with pytest.raises(ControllerError, match="lease ttl"):
        Lease.new(ttl=ttl)


def test_a_job_whose_member_host_another_run_holds_is_dead() -> None:
    """Rule 3: the caller's run holds a member host's address, so the job lost that member for
    good -- even with its owner alive here and its lease far from expiring."""
    from types import SimpleNamespace

    from netsum.controller import program as P
    from netsum.controller.leases import dead_jobs

    def job(workers: tuple[str, ...], metadata: bytes) -> SimpleNamespace:
        entry = SimpleNamespace(table=P.JOB, metadata=metadata)
        return SimpleNamespace(spec=SimpleNamespace(workers=workers),
                               plans=[SimpleNamespace(entries=[entry])])

    live = lease().encode()
    ctl = SimpleNamespace(jobs={1: job(("h1", "h2"), live), 2: job(("h3", "h4"), live),
                                3: job(("h1", "h2"), b"")})
    assert dead_jobs(ctl, NOW) == {}                       # type: ignore[arg-type]
    dead = dead_jobs(ctl, NOW, held={"h2", "h9"})          # type: ignore[arg-type]
    assert list(dead) == [1] and "h2 is now held by another run" in dead[1]
