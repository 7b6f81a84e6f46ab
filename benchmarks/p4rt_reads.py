"""Wildcard reads through the embedded switch's P4Runtime server: time and the server's memory.

Two reads, the server in its own process (as netsum-switch runs it), a raw-stub client:
- counters: a wildcard CounterEntry read of one 65,536-cell counter (issue 27: 5 s before
  the cells were wire-encoded; PI answers it in well under a second);
- registers: a wildcard RegisterEntry read of every register of netsum.p4 at --k (K=256: ~262
  registers x 8192 cells; issue 25: the server grew from 97 MiB to 6.1 GiB before the read
  was streamed in ~1 MB ReadResponses).
For each: seconds, entities, ReadResponses, and the server's RSS before, its peak (VmHWM,
reset before each read) and after.  Also, in this process, the cost per cell of building the
same CounterEntry messages with the protobuf runtime vs the wire encoder, side by side.
Figures only; nothing here is a pass/fail threshold.

    .venv/bin/python benchmarks/p4rt_reads.py [--k 256] [--cells 65536]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from p4.v1 import p4runtime_pb2 as pb

from netsum import p4c as compiler
from netsum.build import ensure_built
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.schema import load_p4info
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer
from netsum.switch.p4rt import wire

COUNTER_P4 = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<16> idx; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    counter(CELLS, CounterType.packets_and_bytes) hits;
    apply { hits.count((bit<32>)h.h.idx); sm.egress_spec = 1; }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def serve() -> int:
    """Child mode: prints its port, runs until stdin closes."""
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0").start()
    print(srv.port, flush=True)
    sys.stdin.read()
    srv.stop(None)
    return 0


def status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024        # MiB
    return out


def reset_peak(pid: int) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def timed_read(c: SwitchClient, pid: int, entity: pb.Entity, parse: bool) -> str:
    """One wildcard read.  parse=False takes the ReadResponses as bytes (the server's cost and
    the transfer); parse=True decodes them with this process's protobuf runtime, as a Python
    client does (pure Python under protobuf 3.20: that, not the server, dominates then)."""
    before = status(pid)["VmRSS"]
    reset_peak(pid)
    request = pb.ReadRequest(device_id=0, entities=[entity])
    t0 = time.perf_counter()
    n = responses = size = 0
    if parse:
        for r in c.stub.Read(request):
            n += len(r.entities)
            responses += 1
    else:
        raw = c.channel.unary_stream("/p4.v1.P4Runtime/Read",
                                     request_serializer=pb.ReadRequest.SerializeToString,
                                     response_deserializer=lambda b: b)
        for body in raw(request):
            size += len(body)
            responses += 1
    dt = time.perf_counter() - t0
    st = status(pid)
    what = f"{n:>8} entities" if parse else f"{size / 2**20:8.1f} MiB as bytes"
    return (f"{dt:7.2f} s  {what} in {responses:>4} responses  server RSS "
            f"{before} MiB -> peak {st['VmHWM']} MiB -> {st['VmRSS']} MiB")


def encode_costs(cells: int) -> str:
    values = [(i, i * 3, i * 300) for i in range(cells)]
    t0 = time.perf_counter()
    msgs = []
    for i, p, b in values:
        e = pb.Entity()
        e.counter_entry.counter_id = 1
        e.counter_entry.index.index = i
        e.counter_entry.data.packet_count = p
        e.counter_entry.data.byte_count = b
        msgs.append(e)
    pb.ReadResponse(entities=msgs).SerializeToString()
    proto = time.perf_counter() - t0
    t0 = time.perf_counter()
    wire.counter_entities(1, values)
    fast = time.perf_counter() - t0
    return (f"encoding {cells} CounterEntry: protobuf runtime {proto * 1e6 / cells:.1f} us/cell, "
            f"wire encoder {fast * 1e6 / cells:.1f} us/cell ({proto / fast:.1f}x)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=256, help="netsum.p4's K for the register read")
    ap.add_argument("--cells", type=int, default=65536, help="cells of the counter")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    counter = compiler.compile_source(COUNTER_P4.replace("CELLS", str(args.cells)))
    netsum_json, netsum_p4info = ensure_built(args.k)
    child = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        with SwitchClient(Endpoint(f"127.0.0.1:{port}", 0, (0, 1)), timeout=None) as c:
            c.connect()
            c.set_pipeline(counter.p4info, counter.json_text().encode())
            counters = pb.Entity(counter_entry=pb.CounterEntry())
            for parse in (False, True):
                print(f"counter read, {args.cells} cells{', parsed' if parse else ''}: "
                      + timed_read(c, child.pid, counters, parse))
            c.set_pipeline(load_p4info(netsum_p4info), netsum_json.read_bytes())
            print(f"register read, netsum.p4 K={args.k}: "
                  + timed_read(c, child.pid, pb.Entity(register_entry=pb.RegisterEntry()),
                               False))
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=60)
    print(encode_costs(args.cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
