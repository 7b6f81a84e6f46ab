"""Run inside a host's network namespace by tests/rogue.NetnsRogue:

    python netns_rogue.py IFACE FRAMES_FILE SECONDS

sends the frames of FRAMES_FILE (each prefixed by its 16-bit length) raw on IFACE, spread over
SECONDS, and prints {"sent": n, "received": [hex, ...]}: every frame that arrived on IFACE
meanwhile (not its own) and is a netsum packet (UDP to or from port 0x6E73).  Needs root.
"""
from __future__ import annotations

import json
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
UDP_PORT = 0x6E73


def netsum(frame: bytes) -> bool:
    if len(frame) < 58 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    sport, dport = struct.unpack_from("!HH", frame, 34)
    return UDP_PORT in (sport, dport)


def main(iface: str, path: str, seconds: float) -> None:
    data = open(path, "rb").read()
    frames, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from("!H", data, at)
        frames.append(data[at + 2:at + 2 + n])
        at += 2 + n
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.setblocking(False)
    got: list[str] = []

    def drain(until: float) -> None:
        while True:
            try:
                frame, addr = s.recvfrom(65535)
                if addr[2] != PACKET_OUTGOING and netsum(frame):
                    got.append(frame.hex())
            except BlockingIOError:
                if time.monotonic() >= until:
                    return
                time.sleep(0.001)

    gap = seconds / max(1, len(frames))
    sent = 0
    for f in frames:
        s.send(f)
        sent += 1
        drain(time.monotonic() + gap)
    drain(time.monotonic() + 0.3)
    print(json.dumps({"sent": sent, "received": got}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
