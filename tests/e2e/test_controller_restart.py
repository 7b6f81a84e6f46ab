"""Kill and restart a real `netsum-switch` daemon under a running `netsum-ctl run`: the
controller notices, restores pipeline, forwarding, jobs and groups, and a round of aggregation
through the daemon's UDP ports completes afterwards (frames as a worker sends them)."""
from __future__ import annotations

import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from controller.topology import parse_topology
from workers import wire
from workers.protocol import K_DEFAULT, Flags, MsgType

ROOT = Path(__file__).resolve().parents[2]
K = K_DEFAULT
BIN = Path(sys.executable).parent


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def netsum_program() -> tuple[Path, Path]:
    build = pytest.importorskip("netsum.build")
    try:
        json_path, info_path = build.ensure_built(k=K)
    except build.BuildError as exc:
        pytest.fail(f"p4/netsum.p4 does not build: {exc}")
    return info_path, json_path


class Daemon:
    """netsum-switch with UDP ports 1..4 and gRPC on a fixed loopback port."""

    def __init__(self, grpc_port: int, udp_ports: dict[int, int], log: Path) -> None:
        self.argv = [str(BIN / "netsum-switch"), "--no-p4", "--device-id", "0"]
        for n, p in udp_ports.items():
            self.argv += ["-i", f"{n}@udp:127.0.0.1:{p}"]
        self.argv += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
        self.grpc_port = grpc_port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.grpc_port)) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError("netsum-switch did not open its gRPC port")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()            # SIGKILL: no goodbye, as in a crash
            self.proc.wait(timeout=10)


class Lines:
    """The controller's stdout, line by line, with a timeout."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            self.q.put(line.decode(errors="replace"))

    def wait_for(self, fragment: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no {fragment!r} in controller output: {seen}")


@pytest.fixture
def rig(netsum_program, tmp_path) -> Iterator[tuple]:  # type: ignore[type-arg]
    info, js = netsum_program
    grpc_port = free_port()
    udp = {n: free_port(socket.SOCK_DGRAM) for n in (1, 2, 3, 4)}
    doc = yaml.safe_load((ROOT / "examples" / "single.yaml").read_text())
    doc["switches"][0]["grpc_addr"] = f"127.0.0.1:{grpc_port}"
    topo_path = tmp_path / "single.yaml"
    topo_path.write_text(yaml.safe_dump(doc))
    daemon = Daemon(grpc_port, udp, tmp_path / "switch.log")
    daemon.start()
    ctl = subprocess.Popen([str(BIN / "netsum-ctl"), "run", "--topo", str(topo_path),
                            "--p4info", str(info), str(js), "--interval", "0.3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    socks = {}
    try:
        for n in (1, 2):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks[n] = s
        yield parse_topology(topo_path.read_text()), daemon, ctl, Lines(ctl.stdout), socks, udp
    finally:
        for s in socks.values():
            s.close()
        if ctl.poll() is None:
            os.kill(ctl.pid, signal.SIGINT)
            try:
                ctl.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ctl.kill()
                ctl.wait()
        daemon.kill()


def one_round(topo, socks, udp, slot: int) -> dict[int, np.ndarray]:  # type: ignore[no-untyped-def]
    """h1 (port 1) and h2 (port 2) contribute to job 2; returns the RESULT values per port."""
    for n, name in ((1, "h1"), (2, "h2")):
        h = topo.host(name)
        svc = topo.switch("s1").service
        src = wire.Endpoint(h.mac.to_bytes(6, "big"), h.ipv4.to_bytes(4, "big"), h.udp_port)
        dst = wire.Endpoint(svc.mac.to_bytes(6, "big"), svc.ipv4.to_bytes(4, "big"))
        hdr = wire.Header(MsgType.DATA, Flags.NONE, 2, 0, slot, 130, 0, 0)
        vals = np.full(K, n * 10 + slot, dtype=np.int32)
        socks[n].sendto(wire.build_frame(src, dst, wire.encode(hdr, vals, K)),
                        ("127.0.0.1", udp[n]))
    got = {}
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        ready, _, _ = select.select(list(socks.values()), [], [], 0.2)
        for s in ready:
            n = next(k for k, v in socks.items() if v is s)
            frame = s.recv(4096)
            parsed = wire.parse_frame(frame, K)
            assert parsed.packet.header.msg_type is MsgType.RESULT
            got[n] = parsed.packet.values
    return got


def test_switch_restart_is_restored_and_aggregation_resumes(rig) -> None:  # type: ignore[no-untyped-def]
    topo, daemon, ctl, lines, socks, udp = rig
    lines.wait_for("controller running")
    got = one_round(topo, socks, udp, slot=1)
    assert sorted(got) == [1, 2] and all((v == 11 + 21 + 0).all() for v in got.values())

    daemon.kill()
    daemon.start()
    line = lines.wait_for("restored s1")
    assert "pipeline missing" in line or "stream reconnected" in line
    got = one_round(topo, socks, udp, slot=1)
    assert sorted(got) == [1, 2] and all((v == 32).all() for v in got.values())
    assert ctl.poll() is None
