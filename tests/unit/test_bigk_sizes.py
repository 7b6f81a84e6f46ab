"""K beyond 256 (512-2048 values per packet, emulation only): every place a frame must fit
refuses one that does not with the numbers, instead of losing it without a word.

- shared-memory ports: a worker of K=1024 on a port whose rings hold 2048-byte frames (the
  default) is refused when it attaches, naming the `frame=` it needs;
- kernel UDP: a worker whose datagrams exceed the route's MTU (the switch drops IP
  fragments) is refused when its transport opens, naming the MTU and the largest K that fits
  (privileged: a namespace and a veth pair with a 1500-byte and a 9000-byte MTU);
- the rig gives shm ports and veth pairs the sizes K needs.

Expected sizes are computed here by hand from docs/protocol.md: Ethernet 14 + IPv4 20 + UDP 8 +
netsum header 24 + 4K.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from netsum.shmring import Layout, ShmServer, frame_for
from netsum.wire import UDP_PORT
from netsum.workers import wire
from netsum.workers.errors import TransportError
from netsum.workers.shmring import ShmFrameTransport
from netsum.workers.transport import UdpTransport

LOCAL = wire.Endpoint.parse("02:00:00:00:00:01", "10.0.0.1", UDP_PORT)
SERVICE = wire.Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254", UDP_PORT)


def frame_bytes(k: int) -> int:
    return 14 + 20 + 8 + 24 + 4 * k


def test_frame_for_rounds_k_frames_up_to_64_bytes_never_below_the_default() -> None:
    assert frame_for(frame_bytes(256)) == 2048          # 1090 bytes: the default holds it
    assert frame_for(frame_bytes(512)) == 2176          # 2114 -> 34 x 64
    assert frame_for(frame_bytes(1024)) == 4224         # 4162 -> 66 x 64
    assert frame_for(frame_bytes(2048)) == 8320         # 8258 -> 130 x 64


def _attach(tmp_path: Path, frame: int, k: int) -> ShmFrameTransport:
    """ShmFrameTransport(k) on a port of `frame`-byte buffers, serviced here as the switch
    services its control socket; re-raises what the constructor raised."""
    server = ShmServer(str(tmp_path / f"p{frame}-{k}"), Layout(16, frame), 5)
    got: list[object] = []

    def open_it() -> None:
        try:
            got.append(ShmFrameTransport(str(tmp_path / f"p{frame}-{k}"), LOCAL, SERVICE,
                                         k=k, timeout=5))
        except BaseException as exc:   # handed to the test's thread
            got.append(exc)
    t = threading.Thread(target=open_it, daemon=True)
    t.start()
    try:
        while t.is_alive():
            server.service()
            time.sleep(0.001)
    finally:
        server.close()
    assert got
    if isinstance(got[0], BaseException):
        raise got[0]
    assert isinstance(got[0], ShmFrameTransport)
    return got[0]


@pytest.mark.parametrize("k, frame", [(1024, 2048), (2048, 4224), (512, 2048)])
def test_a_shm_port_too_small_for_k_is_refused_with_the_frame_it_needs(
        tmp_path: Path, k: int, frame: int) -> None:
    with pytest.raises(TransportError) as err:
        _attach(tmp_path, frame, k)
    need = -(-frame_bytes(k) // 64) * 64
    assert (f"rings hold frames of up to {frame} bytes, a K={k} frame is {frame_bytes(k)}"
            in str(err.value)), err.value
    assert f"frame={need}" in str(err.value)


@pytest.mark.parametrize("k, frame", [(1024, 4224), (2048, 8320), (256, 2048)])
def test_a_shm_port_of_the_size_k_needs_is_taken(tmp_path: Path, k: int, frame: int) -> None:
    _attach(tmp_path, frame, k).close()


def test_udp_on_loopback_takes_every_k() -> None:
    # lo's MTU is 65536: the largest K's 8244-byte datagrams fit.
    UdpTransport(("127.0.0.1", 9), bind=("127.0.0.1", 0), k=2048).close()


def _udp_in(ns: str, ip: str, k: int) -> None:
    from netsum.training.register import in_netns

    with in_netns(ns):
        UdpTransport(("10.0.0.254", UDP_PORT), bind=(ip, 0), k=k).close()


@pytest.mark.privileged
def test_udp_datagrams_over_the_route_mtu_are_refused_with_the_numbers(lab) -> None:  # type: ignore
    plain = lab.add_host(1, "02:00:00:00:00:01", "10.0.0.1")
    jumbo = lab.add_host(2, "02:00:00:00:00:02", "10.0.0.2", mtu=9000)
    _udp_in(plain.name, plain.ipv4, 256)          # 1076 bytes of IP in 1500
    with pytest.raises(TransportError) as err:
        _udp_in(plain.name, plain.ipv4, 1024)
    assert ("K=1024 datagrams are 4148 bytes of IP, more than the 1500-byte MTU of the route "
            "to 10.0.0.254" in str(err.value)), err.value
    assert "use K <= 256" in str(err.value)
    _udp_in(jumbo.name, jumbo.ipv4, 1024)
    _udp_in(jumbo.name, jumbo.ipv4, 2048)         # 8244 bytes of IP in 9000


def test_the_rig_sizes_ports_for_k() -> None:
    from netsum.rig import JUMBO_MTU, link_mtu

    assert [link_mtu(k) for k in (32, 256)] == [0, 0]              # 1076 <= 1500
    assert [link_mtu(k) for k in (512, 1024, 2048)] == [JUMBO_MTU] * 3  # 2100 .. 8244
    assert JUMBO_MTU >= frame_bytes(2048) - 14
