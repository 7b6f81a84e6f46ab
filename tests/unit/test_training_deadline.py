"""The switch path's deadline: the process group's timeout, NETSUM_TIMEOUT overriding it
(netsum.training.hook.timeout_seconds / group_timeout); the end-to-end rule is in
tests/e2e/test_training_timeout.py."""
from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")
import torch.distributed as dist  # noqa: E402

from netsum.training.hook import group_timeout, timeout_seconds  # noqa: E402
from netsum.training.register import RegistrationError  # noqa: E402


def test_the_group_timeout_is_the_deadline_and_netsum_timeout_overrides_it() -> None:
    assert timeout_seconds(datetime.timedelta(minutes=30), {}) == 1800.0
    assert timeout_seconds(datetime.timedelta(seconds=60), {"NETSUM_TIMEOUT": "2.5"}) == 2.5
    assert timeout_seconds(None, {"NETSUM_TIMEOUT": "7"}) == 7.0
    for bad, why in (("soon", "not a number"), ("0", "must be > 0"), ("-3", "must be > 0")):
        with pytest.raises(RegistrationError, match=f"NETSUM_TIMEOUT='{bad}'.*{why}"):
            timeout_seconds(datetime.timedelta(seconds=60), {"NETSUM_TIMEOUT": bad})
    with pytest.raises(RegistrationError, match="no timeout"):
        timeout_seconds(None, {})


@pytest.fixture
def one_rank_group(tmp_path: object) -> Iterator[None]:
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=42))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_group_timeout_reads_what_init_process_group_was_given(one_rank_group: None) -> None:
    assert group_timeout() == datetime.timedelta(seconds=42)
