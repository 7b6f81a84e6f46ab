"""All-reduce through a two-level tree (SHARP style), unprivileged: one root and 2-3 leaf
netsum-switch daemons joined by UDP-tunnel links, the same netsum.p4 in both roles, configured
by the controller; real netsum-worker processes on the leaves.  Also the layout plan itself."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from netsum.rig import Mode, Rig, RigConfig, RigError
from netsum.rigtopo import plan_layout, topology_doc
from netsum.tensors import synthetic_inputs
from netsum.wire import K_DEFAULT

K = K_DEFAULT


@pytest.mark.parametrize("workers,leaves,expect", [
    (1, 0, {"s1": [1]}),
    (4, 0, {"s1": [1, 2, 3, 4]}),
    (4, 2, {"leaf1": [1, 2], "leaf2": [1, 2]}),
    (5, 2, {"leaf1": [1, 2, 3], "leaf2": [1, 2]}),
    (3, 3, {"leaf1": [1], "leaf2": [1], "leaf3": [1]}),
])
def test_layout(workers: int, leaves: int, expect: dict[str, list[int]]) -> None:
    layout = plan_layout(workers, leaves)
    got: dict[str, list[int]] = {}
    for h in layout.hosts:
        got.setdefault(h.switch, []).append(h.port)
    assert got == expect
    assert len({h.ipv4 for h in layout.hosts}) == workers
    assert len({s.service_ip for s in layout.switches}) == len(layout.switches)
    if leaves:
        root = layout.switch("root")
        assert [p for p, _, _ in root.links] == list(range(1, leaves + 1))
        for leaf in layout.switches[1:]:
            (uplink, peer, peer_port), = leaf.links
            assert peer == "root" and uplink == max(leaf.ports)
            assert (peer_port, leaf.name, uplink) in root.links


def test_layout_is_a_valid_topology_file() -> None:
    from netsum.controller.topology import parse_topology
    import yaml
    layout = plan_layout(5, 2)
    addrs = {s.name: f"127.0.0.1:{9000 + i}" for i, s in enumerate(layout.switches)}
    topo = parse_topology(yaml.safe_dump(topology_doc(layout, addrs, 4096)))
    assert {s.name: s.role.value for s in topo.switches} == \
        {"root": "root", "leaf1": "leaf", "leaf2": "leaf"}
    assert len(topo.links) == 2


@pytest.mark.parametrize("kwargs,match", [
    ({"workers": 4, "leaves": 1}, "leaves must be"),
    ({"workers": 2, "leaves": 3}, "leaves must be"),
    ({"workers": 4, "leaves": 2, "mode": Mode.NETNS}, "mode udp"),
])
def test_bad_tree_config(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(RigError, match=match):
        RigConfig(tmp_path, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with Rig(RigConfig(tmp_path_factory.mktemp("tree"), workers=5, leaves=2, slots=64,
                       timeout=10)) as rig:
        yield rig


@pytest.mark.parametrize("shape", [(1,), (K + 1,), (20_000,)],
                         ids=["one-element", "one-packet-plus-1", "multi-packet"])
def test_allreduce_through_a_tree(tree: Rig, shape: tuple[int, ...]) -> None:
    out = tree.run_job(synthetic_inputs(5, shape, seed=len(shape) + shape[0]))
    for w in out.workers:
        assert w.ok, f"worker {w.rank}: {w.error}"
    # The leaves really sent partial aggregates up (not the workers' packets forwarded).
    assert out.switch_counters["partials_up"] > 0
    assert len(tree.switches) == 3 and all(c.alive() for c in tree.switches.values())


@pytest.mark.slow
def test_tree_with_loss(tmp_path: Path) -> None:
    with Rig(RigConfig(tmp_path, workers=4, leaves=2, slots=64, loss=0.05, timeout=10)) as rig:
        out = rig.run_job(synthetic_inputs(4, (10_000,), seed=8))
        switches = [c.popen for c in rig.switches.values()]
    for w in out.workers:
        assert w.ok, f"worker {w.rank}: {w.error}"
    assert sum(w.retransmissions for w in out.workers) > 0
    assert all(p.poll() is not None for p in switches)
