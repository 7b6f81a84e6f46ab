"""Packets per second through the embedded switch, next to a bare Python forwarding loop.

    python benchmarks/switch_pps.py [--seconds S] [--k 32,256] [--workers 4] [--profile]
                                    [--json path/to/netsum.json] [--no-udp] [--veth]

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
--profile prints a cProfile of the in-process aggregation run.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing as mp
import os
import pstats
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from switch.device import Device                                   # noqa: E402
from switch.entries import ActionCall, Lpm, Replica, TableEntry  # noqa: E402
from wireformat import K_SUPPORTED                                # noqa: E402

ROUTER_JSON = ROOT / "tests" / "switch_json" / "router.json"
STD_FIELDS = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
              ["instance_type", 32, False], ["packet_length", 32, False],
              ["enq_timestamp", 32, False], ["enq_qdepth", 19, False],
              ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
              ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
              ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
              ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False]]
AGG_PORT = 0x6E73


# -- the stand-in aggregation program ---------------------------------------------------------
def _f(h: str, f: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, f]}


def _hx(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(v)}


def _ex(op: str, left: Any, right: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def _assign(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    return {"op": "assign", "parameters": [dst, src]}


def standin_json(k: int) -> dict[str, Any]:
    """Same per-packet shape as netsum.p4: Ethernet/IPv4/UDP/16-byte header/K x bit<32>; exact
    job and member tables; one action with K register RMWs plus bitmap and count registers;
    multicast with an egress table on egress_rid; IPv4 checksum update."""
    r = json.loads(ROUTER_JSON.read_text())
    r["header_types"][0]["fields"] = [["idx", 32, False], ["acc", 32, False],
                                      ["bm", 32, False], ["cnt", 8, False],
                                      ["worker_bit", 32, False]]
    r["header_types"] += [
        {"name": "udp_t", "id": 4, "fields": [["sport", 16, False], ["dport", 16, False],
                                              ["len", 16, False], ["csum", 16, False]]},
        {"name": "ns_t", "id": 5, "fields": [["msg_type", 8, False], ["flags", 8, False],
                                             ["job_id", 16, False], ["slot", 16, False],
                                             ["exp", 8, False], ["count", 8, False],
                                             ["round", 32, False], ["offset", 32, False]]},
        {"name": "vals_t", "id": 6, "fields": [[f"v{i}", 32, False] for i in range(k)]},
    ]
    r["headers"] += [
        {"name": "udp", "id": 4, "header_type": "udp_t", "metadata": False},
        {"name": "ns", "id": 5, "header_type": "ns_t", "metadata": False},
        {"name": "vals", "id": 6, "header_type": "vals_t", "metadata": False},
    ]
    states = r["parsers"][0]["parse_states"]
    states[1]["transition_key"] = [_f("ipv4", "protocol")]
    states[1]["transitions"] = [{"type": "hexstr", "value": "0x11", "mask": None,
                                 "next_state": "parse_udp"},
                                {"type": "default", "value": None, "mask": None,
                                 "next_state": None}]
    states += [
        {"name": "parse_udp", "id": 2,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "udp"}]}],
         "transition_key": [_f("udp", "dport")],
         "transitions": [{"type": "hexstr", "value": hex(AGG_PORT), "mask": None,
                          "next_state": "parse_ns"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "parse_ns", "id": 3,
         "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "ns"}]},
                        {"op": "extract", "parameters": [{"type": "regular", "value": "vals"}]}],
         "transition_key": [], "transitions": [{"type": "default", "value": None, "mask": None,
                                                "next_state": None}]},
    ]
    r["deparsers"][0]["order"] = ["ethernet", "ipv4", "udp", "ns", "vals"]
    size = 4096
    r["register_arrays"] = [{"name": f"r{i}", "id": i, "size": size, "bitwidth": 32}
                            for i in range(k)]
    r["register_arrays"] += [{"name": "bitmap", "id": k, "size": size, "bitwidth": 32},
                             {"name": "contrib", "id": k + 1, "size": size, "bitwidth": 8}]
    reg = lambda n: {"type": "register_array", "value": n}  # noqa: E731
    idx = _f("scalars", "idx")
    prims = [_assign(idx, _ex("&", _ex("|", _ex("<<", _f("ns", "slot"), _hx(1)),
                                       _ex("&", _f("ns", "round"), _hx(1))), _hx(0xFFFFFFFF))),
             {"op": "register_read", "parameters": [_f("scalars", "bm"), reg("bitmap"), idx]},
             {"op": "register_write", "parameters": [reg("bitmap"), idx,
                                                     _ex("|", _f("scalars", "bm"),
                                                         _f("scalars", "worker_bit"))]},
             {"op": "register_read", "parameters": [_f("scalars", "cnt"), reg("contrib"), idx]},
             _assign(_f("scalars", "cnt"), _ex("&", _ex("+", _f("scalars", "cnt"), _hx(1)),
                                               _hx(0xFF))),
             {"op": "register_write", "parameters": [reg("contrib"), idx, _f("scalars", "cnt")]}]
    for i in range(k):
        v = _f("vals", f"v{i}")
        prims += [{"op": "register_read", "parameters": [_f("scalars", "acc"), reg(f"r{i}"),
                                                          idx]},
                  _assign(v, _ex("&", _ex("+", _f("scalars", "acc"), v), _hx(0xFFFFFFFF))),
                  {"op": "register_write", "parameters": [reg(f"r{i}"), idx, v]}]
    prims.append(_assign(_f("standard_metadata", "mcast_grp"), _hx(1)))
    r["actions"] = [
        {"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []},
        {"name": "drop", "id": 1, "runtime_data": [], "primitives": [
            {"op": "mark_to_drop", "parameters": [{"type": "header",
                                                   "value": "standard_metadata"}]}]},
        {"name": "set_member", "id": 2, "runtime_data": [{"name": "bit", "bitwidth": 32}],
         "primitives": [_assign(_f("scalars", "worker_bit"),
                                {"type": "runtime_data", "value": 0})]},
        {"name": "aggregate", "id": 3, "runtime_data": [], "primitives": prims},
        {"name": "rewrite", "id": 4, "runtime_data": [{"name": "mac", "bitwidth": 48},
                                                      {"name": "ip", "bitwidth": 32}],
         "primitives": [_assign(_f("ethernet", "dstAddr"), {"type": "runtime_data", "value": 0}),
                        _assign(_f("ipv4", "dstAddr"), {"type": "runtime_data", "value": 1}),
                        _assign(_f("udp", "csum"), _hx(0))]},
    ]

    def tbl(name: str, tid: int, key: list[Any], actions: list[tuple[str, int]], nxt: Any,
            default: tuple[int, list[str]]) -> dict[str, Any]:
        return {"name": name, "id": tid, "key": key, "match_type": "exact", "type": "simple",
                "max_size": 1024, "with_counters": False, "support_timeout": False,
                "direct_meters": None, "action_ids": [a[1] for a in actions],
                "actions": [a[0] for a in actions], "base_default_next": nxt,
                "next_tables": {a[0]: nxt for a in actions},
                "default_entry": {"action_id": default[0], "action_const": False,
                                  "action_data": default[1], "action_entry_const": False}}
    r["pipelines"][0] = {
        "name": "ingress", "id": 0, "init_table": "node_0", "action_profiles": [],
        "tables": [
            tbl("member", 0, [{"match_type": "exact", "name": "src", "target": ["ipv4",
                                                                                "srcAddr"],
                               "mask": None}], [("set_member", 2), ("drop", 1)], "job",
                (2, ["0x1"])),
            tbl("job", 1, [{"match_type": "exact", "name": "job", "target": ["ns", "job_id"],
                            "mask": None}], [("aggregate", 3), ("drop", 1)], None, (3, [])),
        ],
        "conditionals": [{"name": "node_0", "id": 0, "expression": _ex(
            "d2b", None, _f("ns", "$valid$")), "true_next": "member", "false_next": None}]}
    r["pipelines"][1] = {
        "name": "egress", "id": 1, "init_table": "replica", "action_profiles": [],
        "conditionals": [],
        "tables": [tbl("replica", 2, [{"match_type": "exact", "name": "rid",
                                       "target": ["standard_metadata", "egress_rid"],
                                       "mask": None}],
                       [("rewrite", 4), ("NoAction", 0)], None,
                       (4, ["0x020000000001", "0x0a000001"]))]}
    return r


def agg_frame(k: int, src: str = "10.0.0.2") -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    hdr = struct.pack(">BBHHBBI", 1, 0, 7, 5, 0, 0, 0)
    vals = struct.pack(f">{k}I", *range(k))
    return bytes(Ether(dst="02:00:00:00:00:fe", src="02:00:00:00:00:02") /
                 IP(src=src, dst="10.0.0.254") / UDP(sport=AGG_PORT, dport=AGG_PORT) /
                 (hdr + vals))


def router_frame() -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether(dst="02:00:00:00:00:fe", src="02:00:00:00:00:02") /
                 IP(src="10.1.0.2", dst="10.0.0.5") / UDP(sport=1, dport=2) / (b"r" * 64))


def netsum_traffic(k: int, workers: int, fuse: bool = True, native: bool | None = None
                   ) -> tuple[Device, list[tuple[int, bytes]]] | None:
    """netsum.p4 (built by netsum.build with netsum's compiler) configured with two jobs of
    `workers` members on the same 64 slots, and a round-robin stream of contributions, as
    workers send them: rounds 0 and 1 of every slot for job 3, then for job 4.  The stream can
    be replayed any number of times (here or through the daemon): each job finds the sets
    owned by the other, so its rounds 0 and 1 start fresh rounds again instead of being
    duplicates of finished ones.  `native`: None = as the daemon chooses (the native backend
    when it builds here), False = the Python path.  None when the program cannot be built."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from p4helpers import NetsumSwitch, netsum_config, netsum_frame, worker_host
        sw = NetsumSwitch(netsum_config(k))
        if not fuse or native is not None:    # fuse=False: actions and nodes as emitted
            from switch.pipeline import Pipeline
            sw.pipeline = Pipeline(json.loads(netsum_config(k)), fuse=fuse, native=native)
            sw.device.install(sw.pipeline)
    except Exception as e:           # compiler missing or failing: fall back to the stand-in
        print(f"  (netsum.p4 unavailable: {type(e).__name__}: {str(e)[:120]})")
        return None
    hosts = [worker_host(i) for i in range(workers)]
    slots = 64
    for job in (3, 4):
        sw.add_job(job, hosts, num_slots=slots)
    frames = [(h.port, netsum_frame(h, job_id=job, slot=r % slots, round=r // slots,
                                    values=list(range(k)), exp=130))
              for job in (3, 4) for r in range(2 * slots) for h in hosts]
    return sw.device, frames


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
    backend (switch/native, when it builds here), the Python path with its load-time rewrites
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


def make_device(kind: str, k: int, workers: int, json_path: Path | None) -> Device:
    dev = Device()
    if kind == "router":
        dev.install(Device.build_pipeline(ROUTER_JSON.read_bytes()))
        dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(  # type: ignore[union-attr]
            (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 2))))
        return dev
    cfg: Any = json_path.read_bytes() if json_path else standin_json(k)
    dev.install(Device.build_pipeline(cfg))
    if json_path is None:
        dev.pipeline.pre.mc_group_insert(  # type: ignore[union-attr]
            1, [Replica(p, p) for p in range(1, workers + 1)])
    return dev


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
    from switch.ports import PortSet, parse_port_spec
    dev = make_device(kind, k, workers, Path(json_path) if json_path else None)
    specs = [parse_port_spec(f"{n}@udp:127.0.0.1:{a},127.0.0.1:{b}") for n, a, b in ports]
    ps = PortSet(specs, dev)
    ps.open()
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
             frame: bytes, seconds: float) -> float:
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return over_link(target, args, lambda f: tx.sendto(f, ("127.0.0.1", in_port)), sinks,
                         frame, seconds)
    finally:
        tx.close()


def over_link(target: Any, args: tuple[Any, ...], send: Any, sinks: list[socket.socket],
              frame: bytes, seconds: float, outputs_per_input: float | None = None) -> float:
    """Send `frame` at a paced rate that keeps the target (run in a child process) busy;
    count what comes back on the sink sockets (pps of forwarded input frames).  By default
    every input comes out once on each sink."""
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=args + (ready,), daemon=True)
    proc.start()
    ready.wait(10)
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
    sw = over_udp(_switch_proc, (kind, k, workers, port_specs,
                                 str(json_path) if json_path else None), in_sw, sinks, frame,
                  seconds)
    bare = over_udp(_bare_proc, (in_sw, sinks[0].getsockname()[1]), in_sw, sinks[:1], frame,
                    seconds)
    for s in sinks:
        s.close()
    return sw, bare


def _netsum_switch_proc(k: int, workers: int, ports: list[tuple[int, int, int]],
                        ready: Any) -> None:
    from switch.ports import PortSet, parse_port_spec
    got = netsum_traffic(k, workers)
    assert got is not None
    dev = got[0]
    ps = PortSet([parse_port_spec(f"{n}@udp:127.0.0.1:{a},127.0.0.1:{b}") for n, a, b in ports],
                 dev)
    ps.open()
    ready.set()
    try:
        ps.run(lambda: False)
    finally:
        ps.close()


def udp_netsum_run(k: int, workers: int, seconds: float) -> float | None:
    """netsum.p4 through the daemon's UDP ports: each worker's contributions enter on its own
    port; every completed slot multicasts the result to all workers (one frame per input on
    average).  Returns contributions per second."""
    got = netsum_traffic(k, workers)
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
        tx.sendto(f, port_addr[port])
    try:
        return over_link(_netsum_switch_proc, (k, workers, specs), send, sinks, b"", seconds,
                         outputs_per_input=1.0)
    finally:
        tx.close()
        for sk in sinks:
            sk.close()


def _veth_switch_proc(kind: str, k: int, workers: int, ifaces: list[tuple[int, str]],
                      ready: Any) -> None:
    from switch.ports import PortSet, parse_port_spec
    dev = make_device(kind, k, workers, None)
    ps = PortSet([parse_port_spec(f"{n}@{i}") for n, i in ifaces], dev)
    ps.open()
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
    ap.add_argument("--k", type=_ks, default=list(K_SUPPORTED),
                    help="values per packet, a comma list (default: every supported K)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--json", type=Path, default=None, help="netsum.p4 compiled JSON")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-udp", action="store_true")
    ap.add_argument("--veth", action="store_true", help="also over veth pairs (root)")
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
            rate = udp_netsum_run(k, args.workers, args.seconds)
            if rate is not None:
                print(f"  udp ports   {f'netsum.p4 K={k}, job of {args.workers}':34s} "
                      f"{rate:10,.0f} contributions/s in (results multicast to all)")
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
