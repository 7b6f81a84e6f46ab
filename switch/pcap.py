"""Classic libpcap files (`--pcap DIR`): `<iface>_in.pcap` / `<iface>_out.pcap` per port,
Ethernet link type, microsecond timestamps; readable by tcpdump and scapy."""
from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["PcapWriter"]

_GLOBAL = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
_MAGIC = 0xA1B2C3D4
_SNAPLEN = 65535
_LINKTYPE_ETHERNET = 1


class PcapWriter:
    __slots__ = ("path", "_f")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: BinaryIO | None = open(path, "wb")
        self._f.write(_GLOBAL.pack(_MAGIC, 2, 4, 0, 0, _SNAPLEN, _LINKTYPE_ETHERNET))

    def write(self, frame: bytes, ts: float | None = None) -> None:
        f = self._f
        if f is None:
            return
        t = time.time() if ts is None else ts
        sec = int(t)
        data = frame[:_SNAPLEN]
        f.write(_RECORD.pack(sec, int((t - sec) * 1e6), len(data), len(frame)))
        f.write(data)

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
