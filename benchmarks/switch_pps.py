"""Packets per second through the embedded switch, next to a bare Python forwarding loop.

    python benchmarks/switch_pps.py [--seconds S] [--k 32,256] [--workers 4] [--profile]
                                    [--json path/to/netsum.json] [--no-udp] [--veth]
                                    [--rounds N]

Measured side by side in one run (ratios are what to compare across machines):
  (a) the simple IPv4 router (tests/switch_json/router.json, one lpm entry),
  (b) aggregation packets on a stand-in JSON (generated below) that does the per-packet work of
      netsum.p4 on every packet: K register read-modify-writes, the result multicast to N ports
      with a per-replica egress rewrite, IPv4 checksum update (--json runs another program
      instead, with default actions only);
  (c) netsum.p4 itself, compiled by netsum's compiler (netsum.build) and configured like the
      controller does (tests/p4helpers.NetsumSwitch): N workers streaming contributions.
Paths: in-process `Device.process`; the daemon's port loop over UDP on 127.0.0.1 (switch in a
child process, same PortSet/Device code as `netsum-switch`), next to a bare recv->send loop
over the same sockets; over veth with AF_PACKET when run as root with --veth.
netsum.p4 through the daemon runs its native pipeline once with the C port loop
(netsum/switch/native/io.py: recvmmsg/sendmmsg) and once with the Python loop, alternately, --rounds
times each: contributions/s and the switch process's CPU µs per contribution, side by side.
--profile prints a cProfile of the in-process aggregation run.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import multiprocessing as mp
import os
import pstats
import socket
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from pps_traffic import agg_frame, make_device, netsum_traffic, router_frame
from netsum.wire import K_HARDWARE_MAX, K_SUPPORTED


def inprocess_netsum(k: int, workers: int, seconds: float, profile: bool) -> float | None:
    got = netsum_traffic(k, workers)
    if got is None:
        return None
    dev, frames = got
    for p, f in frames:
        dev.process(p, f)
    prof = cProfile.Profile() if profile else None
    n = 0
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    while time.perf_counter() - t0 < seconds:
        for p, f in frames:
            dev.process(p, f)
        n += len(frames)
    rate = n / (time.perf_counter() - t0)
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    assert dev.stats.internal_errors == 0
    return rate


def netsum_side_by_side(k: int, workers: int, seconds: float) -> dict[str, float] | None:
    """Medians of alternating 0.25 s rounds of three pipelines of the same program: the native
    backend (netsum/switch/native, when it builds here), the Python path with its load-time rewrites
    (register lanes, guard fusion, inline table lookups, replica patching) and the Python path
    with `fuse=False`.  Rates are contributions per second of this process's CPU time: on a
    shared machine the wall clock mostly measures the other processes."""
    runs = {}
    for name, fuse, native in (("native", True, True), ("python", True, False),
                               ("fuse=False", False, False)):
        got = netsum_traffic(k, workers, fuse, native)
        if got is None:
            return None
        pl = got[0].pipeline
        if native and (pl is None or pl.native is None):
            print(f"  (native backend not used: {pl.native_status if pl else '-'})")
            continue
        runs[name] = got
    rates: dict[str, list[float]] = {name: [] for name in runs}
    t_end = time.perf_counter() + len(runs) * seconds
    while time.perf_counter() < t_end or min(len(r) for r in rates.values()) < 3:
        for name, (dev, frames) in runs.items():
            n, t0, c0 = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - t0 < 0.25:
                for p, f in frames:
                    dev.process(p, f)
                n += len(frames)
            rates[name].append(n / max(1e-9, time.process_time() - c0))
    for dev, _ in runs.values():
        assert dev.stats.internal_errors == 0
    return {name: statistics.median(r) for name, r in rates.items()}


# -- measurements -----------------------------------------------------------------------------
def inprocess(kind: str, k: int, workers: int, seconds: float, json_path: Path | None,
              profile: bool = False) -> tuple[float, int]:
    dev = make_device(kind, k, workers, json_path)
    frame = router_frame() if kind == "router" else agg_frame(k)
    outs = len(dev.process(1, frame))
    n = 0
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    while True:
        for _ in range(200):
            dev.process(1, frame)
        n += 200
        if time.perf_counter() - t0 > seconds:
            break
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    return n / (time.perf_counter() - t0), outs


def _switch_proc(kind: str, k: int, workers: int, ports: list[tuple[int, int, int]],
                 json_path: str | None, ready: Any) -> None:
    from netsum.switch.ports import PortSet, parse_port_spec
    dev = make_device(kind, k, workers, Path(json_path) if json_path else None)
    specs = [parse_port_spec(f"{n}@udp:127.0.0.1:{a},127.0.0.1:{b}") for n, a, b in ports]
    ps = PortSet(specs, dev)
    ps.open()
    gc.collect()        # run() collects once more: a large forked heap takes a while
    ready.set()
    try:
        ps.run(lambda: False)
    finally:
        ps.close()


def _bare_proc(port_in: int, peer: int, ready: Any) -> None:
    """The ceiling: recv a datagram, send it on; nothing else."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", port_in))
    ready.set()
    dst = ("127.0.0.1", peer)
    while True:
        data = s.recv(65536)
        s.sendto(data, dst)


def over_udp(target: Any, args: tuple[Any, ...], in_port: int, sinks: list[socket.socket],
             frame: bytes, seconds: float, tx: socket.socket) -> float:
    """over_link with frames sent from `tx` (the switch takes a port's frames only from its
    peer's address)."""
    return over_link(target, args, lambda f: tx.sendto(f, ("127.0.0.1", in_port)), sinks,
                     frame, seconds)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def over_link(target: Any, args: tuple[Any, ...], send: Any, sinks: list[socket.socket],
              frame: bytes, seconds: float, outputs_per_input: float | None = None,
              cpu: dict[str, float] | None = None) -> float:
    """Send `frame` at a paced rate that keeps the target (run in a child process) busy;
    count what comes back on the sink sockets (pps of forwarded input frames).  By default
    every input comes out once on each sink.  `cpu` gets the target's CPU seconds per
    forwarded input ("per_input")."""
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=args + (ready,), daemon=True)
    proc.start()
    # Building netsum.p4's device takes 6-10 s on a loaded 2-core machine (load average 9):
    # a shorter wait started the measurement before the switch read anything (0 pkt/s).
    if not ready.wait(120):
        proc.kill()
        raise RuntimeError(f"{target.__name__}: the process under test was not ready in 120 s")
    assert proc.pid is not None
    cpu0 = cpu_seconds(proc.pid)
    for s in sinks:
        s.setblocking(False)
    received = 0
    sent = 0
    window = 64          # outstanding input frames: keeps the target busy, never floods it
    t0 = time.perf_counter()
    deadline = t0 + seconds
    last_progress = t0
    n_out: float = len(sinks) if outputs_per_input is None else outputs_per_input
    while True:
        now = time.perf_counter()
        if now >= deadline:
            break
        while sent - received / n_out < window:
            send(frame)
            sent += 1
        got = 0
        for s in sinks:
            try:
                while True:
                    _data, addr = s.recvfrom(65536)
                    if s.family == socket.AF_PACKET and addr[2] == 4:
                        continue          # PACKET_OUTGOING: our own send seen by the tap
                    got += 1
            except BlockingIOError:
                pass
        if got:
            received += got
            last_progress = now
        else:
            time.sleep(0.0001)
            if now - last_progress > 0.05:    # frames lost somewhere: reopen the window
                sent = int(received / n_out)
                last_progress = now
    elapsed = time.perf_counter() - t0
    if cpu is not None:
        cpu["per_input"] = (cpu_seconds(proc.pid) - cpu0) / max(1.0, received / n_out)
    proc.kill()
    proc.join()
    return received / n_out / elapsed


def udp_runs(kind: str, k: int, workers: int, seconds: float,
             json_path: Path | None) -> tuple[float, float]:
    frame = router_frame() if kind == "router" else agg_frame(k)
    nout = 1 if kind == "router" else workers
    nums = list(range(1, nout + 1)) if kind != "router" else [2]
    from netsum.rig import free_udp_ports      # the one definition (links, benchmarks)
    ports = free_udp_ports(2 + 2 * max(nout, 1))
    in_sw, in_src = ports[0], ports[1]
    sinks = []
    port_specs = [(1, in_sw, in_src)]
    for i, num in enumerate(nums):
        sw_p, sink_p = ports[2 + 2 * i], ports[3 + 2 * i]
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind(("127.0.0.1", sink_p))
        sinks.append(s)
        if num == 1:          # port 1 doubles as ingress; its output goes to its sink
            port_specs[0] = (1, in_sw, sink_p)
        else:
            port_specs.append((num, sw_p, sink_p))
    # port 1's peer sends: the router's in_src, or the aggregation's sink of port 1
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if kind == "router":
        tx.bind(("127.0.0.1", in_src))
    sw = over_udp(_switch_proc, (kind, k, workers, port_specs,
                                 str(json_path) if json_path else None), in_sw, sinks, frame,
                  seconds, tx if kind == "router" else sinks[0])
    bare = over_udp(_bare_proc, (in_sw, sinks[0].getsockname()[1]), in_sw, sinks[:1], frame,
                    seconds, tx)
    for s in [*sinks, tx]:
        s.close()
    return sw, bare


def _netsum_switch_proc(k: int, workers: int, ports: list[tuple[int, int, int]],
                        ready: Any) -> None:
    from netsum.switch.ports import PortSet, parse_port_spec
    got = netsum_traffic(k, workers, native=True)
    assert got is not None
    dev = got[0]
    ps = PortSet([parse_port_spec(f"{n}@udp:127.0.0.1:{a},127.0.0.1:{b}") for n, a, b in ports],
                 dev)
    ps.open()
    gc.collect()        # run() collects once more: a large forked heap takes a while
    ready.set()
    try:
        ps.run(lambda: False)
    finally:
        ps.close()


def udp_netsum_run(k: int, workers: int, seconds: float, io: str
                   ) -> tuple[float, float, str] | None:
    """netsum.p4 (native pipeline) through the daemon's UDP ports with the C or the Python
    port loop (`io`): each worker's contributions enter on its own port; every completed slot
    multicasts the result to all workers (one frame per input on average).  Returns
    (contributions per second, the switch process's CPU µs per contribution, the loop the
    switch reported)."""
    got = netsum_traffic(k, workers, native=True)
    if got is None:
        return None
    frames = got[1]
    from netsum.rig import free_udp_ports      # the one definition (links, benchmarks)
    udp = free_udp_ports(2 * workers)
    sinks = []
    specs = []
    for i in range(workers):
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sink.bind(("127.0.0.1", udp[2 * i + 1]))
        sinks.append(sink)
        specs.append((i + 1, udp[2 * i], udp[2 * i + 1]))
    port_addr = {n: ("127.0.0.1", a) for n, a, _ in specs}
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pos = [0]

    def send(_frame: bytes) -> None:
        port, f = frames[pos[0] % len(frames)]
        pos[0] += 1
        # from the port's peer: the switch drops datagrams from any other address
        sinks[port - 1].sendto(f, port_addr[port])
    cpu: dict[str, float] = {}
    os.environ["NETSUM_NATIVE_IO"] = "1" if io == "c" else "0"    # the forked switch reads it
    try:
        rate = over_link(_netsum_switch_proc, (k, workers, specs), send, sinks, b"", seconds,
                         outputs_per_input=1.0, cpu=cpu)
        return rate, 1e6 * cpu["per_input"], io
    finally:
        os.environ.pop("NETSUM_NATIVE_IO", None)
        tx.close()
        for sk in sinks:
            sk.close()


def _veth_switch_proc(kind: str, k: int, workers: int, ifaces: list[tuple[int, str]],
                      ready: Any) -> None:
    from netsum.switch.ports import PortSet, parse_port_spec
    dev = make_device(kind, k, workers, None)
    ps = PortSet([parse_port_spec(f"{n}@{i}") for n, i in ifaces], dev)
    ps.open()
    gc.collect()        # run() collects once more: a large forked heap takes a while
    ready.set()
    try:
        ps.run(lambda: False)
    finally:
        ps.close()


def _raw(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((iface, 0))
    return s


def _veth_bare_proc(iface_in: str, iface_out: str, ready: Any) -> None:
    rx, tx = _raw(iface_in), _raw(iface_out)
    ready.set()
    while True:
        data, addr = rx.recvfrom(65536)
        if addr[2] != 4:              # not our own outgoing frames
            tx.send(data)


def veth_runs(kind: str, k: int, workers: int, seconds: float) -> tuple[float, float]:
    """Router / stand-in over veth pairs created here (and deleted in finally)."""
    nums = [2] if kind == "router" else list(range(1, workers + 1))
    pairs = sorted({1, *nums})
    tag = os.getpid() % 10000
    names = {n: (f"bsw{tag}p{n}", f"bh{tag}p{n}") for n in pairs}
    try:
        for a, b in names.values():
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                           check=True, capture_output=True)
            for i in (a, b):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1"],
                               capture_output=True)
                subprocess.run(["ip", "link", "set", i, "up"], check=True,
                               capture_output=True)
        frame = router_frame() if kind == "router" else agg_frame(k)
        tx = _raw(names[1][1])
        sinks = [_raw(names[n][1]) for n in nums]
        sw = over_link(_veth_switch_proc, (kind, k, workers, [(n, names[n][0]) for n in pairs]),
                       tx.send, sinks, frame, seconds)
        bare = over_link(_veth_bare_proc, (names[1][0], names[nums[0]][0]), tx.send,
                         sinks[:1], frame, seconds)
        for s in sinks + [tx]:
            s.close()
        return sw, bare
    finally:
        for a, _ in names.values():
            subprocess.run(["ip", "link", "del", a], capture_output=True)


def _ks(text: str) -> list[int]:
    ks = [int(x) for x in text.split(",") if x]
    bad = [k for k in ks if k not in K_SUPPORTED]
    if bad or not ks:
        raise argparse.ArgumentTypeError(f"K must be among {K_SUPPORTED}, got {text!r}")
    return ks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--k", type=_ks, default=[k for k in K_SUPPORTED if k <= K_HARDWARE_MAX],
                    help="values per packet, a comma list (default: every K up to 256; "
                         "512-2048 on request)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--json", type=Path, default=None, help="netsum.p4 compiled JSON")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-udp", action="store_true")
    ap.add_argument("--veth", action="store_true", help="also over veth pairs (root)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per port loop for netsum.p4 through the daemon (medians)")
    args = ap.parse_args()
    json_path = args.json
    k0 = args.k[0]
    print(f"switch_pps: K={','.join(map(str, args.k))}, {args.workers} multicast replicas, "
          f"{args.seconds}s per run; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    for kind in ("router", "agg"):
        pps, outs = inprocess(kind, k0, args.workers, args.seconds,
                              json_path if kind == "agg" else None)
        label = "ipv4 router" if kind == "router" else \
            f"aggregation ({'netsum.p4' if json_path else 'stand-in'}, K={k0})"
        print(f"  in-process  {label:34s} {pps:10,.0f} pkt/s in  ({outs} out per packet)")
    for k in args.k:
        got = netsum_side_by_side(k, args.workers, args.seconds)
        if got is not None:
            names = " | ".join(got)
            rates = " | ".join(f"{v:,.0f}" for v in got.values())
            us = " | ".join(f"{1e6 / v:.2f}" for v in got.values())
            base = got["fuse=False"]
            ratios = " | ".join(f"{v / base:.1f}" for v in got.values())
            print(f"  in-process  netsum.p4 K={k} ({names}): {rates} contributions per CPU-s"
                  f"; {us} us CPU per contribution; x{ratios} of fuse=False")
    if args.profile:
        if inprocess_netsum(args.k[-1], args.workers, args.seconds, True) is None:
            inprocess("agg", k0, args.workers, args.seconds, json_path, profile=True)
    if not args.no_udp:
        for kind in ("router", "agg"):
            sw, bare = udp_runs(kind, k0, args.workers, args.seconds,
                                json_path if kind == "agg" else None)
            label = "ipv4 router" if kind == "router" else f"aggregation (K={k0})"
            print(f"  udp ports   {label:34s} {sw:10,.0f} pkt/s in  | bare recv->send loop "
                  f"{bare:10,.0f} pkt/s | ratio {sw / bare:5.2f}")
        for k in args.k:
            # C and Python port loop alternately, medians of --rounds runs each
            got: dict[str, list[tuple[float, float]]] = {"c": [], "python": []}
            for _ in range(args.rounds):
                for io in got:
                    r = udp_netsum_run(k, args.workers, args.seconds, io)
                    if r is not None:
                        got[io].append(r[:2])
            if not got["c"] or not got["python"]:
                continue
            med = {io: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
                   for io, v in got.items()}
            print(f"  udp ports   {f'netsum.p4 K={k}, job of {args.workers}':34s} "
                  f"C loop {med['c'][0]:9,.0f} | Python loop {med['python'][0]:9,.0f} "
                  f"contributions/s (x{med['c'][0] / med['python'][0]:.2f}); switch CPU "
                  f"{med['c'][1]:.2f} | {med['python'][1]:.2f} us per contribution "
                  f"(x{med['python'][1] / med['c'][1]:.2f} less)", flush=True)
    if args.veth:
        if os.geteuid() != 0:
            print("  veth: skipped (needs root)")
        else:
            for kind in ("router", "agg"):
                sw, bare = veth_runs(kind, k0, args.workers, args.seconds)
                label = "ipv4 router" if kind == "router" else f"aggregation (K={k0})"
                print(f"  veth        {label:34s} {sw:10,.0f} pkt/s in  | bare recv->send loop "
                      f"{bare:10,.0f} pkt/s | ratio {sw / bare:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
