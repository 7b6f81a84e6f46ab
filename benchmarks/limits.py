"""The limit of this machine for an emulated switch: bare C forward loops, no Python, no P4.

    python benchmarks/limits.py [--seconds 2] [--senders 4] [--k 256] [--spin-us 0]

benchmarks/bare_limits.c (built here with the C compiler) runs one forwarder and N sender
processes that keep 64 frames of one netsum frame's size in flight (throughput), and one
sender with one frame in flight (round-trip time), over:
  * udp: loopback UDP, recvmmsg/sendmmsg batches (what netsum's C port loop does per frame);
  * gso: the same with UDP GSO/GRO: datagrams to one address sent as one sendmsg (UDP_SEGMENT),
    received coalesced (UDP_GRO), forwarded as one GSO send (what NETSUM_UDP_GSO=1 does);
  * gsonogro: as gso, the senders' sockets without UDP_GRO (the kernel segments the
    forwarder's GSO sends on delivery: what a peer without GRO costs the forwarder);
  * shm: a ring pair per sender in shared memory with the discipline of netsum/shmring.py
    (a frame copied out of one ring and into the other, a spin, then an eventfd doorbell).
A completed slot costs a switch n frames in and n out, which the forwarder does as n
forwards: F forwards/s allow at most F * K / n elements/s of all-reduce goodput (the ceiling
column).  vs_gloo.py --limits prints the same table in its run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from netsum.wire import packet_bytes

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Limit:
    kind: str
    senders: int
    window: int
    forwards: float            # per second
    forwarder_us: float        # forwarder CPU per forward
    senders_us: float          # all senders' CPU per forward (one send + one receive)

    @property
    def rtt_us(self) -> float:
        return 1e6 * self.senders * self.window / self.forwards if self.forwards else 0.0


def build(out_dir: Path) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc) for benchmarks/bare_limits.c")
    exe = out_dir / "bare_limits"
    subprocess.run([cc, "-O2", "-std=gnu11", "-Wall", "-o", str(exe),
                    str(HERE / "bare_limits.c")], check=True)
    return exe


def measure(exe: Path, kind: str, senders: int, frame: int, window: int, seconds: float,
            spin_us: int) -> Limit:
    out = subprocess.run([str(exe), kind, str(senders), str(frame), str(window),
                          str(seconds), str(spin_us)], capture_output=True, text=True,
                         check=True, timeout=seconds + 60).stdout.split()
    v = dict(zip(out[::2], map(float, out[1::2])))
    f = v["forwards_per_s"]
    total = f * v["seconds"]
    return Limit(kind, senders, window, f, 1e6 * v["forwarder_cpu_s"] / max(total, 1),
                 1e6 * v["senders_cpu_s"] / max(total, 1))


def run_all(seconds: float, senders: int, k: int, spin_us: int) -> list[Limit]:
    frame = packet_bytes(k)
    with tempfile.TemporaryDirectory(prefix="netsum-limits-") as tmp:
        exe = build(Path(tmp))
        return [measure(exe, kind, n, frame, w, seconds, spin_us)
                for n, w in ((senders, 64), (1, 1)) for kind in ("udp", "gso", "gsonogro", "shm")]


def print_limits(limits: list[Limit], k: int) -> None:
    print(f"bare C forward loops ({packet_bytes(k)}-byte frames, K={k}):")
    print(f"  {'kind':>8} {'senders':>7} {'window':>6} {'forwards/s':>11} {'fwd µs CPU':>10} "
          f"{'senders µs':>10} {'RTT µs':>8} {'ceiling M elem/s':>16}")
    for m in limits:
        ceiling = m.forwards * k / m.senders / 1e6
        print(f"  {m.kind:>8} {m.senders:>7} {m.window:>6} {m.forwards:>11.0f} "
              f"{m.forwarder_us:>10.2f} {m.senders_us:>10.2f} {m.rtt_us:>8.1f} "
              f"{ceiling if m.window > 1 else float('nan'):>16.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--spin-us", type=int, default=0)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print_limits(run_all(a.seconds, a.senders, a.k, a.spin_us), a.k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
