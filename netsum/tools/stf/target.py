"""The switch under test: a `netsum-switch` daemon with one UDP-tunnel port per STF port,
driven over P4Runtime (gRPC) as a controller would, with frames on real sockets.

Each STF port N is the switch's port N, a UDP socket on 127.0.0.1 that carries whole Ethernet
frames; its fixed peer is a socket of ours, so every frame the switch sends on port N arrives
here, in order.

Settling.  A test is a sequence: a frame, then perhaps a table write that must not be seen by
that frame.  After each frame the runner waits until the switch has *finished* it: first until
the kernel shows the switch has read every datagram we sent (the socket's receive queue in
/proc/net/udp is empty), then with a P4Runtime Read, which the switch serves only between two
packets (netsum-switch holds its device lock for the whole of a packet, resubmissions and
recirculations included), and then collects what arrived.  Where /proc/net/udp is missing the
runner falls back to waiting for a quiet period.
"""
from __future__ import annotations

import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netsum.lifecycle import Started
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.p4rt.errors import ClientError
from netsum.p4rt.pre import groups_wildcard
from netsum.procs import ProcessGroup
from netsum.rig import RigError, wait_switch_ready

__all__ = ["TargetError", "NetsumSwitch", "refusal"]

_PROC_UDP = Path("/proc/net/udp")


class TargetError(Exception):
    """The switch could not be started, died, or stopped answering."""


def refusal(exc: ClientError) -> str:
    """What a refused call met, as PI reports it: the status code and message, or for a Write
    batch (which fails as UNKNOWN) the first failed update's code and every failed update's
    message."""
    failed = exc.failures
    if failed:
        return f"{failed[0].code_name}: {'; '.join(f.message for f in failed)}"
    if exc.code:
        return f"{exc.code}: {exc.detail}"
    return str(exc)


class NetsumSwitch(Started):
    """One netsum-switch process for one test: start, push a pipeline, write, send frames,
    settle, collect, stop.  Use as a context manager."""

    def __init__(self, ports: Sequence[int], work_dir: Path, *, device_id: int = 0,
                 start_timeout: float = 30.0) -> None:
        self.ports = sorted(set(ports))
        self.work_dir = work_dir
        self.device_id = device_id
        self.start_timeout = start_timeout
        self.procs = ProcessGroup(work_dir)
        self.socks: dict[int, socket.socket] = {}
        self.switch_addr: dict[int, tuple[str, int]] = {}
        self.received: dict[int, list[bytes]] = {p: [] for p in self.ports}
        self.client: SwitchClient | None = None
        self.child: Any = None

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        specs = []
        for p in self.ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            self.socks[p] = s
            specs += ["-i", f"{p}@udp:127.0.0.1:0,127.0.0.1:{s.getsockname()[1]}"]
        argv = [sys.executable, "-m", "netsum.switch", "--no-p4", "--device-id", str(self.device_id),
                "--seed", "1", *specs, "--", "--grpc-server-addr", "127.0.0.1:0"]
        self.child = self.procs.start("switch", argv)
        try:
            ready = wait_switch_ready(self.child, self.start_timeout)
        except RigError as exc:
            raise TargetError(str(exc)) from None
        if ready.grpc_addr is None:
            raise TargetError("the switch reported no P4Runtime address")
        for p in self.ports:
            self.switch_addr[p] = ("127.0.0.1", ready.udp_ports[p])
        # The stream (and so mastership) stays open until close().
        self.client = SwitchClient(Endpoint(ready.grpc_addr, self.device_id, (0, 1)), timeout=30)
        try:
            self.client.connect(timeout=self.start_timeout)
        except ClientError as exc:
            raise TargetError(f"arbitration failed: {exc}") from None
        if not self.client.is_primary:
            arb = self.client.arbitration
            raise TargetError(f"not primary: {arb.status.message if arb is not None else ''}")

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()
        self.procs.stop()
        for s in self.socks.values():
            s.close()
        self.socks.clear()

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def log_tail(self) -> str:
        return self.child.log_tail(8) if self.child is not None else ""

    # -- P4Runtime (the client library; refusals are its ClientError) --------------------
    def _client(self) -> SwitchClient:
        if self.client is None:
            raise TargetError("the switch is not started")
        return self.client

    def set_pipeline(self, p4info: Any, device_config: bytes) -> None:
        self._client().set_pipeline(p4info, device_config, timeout=60)

    def write(self, updates: Sequence[Any]) -> None:
        self._client().write(updates)

    def read(self, entities: Sequence[Any]) -> list[Any]:
        return self._client().read(entities)

    # -- frames --------------------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> None:
        self.socks[port].sendto(frame, self.switch_addr[port])

    def settle(self, timeout: float = 20.0) -> None:
        """Return once the switch has finished every frame sent so far (see the module doc)."""
        deadline = time.monotonic() + timeout
        local = {a[1] for a in self.switch_addr.values()}
        if _PROC_UDP.exists():
            while _queued(local):
                if not self.alive():
                    raise TargetError(f"the switch died: {self.log_tail()}")
                if time.monotonic() > deadline:
                    raise TargetError(f"the switch did not read its frames within {timeout:g} s")
                time.sleep(0.0005)
            # The Read is answered between packets: the frame just taken is finished.
            try:
                self.read([groups_wildcard()])
            except ClientError as exc:
                raise TargetError(f"the switch refused a Read used to settle: "
                                  f"{refusal(exc)}") from None
        else:
            time.sleep(0.2)
        self._collect()

    def _collect(self) -> None:
        for port, s in self.socks.items():
            while True:
                try:
                    data = s.recv(1 << 17)
                except (BlockingIOError, InterruptedError):
                    break
                self.received[port].append(data)

    def drain_quiet(self, quiet: float = 0.05, limit: float = 2.0) -> None:
        """Collect until nothing has arrived for `quiet` seconds (the end of a test: a frame
        sent late would still count against it)."""
        end = time.monotonic() + limit
        last = time.monotonic()
        count = sum(map(len, self.received.values()))
        while time.monotonic() < end:
            time.sleep(0.005)
            self._collect()
            now_count = sum(map(len, self.received.values()))
            if now_count != count:
                count, last = now_count, time.monotonic()
            elif time.monotonic() - last >= quiet:
                return


def _queued(local_ports: set[int]) -> bool:
    """True while any of the given local UDP ports has unread datagrams (its rx_queue)."""
    try:
        lines = _PROC_UDP.read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) < 5:
            continue
        port = int(parts[1].rpartition(":")[2], 16)
        if port in local_ports and int(parts[4].partition(":")[2], 16) != 0:
            return True
    return False
