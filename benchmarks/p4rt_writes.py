"""Table-entry inserts per second through the embedded switch's P4Runtime server.

Measured side by side in one run, on l2_mcast (real p4c output) with exact-match `dmac` entries:
- service: DeviceService.write with no gRPC (the server's own cost per update);
- gRPC batch: one WriteRequest of --batch updates per RPC;
- gRPC single: one update per WriteRequest (what p4runtime-shell's .insert() sends);
- p4runtime-shell: TableEntry(...).insert() as a user writes it;
- p4runtime-shell client only: building the same TableEntry and its protobuf, nothing sent;
- empty RPC: Capabilities round trips, the floor any single-update Write sits on.
Ratios are printed against gRPC single; nothing here is a pass/fail threshold.  The server
runs in its own process (as netsum-switch does), so client and server do not share a GIL.

    .venv/bin/python benchmarks/p4rt_writes.py [--entries 2000] [--batch 100]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer
from netsum.switch.p4rt.service import DeviceService

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "p4c"
DMAC, FORWARD = 36472220, 25122418


def insert(key: int) -> pb.Update:
    u = pb.Update(type=pb.Update.INSERT)
    te = u.entity.table_entry
    te.table_id = DMAC
    te.match.add(field_id=1).exact.value = key.to_bytes(6, "big")
    te.action.action.action_id = FORWARD
    te.action.action.params.add(param_id=1, value=b"\x01")
    return u


def timed(n: int, fn: Callable[[], None]) -> float:
    """Operations per second of fn() doing n operations."""
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def serve() -> int:
    """Child mode: a device with a server on a free loopback port; prints the port, runs until
    stdin closes."""
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0").start()
    print(srv.port, flush=True)
    sys.stdin.read()
    srv.stop(None)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=2000, help="entries per measurement")
    ap.add_argument("--batch", type=int, default=100, help="updates per batched WriteRequest")
    ap.add_argument("--fixtures", type=Path, default=FIXTURES, help="folder of l2_mcast.*")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    p4info_path = args.fixtures / "l2_mcast.p4info.txtpb"
    json_path = args.fixtures / "l2_mcast.json"
    if not p4info_path.exists():
        print(f"error: {p4info_path} not found (pass --fixtures)", file=sys.stderr)
        return 2
    n = min(args.entries, 4000)            # dmac holds 4096 entries
    info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
    device_json = json_path.read_bytes()
    results: dict[str, float] = {}

    # Server cost without gRPC.
    dev = Device(device_id=0)
    svc = DeviceService(dev)
    cfg = pb.ForwardingPipelineConfig(p4info=info, p4_device_config=device_json)
    svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, cfg)
    updates = [insert(k) for k in range(n)]
    results["service (no gRPC)"] = timed(n, lambda: svc.write(updates))

    child = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        with SwitchClient(Endpoint(f"127.0.0.1:{port}", 0, (0, 1)), timeout=None) as c:
            c.connect()

            def fresh() -> None:
                c.set_pipeline(info, device_json)

            fresh()
            batches = [updates[i:i + args.batch] for i in range(0, n, args.batch)]
            results[f"gRPC batch of {args.batch}"] = timed(n, lambda: [c.write(b) for b in batches])
            fresh()
            results["gRPC single"] = timed(n, lambda: [c.write([u]) for u in updates])
            fresh()
            caps = pb.CapabilitiesRequest()
            results["empty RPC (Capabilities)"] = timed(
                n, lambda: [c.stub.Capabilities(caps) for _ in range(n)])

        import p4runtime_sh.shell as sh
        sh.setup(device_id=0, grpc_addr=f"127.0.0.1:{port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(p4info_path), str(json_path)), verbose=False)
        try:
            m = min(n, 1000)

            def entry(k: int) -> object:
                te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
                te.match["hdr.eth.dst"] = str(k)
                te.action["port"] = "1"
                return te

            results["p4runtime-shell client only"] = timed(
                m, lambda: [entry(k).msg() for k in range(m)])  # type: ignore[attr-defined]
            results["p4runtime-shell insert()"] = timed(
                m, lambda: [entry(k).insert() for k in range(m)])  # type: ignore[attr-defined]
        finally:
            sh.teardown()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)

    base = results["gRPC single"]
    print(f"table-entry inserts per second ({n} entries; p4runtime-shell {min(n, 1000)})")
    print(f"{'path':<32} {'entries/s':>10} {'vs gRPC single':>15}")
    for name, rate in results.items():
        print(f"{name:<32} {rate:>10.0f} {rate / base:>14.2f}x")
    shell_total = 1 / results["p4runtime-shell insert()"]
    shell_client = 1 / results["p4runtime-shell client only"]
    print(f"p4runtime-shell spends {100 * shell_client / shell_total:.0f}% of each insert() "
          "building the entry on the client side")
    return 0


if __name__ == "__main__":
    sys.exit(main())
