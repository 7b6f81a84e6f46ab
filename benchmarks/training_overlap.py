#!/usr/bin/env python3
"""Does the DDP hook overlap communication with backward?  Measured side by side in one run.

Two ranks train the digits CNN through the real switch (netsum-switch on UDP-tunnel ports) with
an artificial latency added to every packet the workers receive (`--delay`, default 20 ms: each
bucket then costs at least two of them, the exponent bootstrap and the data).  Every step is
taken three ways, interleaved, so the machine's noise hits all of them alike:

  compute  the hook returns at once (no communication): forward + backward + optimizer
  serial   the hook waits for each bucket's sum before backward goes on: compute plus the
           communication one bucket after the other
  hook-1lane  netsum_hook, but every bucket dealt to the same lane: communication overlaps
           backward, one bucket on the wire at a time
  hook     netsum_hook as shipped: the future is returned at once, buckets go out on the
           job's lanes while backward computes the next ones

and prints the medians and `hook / serial`, the fraction of compute + serialised
communication that the hooked step takes (< 1: communication was hidden).

    .venv/bin/python benchmarks/training_overlap.py [--steps 30] [--delay 0.02]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

MODES = ("compute", "serial", "hook-1lane", "hook")


def rank_main(args: argparse.Namespace) -> int:
    import datetime

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from netsum.training.digits import DigitsCNN, batches, load_digits_split
    from netsum.training.hook import NetsumHookState, netsum_hook
    from netsum.training.stepsplit import split_step

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = load_digits_split(0)
    model = DigitsCNN(args.width)
    ddp = DDP(model, bucket_cap_mb=args.bucket_kb / 1024)
    state = NetsumHookState.from_env(lanes=args.lanes, slots=args.slots, timeout=args.timeout,
                                     delay=args.delay)
    mode = {"now": "hook"}

    def hook(st: NetsumHookState,
             bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        if mode["now"] == "compute":
            fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
            fut.set_result(bucket.buffer() / world)
            return fut
        if mode["now"] == "hook-1lane":
            st.engine.reset_order()     # the same on every rank: each bucket to lane 0
        out = netsum_hook(st, bucket)
        if mode["now"] == "serial":
            out.wait()
        return out

    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    it = batches(len(data.y_train), args.batch, rank, world, 0)
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    hidden: list[float] = []
    comm: list[float] = []
    for step in range(args.steps + 2):      # two warm-up rounds (bucket rebuild, caches)
        for m in MODES:
            mode["now"] = m
            idx = torch.from_numpy(next(it))
            t0 = time.monotonic()
            loss = loss_fn(ddp(data.x_train[idx]), data.y_train[idx])
            loss.backward()
            t1 = time.monotonic()
            opt.step()
            opt.zero_grad()
            t2 = time.monotonic()
            traces = state.take_traces()
            if step >= 2:
                walls[m].append(t2 - t0)
                if m == "hook":
                    sp = split_step(t0, t1, t2, [(t.submitted, t.finished) for t in traces])
                    hidden.append(sp.hidden)
                    comm.append(sp.comm)
    dist.barrier()
    state.close()
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "overlap.json").write_text(json.dumps(
            {"walls": walls, "hidden": hidden, "comm": comm,
             "params": sum(p.numel() for p in model.parameters())}))
    dist.destroy_process_group()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--delay", type=float, default=0.02)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--bucket-kb", type=float, default=4.0)
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--slots", type=int, default=256)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--out", type=Path, default=Path("results/bench-overlap"))
    p.add_argument("--comm", default="")          # given by start_ranks, unused here
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank or "RANK" in os.environ:
        return rank_main(args)

    from netsum.rig import Rig, RigConfig
    from netsum.training.compare import TrainOptions, start_ranks, wait_ranks

    opts = TrainOptions(args.out, ranks=2, steps=args.steps, lanes=args.lanes, slots=args.slots,
                        timeout=args.timeout,
                        extra=("--delay", str(args.delay), "--batch", str(args.batch),
                               "--width", str(args.width), "--bucket-kb", str(args.bucket_kb)))
    print(f"training_overlap: 2 ranks, {args.steps} steps per way, +{args.delay * 1e3:.0f} ms "
          f"per received packet, {args.lanes} lanes", flush=True)
    with Rig(RigConfig(args.out / "rig", workers=2)) as rig:
        rig.detach_controller()
        children = start_ranks(rig, "bench", args.out, opts, script=Path(__file__).resolve())
        ok, error = wait_ranks(children, 60 + 10 * args.steps)
        if not ok:
            print(f"training_overlap: error: {error}", file=sys.stderr)
            return 1
    doc = json.loads((args.out / "overlap.json").read_text())
    med = {m: statistics.median(doc["walls"][m]) for m in MODES}
    comm_serial = med["serial"] - med["compute"]
    print(f"  model: {doc['params']} parameters, batch {args.batch} per rank")
    print(f"  {'way':8} {'median step ms':>15}")
    for m in MODES:
        print(f"  {m:8} {1e3 * med[m]:15.1f}")
    print(f"  serialised communication (serial - compute): {1e3 * comm_serial:.1f} ms")
    print(f"  hidden behind backward per hooked step (median): "
          f"{1e3 * statistics.median(doc['hidden']):.1f} ms of "
          f"{1e3 * statistics.median(doc['comm']):.1f} ms busy")
    for m in ("hook-1lane", "hook"):
        print(f"  ratio {m} / (compute + serialised communication) = "
              f"{med[m] / med['serial']:.2f}  (< 1: communication overlapped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
