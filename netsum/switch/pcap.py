"""Classic libpcap files (`--pcap DIR`): `<iface>_in.pcap` / `<iface>_out.pcap` per port,
Ethernet link type, microsecond timestamps; readable by tcpdump and scapy."""
from __future__ import annotations

import struct
import threading
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
    """Writes may come from the packet loop and from gRPC threads (PacketOut): a lock keeps
    each record whole."""
    __slots__ = ("path", "_f", "_lock")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._f: BinaryIO | None = open(path, "wb")
        self._f.write(_GLOBAL.pack(_MAGIC, 2, 4, 0, 0, _SNAPLEN, _LINKTYPE_ETHERNET))

    def write(self, frame: bytes, ts: float | None = None) -> None:
        t = time.time() if ts is None else ts
        sec = int(t)
        data = frame[:_SNAPLEN]
        record = _RECORD.pack(sec, int((t - sec) * 1e6), len(data), len(frame)) + data
        with self._lock:
            if self._f is not None:
                self._f.write(record)

    def flush(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.flush()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None
