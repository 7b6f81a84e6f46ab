"""What a worker's transport takes in (issue 25 point 1, docs/protocol.md "What a worker
trusts"): a kernel socket is connected to the service address and port, so the kernel drops
datagrams from anyone else; in frame mode every frame is validated in full, and one not from
the service (MAC, IPv4, UDP_PORT) to this worker (MAC, IPv4, port) is counted and dropped.

The forged datagrams carry a perfectly valid RESULT header for the job (what the red team
sent): only where they come from, or where they go, gives them away.  Plus the CLI's .npy
input checked before anything is allocated (point 5).
"""
from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netsum.wire import HEADER_BYTES, UDP_PORT, MsgType
from netsum.workers import Endpoint, FrameTransport, UdpTransport, wire
from netsum.workers.cli import main

K = 32
LOCAL = Endpoint.parse("02:00:00:00:00:01", "10.0.0.1", 40001)
SERVICE = Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254")
RESULT = wire.encode(wire.Header(msg_type=MsgType.RESULT, flags=wire.Flags.NONE, job_id=3,
                                 slot=0, exp=130, count=2, round=0, offset=0),
                     np.full(K, 1 << 30, np.int32), K)


def _drain(recv: object, seconds: float = 0.3) -> list[bytes]:
    out: list[bytes] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out += recv(0.05)  # type: ignore[operator]
    return out


def test_a_kernel_socket_takes_datagrams_from_its_service_only() -> None:
    service = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    service.bind(("127.0.0.1", 0))
    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rogue.bind(("127.0.0.1", 0))
    try:
        with UdpTransport(service.getsockname(), bind=("127.0.0.1", 0)) as t:
            for _ in range(5):
                rogue.sendto(RESULT, t.address)          # another port of the same host
            assert _drain(t.receive) == []
            service.sendto(RESULT, t.address)
            assert _drain(t.receive) == [RESULT]
            assert t.counters.received == 1
    finally:
        service.close()
        rogue.close()


def _frame(src: Endpoint = SERVICE, dst: Endpoint = LOCAL, options: bytes = b"",
           payload: bytes = RESULT) -> bytes:
    return bytes(Ether(src=":".join(f"{b:02x}" for b in src.mac),
                       dst=":".join(f"{b:02x}" for b in dst.mac))
                 / IP(src=str(socket.inet_ntoa(src.ip)), dst=str(socket.inet_ntoa(dst.ip)),
                      options=options)
                 / UDP(sport=src.port, dport=dst.port, chksum=0) / Raw(payload))


def _other(ep: Endpoint, **kw: object) -> Endpoint:
    fields = {"mac": ep.mac, "ip": ep.ip, "port": ep.port}
    fields.update(kw)
    return Endpoint(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("frame, why", [
    (_frame(src=_other(SERVICE, ip=bytes([10, 0, 0, 9]))), "source IPv4 not the service"),
    (_frame(src=_other(SERVICE, port=9)), "source port not UDP_PORT"),
    (_frame(src=_other(SERVICE, mac=bytes.fromhex("020000000009"))), "source MAC"),
    (_frame(dst=_other(LOCAL, port=9)), "to another UDP port (the red team's case)"),
    (_frame(dst=_other(LOCAL, ip=bytes([10, 0, 0, 7]))), "to another address"),
    (_frame(dst=_other(LOCAL, mac=bytes.fromhex("020000000007"))), "to another MAC"),
])
def test_a_frame_transport_takes_frames_from_the_service_to_itself_only(
        frame: bytes, why: str) -> None:
    switch = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    switch.bind(("127.0.0.1", 0))
    try:
        with FrameTransport(switch.getsockname(), LOCAL, SERVICE, k=K) as t:
            for _ in range(3):
                switch.sendto(frame, t.address)
            assert _drain(t.receive) == [], why
            # counted as foreign, or as malformed when neither port is the netsum port
            assert t.counters.foreign + t.counters.malformed == 3, why
            good = _frame()
            switch.sendto(good, t.address)
            assert _drain(t.receive) == [RESULT]
            # the allocation-free path sees the same: the forged frame first, then the good one
            switch.sendto(frame, t.address)
            switch.sendto(good, t.address)
            time.sleep(0.1)
            n = t.receive_into(0.2, HEADER_BYTES + 4 * K)
            assert [bytes(p) for p in t.rx_payloads[:n]] == [RESULT] and not t.rx_other
    finally:
        switch.close()


def test_options_do_not_hide_the_udp_header() -> None:
    """IPv4 options (IHL 6) move the UDP header; the frame is taken apart behind them and
    checked like any other: from the service to this worker it is taken, otherwise not."""
    switch = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    switch.bind(("127.0.0.1", 0))
    try:
        with FrameTransport(switch.getsockname(), LOCAL, SERVICE, k=K) as t:
            switch.sendto(_frame(dst=_other(LOCAL, port=9), options=b"\x01" * 4), t.address)
            switch.sendto(_frame(options=b"\x01" * 4), t.address)
            assert _drain(t.receive) == [RESULT]
            assert t.counters.foreign == 1
    finally:
        switch.close()


# ---- the CLI's .npy input ----------------------------------------------------------------

def _npy(path: Path, header: str, data: bytes) -> Path:
    head = header.encode("latin1")
    pad = (64 - (10 + len(head) + 1) % 64) % 64
    head += b" " * pad + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + data)
    return path


@pytest.mark.parametrize("header, data, message", [
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", b"\0" * 16,
     "elements; one call carries at most"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }", b"\0" * 16,
     "but the file holds 16 bytes"),
    ("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\0" * 16,
     "not a number type"),
])
def test_a_hostile_npy_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 header: str, data: bytes, message: str) -> None:
    """A header that claims 2^40 elements over 16 bytes used to reach np.load's allocation
    (a MemoryError traceback): the header is checked first."""
    path = _npy(tmp_path / "x.npy", header, data)
    code = main(["--job", "3", "--workers", "1", "--slots", "4", "--udp", "127.0.0.1:9",
                 "--bind", "127.0.0.1:0", "--input", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_a_huge_npy_header_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), " + " " * 60000 + "}"
    path = tmp_path / "big.npy"
    head = header.encode() + b"\n"
    path.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(head)) + head + b"\0" * 16)
    code = main(["--job", "3", "--workers", "1", "--slots", "4", "--udp", "127.0.0.1:9",
                 "--bind", "127.0.0.1:0", "--input", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "cannot load" in err and err.count("\n") == 1, err


def test_a_valid_npy_still_loads(tmp_path: Path) -> None:
    from netsum.workers.cli import load_npy
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.save(tmp_path / "ok.npy", x)
    np.testing.assert_array_equal(load_npy(tmp_path / "ok.npy"), x)
