"""A hostile host for the isolation tests: frames captured from a member's port (the switch's
own pcap), rewritten where a test forges a field, and replayed into a switch port from a host
that is not the member -- a UDP-tunnel peer address in the test process, or a raw socket inside
a network namespace (tests/netns_rogue.py, run there with `ip netns exec`).  Whatever comes back
to the rogue is kept, so a test can show that no RESULT reached it.

Test plumbing only: it builds nothing itself (the frames are what the member really sent).
"""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from netsum.wire import HEADER_BYTES, UDP_PORT, MsgType
from netsum.workers import wire

__all__ = ["captured_data", "with_field", "is_netsum", "UdpRogue", "NetnsRogue"]

_ETH_IP_UDP = 14 + 20 + 8
_JOB_ID = wire.field_reader(("job_id",))
_FIELDS = {"job_id": (2, 2), "slot": (4, 2)}      # header byte offset, size (wireformat)


def _read_pcap(path: Path) -> list[bytes]:
    """Records of a classic pcap file (a record cut short at the end -- the writer flushes
    once a second -- is left out)."""
    data = path.read_bytes()
    out, at = [], 24
    while at + 16 <= len(data):
        incl = struct.unpack_from("<I", data, at + 8)[0]
        if at + 16 + incl > len(data):
            break
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def is_netsum(frame: bytes, msg_type: int | None = None) -> bool:
    """A netsum packet (UDP to or from the service port, whole header), of `msg_type` if given."""
    if len(frame) < _ETH_IP_UDP + HEADER_BYTES or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    sport, dport = struct.unpack_from("!HH", frame, 34)
    if UDP_PORT not in (sport, dport):
        return False
    return msg_type is None or frame[_ETH_IP_UDP + wire.field_offset("msg_type")] == msg_type


def captured_data(pcap: Path, job_id: int, want: int = 1, wait: float = 10.0) -> list[bytes]:
    """The DATA frames of `job_id` the switch received on one port (its `<iface>_in.pcap`),
    waiting up to `wait` s for at least `want` of them (pcap files are flushed once a second)."""
    deadline = time.monotonic() + wait
    while True:
        frames = [f for f in _read_pcap(pcap) if pcap.exists() and is_netsum(f, MsgType.DATA)
                  and _JOB_ID(memoryview(f)[_ETH_IP_UDP:])[0] == job_id] \
            if pcap.exists() else []
        if len(frames) >= want or time.monotonic() > deadline:
            return frames
        time.sleep(0.2)


def with_field(frame: bytes, name: str, value: int) -> bytes:
    """`frame` with netsum header field `name` set to `value` and the UDP checksum 0 (the
    payload changed; 0 means "not computed" for UDP over IPv4)."""
    at, size = _FIELDS[name]
    b = bytearray(frame)
    b[_ETH_IP_UDP + at:_ETH_IP_UDP + at + size] = value.to_bytes(size, "big")
    b[40:42] = b"\0\0"
    return bytes(b)


class UdpRogue:
    """Frames into a UDP-tunnel switch port from `bind` (that port's peer, or any address),
    spread over `seconds` in a thread; everything arriving at `bind` meanwhile is kept."""

    def __init__(self, bind: tuple[str, int], switch_port: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(bind)
        self.sock.settimeout(0.05)
        self.switch_port = switch_port
        self.received: list[bytes] = []
        self.sent = 0
        self._thread: threading.Thread | None = None

    def start(self, frames: Sequence[bytes], seconds: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(list(frames), seconds))
        self._thread.start()

    def _run(self, frames: list[bytes], seconds: float) -> None:
        gap = seconds / max(1, len(frames))
        for f in frames:
            self.sock.sendto(f, self.switch_port)
            self.sent += 1
            self._drain(gap)
        self._drain(0.3)

    def _drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            try:
                self.received.append(self.sock.recv(65535))
            except (TimeoutError, BlockingIOError):
                pass
            if time.monotonic() >= end:
                return

    def wait(self) -> tuple[int, list[bytes]]:
        """(frames sent, frames received); closes the socket."""
        assert self._thread is not None
        self._thread.join()
        self.sock.close()
        return self.sent, self.received


class NetnsRogue:
    """The same from inside network namespace `ns`, on its interface `iface` (AF_PACKET):
    tests/netns_rogue.py runs there."""

    def __init__(self, ns: str, iface: str, work: Path) -> None:
        self.ns, self.iface, self.work = ns, iface, work
        self.proc: subprocess.Popen[str] | None = None

    def start(self, frames: Sequence[bytes], seconds: float) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        blob = self.work / f"frames-{time.monotonic_ns()}.bin"
        blob.write_bytes(b"".join(struct.pack("!H", len(f)) + f for f in frames))
        script = Path(__file__).with_name("netns_rogue.py")
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable,
                                      str(script), self.iface, str(blob), str(seconds)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait(self) -> tuple[int, list[bytes]]:
        assert self.proc is not None
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        doc = json.loads(out)
        return int(doc["sent"]), [bytes.fromhex(h) for h in doc["received"]]
