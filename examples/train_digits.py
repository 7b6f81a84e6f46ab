#!/usr/bin/env python3
"""Train a small CNN on scikit-learn's digits with DDP, gradients summed by the P4 switch.

    torchrun --nproc-per-node 2 examples/train_digits.py --comm netsum-hook --out results/d
    torchrun --nproc-per-node 2 examples/train_digits.py --comm gloo --out results/g

--comm netsum-hook     DDP + `netsum_hook` (each bucket through the switch, overlapping backward)
--comm netsum-backend  init_process_group("netsum"): DDP's own all-reduce through the switch
--comm gloo            DDP with gloo's all-reduce (the baseline; timed by an equivalent hook)

The netsum variants need NETSUM_TOPOLOGY (the topology file of the switch) and, in the
unprivileged mode, NETSUM_FRAMES=127.0.0.1:PORT (this rank's UDP-tunnel switch port); `netsum
train` (or `netsum demo --train`) starts a switch and sets both.  Rank 0 writes
OUT/metrics.json: per-step loss and time split, test accuracy every --eval-every steps.
"""
import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from netsum.training.digits import DigitsCNN, accuracy, batches, load_digits_split
from netsum.training.stepsplit import split_step

COMMS = ("netsum-hook", "netsum-backend", "gloo")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--comm", choices=COMMS, default="netsum-hook")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.15,
                   help="SGD (momentum 0.9) peak learning rate, cosine decay to 0 over --steps")
    p.add_argument("--width", type=int, default=8, help="CNN width (8: 3,658 parameters)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bucket-kb", type=float, default=4.0,
                   help="DDP bucket cap in KiB (small: several buckets to overlap)")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--lanes", type=int, default=4, help="netsum: buckets in flight at once")
    p.add_argument("--slots", type=int, default=256, help="netsum: the job's slot window")
    p.add_argument("--delay", type=float, default=0.0,
                   help="netsum-hook: artificial latency (s) added to every received packet")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds without progress before a step fails (a dead peer)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dump-step1", action="store_true",
                   help="save each rank's step-1 bucket inputs and parameters (tests)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank = int(os.environ.get("RANK", "0"))
    try:
        return train(args)
    except Exception as exc:  # noqa: BLE001 - one line at the edge
        print(f"train_digits: rank {rank}: error: {type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}", file=sys.stderr,
              flush=True)
        # A dead peer leaves gloo's teardown waiting; the error is already said.
        os._exit(1)


def train(args: argparse.Namespace) -> int:
    timeout = datetime.timedelta(seconds=max(30.0, 3 * args.timeout))
    if args.comm == "netsum-backend":
        import netsum.training.backend  # noqa: F401 - registers backend "netsum"
        os.environ.setdefault("NETSUM_LANES", str(args.lanes))
        os.environ.setdefault("NETSUM_SLOTS", str(args.slots))
        os.environ.setdefault("NETSUM_TIMEOUT", str(args.timeout))
        dist.init_process_group("netsum", timeout=timeout)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    data = load_digits_split(args.seed)
    model = DigitsCNN(args.width)
    ddp = DDP(model, bucket_cap_mb=args.bucket_kb / 1024)
    state: object = None
    if args.comm == "netsum-hook":
        from netsum.training.hook import NetsumHookState, netsum_hook
        state = NetsumHookState.from_env(lanes=args.lanes, slots=args.slots,
                                         timeout=args.timeout, delay=args.delay)
        hook = netsum_hook
    elif args.comm == "gloo":
        from netsum.training.hook import GlooHookState, timed_allreduce_hook
        state = GlooHookState()
        hook = timed_allreduce_hook  # type: ignore[assignment]
    dumps: list[dict[str, object]] = []
    if state is not None:
        names = {id(p): n for n, p in model.named_parameters()}

        def recording(st: object,
                      bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            if args.dump_step1 and len(dumps) < 64 and not getattr(recording, "past", False):
                dumps.append({"index": bucket.index(),
                              "params": [names[id(p)] for p in bucket.parameters()],
                              "input": bucket.buffer().detach().clone().numpy()})
            return hook(st, bucket)  # type: ignore[arg-type]

        ddp.register_comm_hook(state, recording)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps)
    loss_fn = nn.CrossEntropyLoss()
    rows = []
    evals = []
    it = batches(len(data.y_train), args.batch, rank, world, args.seed)
    for step in range(1, args.steps + 1):
        idx = torch.from_numpy(next(it))
        t0 = time.monotonic()
        loss = loss_fn(ddp(data.x_train[idx]), data.y_train[idx])
        loss.backward()
        t_bwd = time.monotonic()
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=False)
        t1 = time.monotonic()
        traces = state.take_traces() if state is not None else []  # type: ignore[attr-defined]
        sp = split_step(t0, t_bwd, t1, [(tr.submitted, tr.finished) for tr in traces])
        rows.append({"step": step, "loss": float(loss), "wall_s": sp.wall,
                     "compute_s": sp.compute, "exposed_s": sp.exposed, "comm_s": sp.comm,
                     "hidden_s": sp.hidden, "buckets": len(traces)})
        if step == 1 and args.dump_step1:
            recording.past = True  # type: ignore[attr-defined]
            _dump(args.out, rank, dumps, model, args)
        if step % args.eval_every == 0 or step == args.steps:
            evals.append({"step": step, "test_accuracy": accuracy(model, data.x_test,
                                                                   data.y_test)})
            if rank == 0:
                print(f"train_digits: {args.comm}: step {step}/{args.steps} loss "
                      f"{float(loss):.4f} test accuracy {evals[-1]['test_accuracy']:.4f}",
                      flush=True)
    final = accuracy(model, data.x_test, data.y_test)
    dist.barrier()
    if state is not None:
        state.close()  # type: ignore[attr-defined]
    elif args.comm == "netsum-backend":
        pg = dist.group.WORLD
        close = getattr(pg, "close", None)
        if close is not None:
            close()
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        doc = {"comm": args.comm, "world_size": world, "steps": args.steps,
               "batch": args.batch, "lr": args.lr, "params": sum(p.numel() for p in
                                                                  model.parameters()),
               "final_test_accuracy": final, "steps_log": rows, "evals": evals,
               "layout_checks": getattr(state, "layout_checks", None)}
        (args.out / "metrics.json").write_text(json.dumps(doc))
    dist.destroy_process_group()
    return 0


def _dump(out: Path, rank: int, dumps: list[dict[str, object]], model: nn.Module,
          args: argparse.Namespace) -> None:
    out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    meta = []
    for i, d in enumerate(dumps):
        arrays[f"bucket{i}"] = np.asarray(d["input"])
        meta.append({"index": d["index"], "params": d["params"]})
    for n, p in model.named_parameters():
        arrays[f"param:{n}"] = p.detach().numpy().copy()
    np.savez(out / f"step1-rank{rank}.npz", **arrays)  # type: ignore[arg-type]
    (out / f"step1-rank{rank}.json").write_text(json.dumps({"buckets": meta, "lr": args.lr}))


if __name__ == "__main__":
    sys.exit(main())
