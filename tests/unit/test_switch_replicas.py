"""Multicast copies deparsed once and patched (netsum/switch/replicas.py): which programs qualify,
and that a 4-way result is deparsed once yet every copy carries its own rewrite and a correct
IPv4 checksum (frames compared with the fuse=False pipeline, which deparses each copy)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from netsum.switch.pipeline import Pipeline
from netsum.wire import DEST_ALL, HEADER_BYTES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "p4c"


@pytest.mark.parametrize("name, dirty", [
    ("l2_mcast", None),                      # egress adds/removes headers: full deparse
    ("calc_state", ["ipv4"]),                # only the checksum target's header
])
def test_which_headers_are_repacked(name: str, dirty: list[str] | None) -> None:
    pl = Pipeline(json.loads((FIXTURES / f"{name}.json").read_text()))
    got = pl.replica_patch
    assert (None if got is None else sorted(got.dirty)) == dirty
    assert Pipeline(json.loads((FIXTURES / f"{name}.json").read_text()),
                    fuse=False).replica_patch is None


@pytest.mark.parametrize("dest", [DEST_ALL, 2])
def test_netsum_result_is_deparsed_once_per_multicast(dest: int) -> None:
    """Also for reduce-scatter (dest = rank 2): egress takes the values out of the copies for
    the other ranks (ACKs), and the patched copies must still be the full deparse's bytes."""
    import p4helpers as helpers
    cfg = helpers.netsum_config(32)
    hosts = [helpers.worker_host(i) for i in range(4)]
    outs = []
    calls = []
    for fuse in (False, True):
        sw = helpers.NetsumSwitch(cfg, pipeline=Pipeline(json.loads(cfg), fuse=fuse))
        sw.add_job(3, hosts, num_slots=4)
        assert sw.device._v1 is not None
        v1 = sw.device._v1
        n = [0]
        real = v1.deparse

        def counting(F: list[int], real=real, n=n) -> bytes:
            n[0] += 1
            return real(F)
        v1.deparse = counting
        got = [sw.device.process(h.port, helpers.netsum_frame(h, job_id=3, slot=1, dest=dest,
                                                              values=[i] * 32))
               for i, h in enumerate(hosts)]
        outs.append(got)
        calls.append(n[0])
    assert outs[0] == outs[1]
    assert len(outs[1][-1]) == 4
    assert calls == [4, 1]                 # per copy without the rewrite, once with it
    for rank, ((port, frame), h) in enumerate(zip(outs[1][-1], hosts)):
        if dest != DEST_ALL and rank != dest:      # an ACK: the header alone
            assert port == h.port and len(frame) == 14 + 20 + 8 + HEADER_BYTES
            assert helpers.ipv4_checksum_ok(frame[14:34])
            continue
        p = helpers.parse_frame(frame, k=32)
        assert port == h.port and p.values == (6,) * 32
        assert helpers.ipv4_checksum_ok(frame[14:34])
