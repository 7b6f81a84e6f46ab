"""All-reduce end to end, privileged tier: workers in network namespaces use kernel UDP sockets
over veth pairs; the switch daemon runs on the veths' root ends as AF_PACKET ports.  Checks the
results within the quantization bound and that clean-up leaves no namespace or interface."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import started_rigs
from netsum.netns import netns_available
from netsum.rig import JobOutcome, Mode, Rig, RigConfig
from netsum.tensors import synthetic_inputs
from netsum.wire import K_DEFAULT

K = K_DEFAULT
pytestmark = pytest.mark.privileged


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_names() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def assert_exact(out: JobOutcome) -> None:
    for w in out.workers:
        assert w.ok, f"worker {w.rank}: {w.error}"
        assert w.error_ratio <= 1.0 and w.packets_sent > 0


@pytest.fixture(scope="module")
def rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Rig]]:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with started_rigs((2, 4), lambda n: tmp_path_factory.mktemp(f"nsrig{n}"),
                      mode=Mode.NETNS, slots=64, timeout=10) as made:
        yield made


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("shape", [(1,), (K,), (K + 1,), (20_000,)],
                         ids=["one-element", "one-packet", "one-packet-plus-1", "multi-packet"])
def test_allreduce_over_veth(privileged: None, rigs: dict[int, Rig], workers: int,
                             shape: tuple[int, ...]) -> None:
    out = rigs[workers].run_job(synthetic_inputs(workers, shape, seed=workers))
    assert_exact(out)


def test_five_percent_loss_over_veth(privileged: None, tmp_path: Path) -> None:
    with Rig(RigConfig(tmp_path, workers=4, mode=Mode.NETNS, slots=64, loss=0.05,
                       timeout=10)) as rig:
        out = rig.run_job(synthetic_inputs(4, (20_000,), seed=2))
    assert_exact(out)
    assert sum(w.retransmissions for w in out.workers) > 0


def test_cleanup_removes_namespaces_and_interfaces(privileged: None, tmp_path: Path) -> None:
    before_ns, before_links = netns_names(), link_names()
    rig = Rig(RigConfig(tmp_path, workers=2, mode=Mode.NETNS, slots=32))
    rig.start()
    assert rig.lab is not None
    made_ns = {h.name for h in rig.lab.hosts}
    made_links = {h.switch_if for h in rig.lab.hosts}
    tag = rig.lab.tag
    assert made_ns <= netns_names() and made_links <= link_names()
    job = rig.start_job(synthetic_inputs(2, (300_000,), seed=1))
    rig.close()  # mid-job, as on Ctrl-C
    assert all(c.popen.poll() is not None for c in job.children)
    assert not made_ns & netns_names()
    assert not made_links & link_names()
    # Nothing else of this run's either (its names carry the lab's tag); other runs on the
    # machine may come and go meanwhile, so the check is on this run's names only.
    ours = {n for n in netns_names() - before_ns if n.startswith(f"ns{tag}")}
    ours |= {n for n in link_names() - before_links if n.startswith(f"n{tag}")}
    assert not ours
