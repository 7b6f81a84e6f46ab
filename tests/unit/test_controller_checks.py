"""controller/checks.py: what set-up refuses, decided against the program's P4Info before any
switch is touched.  The program is real p4c's P4Info of p4/netsum.p4 (a committed fixture),
with one limit changed per case, so each refusal comes from what a P4Info can say: counter
sizes, register sizes, table sizes and field widths."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from p4.config.v1 import p4info_pb2

from netsum.controller import program as P
from netsum.controller.checks import check_setup, program_limits
from netsum.controller.errors import TopologyError
from netsum.controller.topology import parse_topology
from netsum.p4rt.schema import Schema, load_p4info

ROOT = Path(__file__).resolve().parents[2]
P4INFO = ROOT / "tests" / "fixtures" / "p4c" / "netsum" / "netsum_k256.p4info.txtpb"


def program(change: Callable[[p4info_pb2.P4Info], None] | None = None) -> Schema:
    info = load_p4info(P4INFO)
    if change is not None:
        change(info)
    return Schema(info)


def table(info: p4info_pb2.P4Info, name: str) -> p4info_pb2.Table:
    return next(t for t in info.tables if t.preamble.name == name)


def counters(size: int) -> Callable[[p4info_pb2.P4Info], None]:
    def change(info: p4info_pb2.P4Info) -> None:
        for c in info.counters:
            if c.size == 256:
                c.size = size
    return change


def single(**change: object) -> str:
    doc = yaml.safe_load((ROOT / "examples" / "single.yaml").read_text())
    doc.update(change)
    return yaml.safe_dump(doc)


def refusal(text: str, schema: Schema) -> str:
    topo = parse_topology(text, "t.yaml")
    with pytest.raises(TopologyError) as info:
        check_setup(topo, schema)
    return str(info.value)


@pytest.mark.parametrize("example", ["single.yaml", "tree.yaml"])
def test_the_examples_fit(example: str) -> None:
    check_setup(parse_topology((ROOT / "examples" / example).read_text()), program())


def test_the_limits_come_from_the_p4info() -> None:
    # p4/netsum.p4's NETSUM_MAX_JOBS 256 and NETSUM_SLOTS 4096, as real p4c declared them.
    assert program_limits(program()) == {"max_job_id": 255, "slot_pool": 4096,
                                         "job_table": 256, "member_table": 8192}
    assert program_limits(program(counters(1024)))["max_job_id"] == 1023


def test_job_ids_beyond_the_counters() -> None:
    jobs = [{"id": 256, "workers": ["h1"], "slots": 1}]
    assert refusal(single(jobs=jobs), program()) == (
        "t.yaml: jobs[0] (job 256): job id 256 is out of range 1..255 (the program's per-job "
        "counters have 256 cells)")
    # A build with 1024 counter cells takes it.
    check_setup(parse_topology(single(jobs=jobs)), program(counters(1024)))


def test_a_thousand_jobs_stop_at_the_first_that_does_not_fit() -> None:
    jobs = [{"id": i, "workers": ["h1", "h2"], "slots": 1} for i in range(1, 1001)]
    assert "jobs[255] (job 256): job id 256 is out of range 1..255" in refusal(
        single(jobs=jobs), program())
    # With counters for them all, the `job` table's 256 entries are what stops them.
    assert refusal(single(jobs=jobs), program(counters(2048))).startswith(
        "t.yaml: jobs[256] (job 257): table job on s1 would hold 257 entries; the program "
        "holds 256")


def test_table_sizes() -> None:
    def small_member(info: p4info_pb2.P4Info) -> None:
        table(info, P.MEMBER).size = 5
    # Job 1 has 4 members, job 2 two more.
    assert refusal(single(), program(small_member)) == (
        "t.yaml: jobs[1] (job 2): table member on s1 would hold 6 entries; the program holds 5")


def test_a_value_wider_than_its_field() -> None:
    # Counters for 2048 jobs, but a replica id is (job id << 6) | index in 16 bits.
    jobs = [{"id": 1100, "workers": ["h1"], "slots": 1}]
    message = refusal(single(jobs=jobs), program(counters(2048)))
    assert message.startswith("t.yaml: jobs[0] (job 1100): ") and "egress_rid" in message \
        and "16" in message, message


def test_pools() -> None:
    def small_registers(info: p4info_pb2.P4Info) -> None:
        for r in info.registers:
            r.size = 512                          # two sets per slot: a 256-slot pool
    assert refusal(single(), program(small_registers)) == (
        "t.yaml: switches[0].slots: 1024 is more than the program's pool of 256 slots")
    jobs = [{"id": 1, "workers": ["h1"], "slots": 600}, {"id": 2, "workers": ["h2"], "slots": 600}]
    assert refusal(single(jobs=jobs), program()) == (
        "t.yaml: jobs[1] (job 2): job 2 needs 600 contiguous slots on s1 but only 424 of 1024 "
        "are free (largest free range: 424 at 600..1023)")
