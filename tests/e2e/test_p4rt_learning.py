"""Digests and idle timeouts over real gRPC, driven by finsy (pip package, own virtualenv) as
its examples/l2_switch learning switch uses them (tests/clients/finsy_learning.py), against
tests/p4programs/learning.p4 compiled by netsum-p4c and run in-process.

What must happen, worked out by hand from the program: a frame from an unknown source misses
smac, whose const default `learn` sends digest {src, ingress port}; dmac misses too and its
default (set by the controller) floods to group 0xAB = ports 1, 2, 3, less the ingress port
(egress drops it).  The controller learns the host from the DigestList (smac `known` with a
TTL, dmac `forward`), so the reverse direction is unicast; a host that stays silent for the
TTL is reported in an IdleTimeoutNotification and the controller deletes both entries, after
which frames to it flood again.
"""
from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from netsum import p4c as compiler
from helpers import embedded_server

ROOT = Path(__file__).resolve().parents[2]
FINSY_PY = ROOT / ".venv-finsy" / "bin" / "python"
DRIVER = ROOT / "tests" / "clients" / "finsy_learning.py"
PROGRAM = ROOT / "tests" / "p4programs" / "learning.p4"
DEVICE_ID = 4
A, B, C = 0x0200000000AA, 0x0200000000BB, 0x0200000000CC
TTL_NS = 1_000_000_000


def frame(dst: int, src: int) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + b"\x88\xb5" + b"x" * 46


class Driver:
    """The finsy process and its JSON event lines."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def next(self, key: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and self.events.empty():
                err = self.proc.stderr.read() if self.proc.poll() is not None and \
                    self.proc.stderr else ""
                raise AssertionError(f"no {key!r} event from finsy within {timeout} s: {err}")
            try:
                ev = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if key in ev:
                return ev
            self.proc.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"expected a {key!r} event, got {ev}; finsy said: {err[-3000:]}")

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def ports(outputs: list[tuple[int, bytes]]) -> list[int]:
    return sorted(p for p, _ in outputs)


@pytest.mark.slow
def test_finsy_learning_switch_digests_acks_and_idle_timeouts(tmp_path: Path) -> None:
    if not FINSY_PY.exists():
        pytest.skip(f"{FINSY_PY} is missing: run scripts/setup.sh (make setup) first")
    result = compiler.compile_file(PROGRAM)
    (tmp_path / "p.json").write_text(result.json_text())
    (tmp_path / "p.txtpb").write_text(result.p4info_text())
    with embedded_server(DEVICE_ID) as (dev, srv):
        drv = Driver([str(FINSY_PY), str(DRIVER), f"127.0.0.1:{srv.port}", str(DEVICE_ID),
                      str(tmp_path / "p.txtpb"), str(tmp_path / "p.json"), str(TTL_NS)])
        try:
            ready = drv.next("ready")
            # The DigestEntry reads back as written (max_list_size 1, ack_timeout 1 s); finsy
            # names the digest by its P4Info name.
            assert ready["digest_config"] == [["learn_t", 1, 1_000_000_000]]

            # A -> B from port 1: both unknown, flooded to 2 and 3; A is learned on port 1.
            assert ports(dev.process(1, frame(B, A))) == [2, 3]
            ev = drv.next("learned")
            assert ev["learned"] == [[A, 1]] and ev["list_id"] == 1
            # B -> A from port 2: A is known now, so unicast to 1; B is learned on port 2.
            assert ports(dev.process(2, frame(A, B))) == [1]
            assert drv.next("learned")["learned"] == [[B, 2]]
            out = dev.process(1, frame(B, A))
            assert ports(out) == [2] and out[0][1] == frame(B, A)
            # C from port 3 to A: unicast to 1, C learned on 3.
            assert ports(dev.process(3, frame(A, C))) == [1]
            assert drv.next("learned")["learned"] == [[C, 3]]

            # Then silence: every host ages out (reported once each, in one or more
            # notifications) and the controller deletes its entries.
            gone: set[int] = set()
            while gone != {A, B, C}:
                gone.update(drv.next("unlearned", timeout=TTL_NS / 1e9 + 30)["unlearned"])
            # A is unknown again: frames to it flood, and its next frame is learned anew.
            assert ports(dev.process(2, frame(A, B))) == [1, 3]
            assert drv.next("learned")["learned"] == [[B, 2]]
            # Every list acknowledged, none dropped.  finsy reports a list to the driver before
            # its ack reaches the server, so the last ack may still be on its way: wait for it
            # (an unacknowledged list stays pending forever, and fails this after 30 s).
            until = time.monotonic() + 30
            while (stats := srv.servicer.service.digests.stats()) != [("learn_t", 0, 0)] and \
                    time.monotonic() < until:
                time.sleep(0.05)
            assert stats == [("learn_t", 0, 0)]
        finally:
            drv.stop()
