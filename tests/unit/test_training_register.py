"""A training job's registration (netsum.training.register) up to the controller, and the step
time split (netsum.training.stepsplit).  The controller part runs against a real switch in
tests/e2e/test_training.py."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from netsum.controller.topology import parse_topology
from netsum.controller.program import built_k as switch_k
from netsum.training.register import (RegistrationError, StoreRendezvous, env_k, host_for_rank,
                                      per_rank, register)
from netsum.training.stepsplit import split_step, union_length

TOPO = """
switches:
  - {name: s1, grpc_addr: "127.0.0.1:1", device_id: 0, ports: [1, 2, 3],
     service: {mac: "02:00:00:00:01:00", ipv4: 10.0.0.254}, slots: 64}
hosts:
  - {name: h1, mac: "02:00:00:00:00:01", ipv4: 10.0.0.1, switch: s1, port: 1}
  - {name: h2, mac: "02:00:00:00:00:02", ipv4: 10.0.0.2, switch: s1, port: 2}
  - {name: h3, mac: "02:00:00:00:00:03", ipv4: 10.0.0.3, switch: s1, port: 3}
"""


class WaitingStore:
    """A key-value store whose get() waits for the key, as torch's TCPStore does."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.cond = threading.Condition()

    def set(self, key: str, value: str) -> None:
        with self.cond:
            self.data[key] = value.encode()
            self.cond.notify_all()

    def get(self, key: str) -> bytes:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.data, timeout=10):
                raise TimeoutError(key)
            return self.data[key]


def on_ranks(world: int, fn) -> list[object]:  # type: ignore[no-untyped-def]
    out: list[object] = [None] * world

    def run(r: int) -> None:
        try:
            out[r] = fn(r)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[r] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return out


def test_store_rendezvous_gathers_to_rank_zero_and_broadcasts_its_answer() -> None:
    store = WaitingStore()

    def rank(r: int) -> tuple[list[str] | None, str]:
        rv = StoreRendezvous(store, r, 3)
        got = rv.gather(f"from {r}")
        return got, rv.broadcast("answer" if r == 0 else None)

    out = on_ranks(3, rank)
    assert out[0] == (["from 0", "from 1", "from 2"], "answer")
    assert out[1] == (None, "answer") and out[2] == (None, "answer")


def test_host_for_rank_rules() -> None:
    topo = parse_topology(TOPO)
    assert host_for_rank(topo, 0, {"NETSUM_HOST": "h3", "NETSUM_FRAMES": "x"}).name == "h3"
    assert host_for_rank(topo, 1, {"NETSUM_FRAMES": "127.0.0.1:1"}).name == "h2"
    with pytest.raises(RegistrationError, match="NETSUM_HOST='h9' is not a host"):
        host_for_rank(topo, 0, {"NETSUM_HOST": "h9"})
    with pytest.raises(RegistrationError, match="rank 3 has no host"):
        host_for_rank(topo, 3, {"NETSUM_FRAMES": "127.0.0.1:1"})


def test_comma_lists_give_each_local_rank_its_own_value() -> None:
    topo = parse_topology(TOPO)
    env = {"NETSUM_HOST": "h3, h1", "NETSUM_FRAMES": "127.0.0.1:1,127.0.0.1:2"}
    assert host_for_rank(topo, 0, {**env, "LOCAL_RANK": "0"}).name == "h3"
    assert host_for_rank(topo, 5, {**env, "LOCAL_RANK": "1"}).name == "h1"
    assert per_rank({**env, "LOCAL_RANK": "1"}, "NETSUM_FRAMES") == "127.0.0.1:2"
    assert per_rank({"NETSUM_FRAMES_BIND": "127.0.0.1:9"}, "NETSUM_FRAMES_BIND") == "127.0.0.1:9"
    assert per_rank({}, "NETSUM_NETNS") is None
    with pytest.raises(RegistrationError, match="NETSUM_HOST lists 2 values; LOCAL_RANK 2"):
        host_for_rank(topo, 2, {**env, "LOCAL_RANK": "2"})


def test_a_rank_problem_reaches_every_rank_before_the_switch_is_touched(tmp_path: Path) -> None:
    """The topology's switch address is unreachable on purpose: reaching the controller would
    fail differently, so the message proves rank 0 stopped at the rank's problem."""
    path = tmp_path / "topo.yaml"
    path.write_text(TOPO)
    store = WaitingStore()
    envs = [{"NETSUM_HOST": "h1"}, {"NETSUM_HOST": "nope"}]
    out = on_ranks(2, lambda r: register(StoreRendezvous(store, r, 2), r, 2, path, envs[r]))
    for got in out:
        assert isinstance(got, RegistrationError)
        assert "rank 1: NETSUM_HOST='nope' is not a host" in str(got)


def test_two_ranks_on_one_host_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text(TOPO)
    store = WaitingStore()
    out = on_ranks(2, lambda r: register(StoreRendezvous(store, r, 2), r, 2, path,
                                         {"NETSUM_HOST": "h2"}))
    assert all(isinstance(o, RegistrationError) and "ranks share hosts ['h2']" in str(o)
               for o in out)


def test_bad_lane_counts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RegistrationError, match="lanes"):
        register(StoreRendezvous(WaitingStore(), 0, 1), 0, 1, tmp_path, {}, lanes=0)


@pytest.mark.parametrize(("spans", "length"), [
    ([], 0.0), ([(0, 1)], 1.0), ([(0, 1), (2, 3)], 2.0), ([(0, 2), (1, 3)], 3.0),
    ([(0, 5), (1, 2)], 5.0), ([(3, 4), (0, 1), (0.5, 3.5)], 4.0)])
def test_union_length(spans: list[tuple[float, float]], length: float) -> None:
    assert union_length(spans) == pytest.approx(length)


def test_split_step_by_hand() -> None:
    # Step 0..10; buckets busy 2..5 and 4..9; backward returned at 9 after the last hand-over
    # at 4: 5 s exposed, 7 s of communication of which 2 s ran under backward.
    sp = split_step(0.0, 9.0, 10.0, [(2.0, 5.0), (4.0, 9.0)])
    assert (sp.wall, sp.compute, sp.exposed, sp.comm, sp.hidden) == (10.0, 5.0, 5.0, 7.0, 2.0)
    assert sp.hidden_fraction == pytest.approx(2 / 7)
    assert split_step(0.0, 1.0, 2.0, []).compute == 2.0


def _registers(path: Path) -> list[str]:
    from netsum.p4rt.schema import load_p4info
    return [r.preamble.name for r in load_p4info(path).registers]


@pytest.mark.parametrize("k", [32, 64, 128, 256])
def test_switch_k_reads_the_build_from_real_p4cs_p4info(k: int) -> None:
    """The committed outputs of real p4c (tests/fixtures/p4c), one per -DNETSUM_K."""
    fixture = Path(__file__).parent.parent / "fixtures" / "p4c" / "netsum"
    assert switch_k(_registers(fixture / f"netsum_k{k}.p4info.txtpb")) == k
    assert switch_k(["NetsumIngress.job_counter", "valid", "interval9"]) is None


def test_netsum_k_comes_from_the_environment_and_must_be_supported() -> None:
    assert env_k({}) == 256
    assert env_k({"NETSUM_K": "1024"}) == 1024
    with pytest.raises(RegistrationError, match="NETSUM_K=300: values per packet must be one"):
        env_k({"NETSUM_K": "300"})
    with pytest.raises(RegistrationError, match="NETSUM_K='big' is not an integer"):
        env_k({"NETSUM_K": "big"})


def test_ranks_with_different_k_are_refused_before_the_switch_is_touched(tmp_path: Path) -> None:
    """As for a rank's problem: the switch address is unreachable, so the message proves rank
    0 stopped at the disagreement, and every rank hears it."""
    path = tmp_path / "topo.yaml"
    path.write_text(TOPO)
    store = WaitingStore()
    envs = [{"NETSUM_HOST": "h1", "NETSUM_K": "1024"}, {"NETSUM_HOST": "h2"}]
    out = on_ranks(2, lambda r: register(StoreRendezvous(store, r, 2), r, 2, path, envs[r]))
    for got in out:
        assert isinstance(got, RegistrationError), got
        assert "ranks disagree on values per packet (NETSUM_K): rank 0 K=1024, rank 1 K=256" \
            in str(got)


def test_a_rank_with_an_unsupported_k_is_refused_on_every_rank(tmp_path: Path) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text(TOPO)
    store = WaitingStore()
    envs = [{"NETSUM_HOST": "h1"}, {"NETSUM_HOST": "h2", "NETSUM_K": "300"}]
    out = on_ranks(2, lambda r: register(StoreRendezvous(store, r, 2), r, 2, path, envs[r]))
    for got in out:
        assert isinstance(got, RegistrationError), got
        assert "rank 1: NETSUM_K=300: values per packet must be one of" in str(got)
