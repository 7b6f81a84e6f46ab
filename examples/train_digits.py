#!/usr/bin/env python3
"""Train a model on scikit-learn's digits with DDP or FSDP, gradients summed by the P4 switch.

    netsum launch --nproc-per-node 2 examples/train_digits.py --comm netsum-hook --out results/d
    netsum launch --nproc-per-node 2 examples/train_digits.py --comm netsum-backend --wrap fsdp \
        --out results/f
    torchrun --standalone --nproc-per-node 2 examples/train_digits.py --comm gloo --out results/g

--comm netsum-hook     DDP + `netsum_hook` (each bucket through the switch, overlapping backward)
--comm netsum-backend  init_process_group("netsum"): every collective through the netsum group
                       (DDP's bucket all-reduces, FSDP's reduce-scatters through the switch)
--comm gloo            the baseline (DDP timed by an equivalent hook)
--wrap ddp|fsdp|fsdp2  DistributedDataParallel, FSDP FULL_SHARD, or FSDP2 fully_shard
--dtype bfloat16|...   the model's parameters and gradients in that dtype
--model cnn|mlp|transformer  the digits CNN (3,658 parameters), a parameter-heavy MLP (301,066),
                       a transformer (1,193,354): netsum.training.models; --width sizes them
--data digits|synthetic  the digits, or a synthetic set of --train-size samples (any batch)
--amp                  float16 autocast with torch.amp.GradScaler; --inject-inf STEP makes one
                       rank's loss Inf at that step: GradScaler must skip it on every rank

The netsum variants need NETSUM_TOPOLOGY (the switch's topology file) and the rank's way to the
switch (NETSUM_FRAMES + NETSUM_FRAMES_BIND, or NETSUM_NETNS): `netsum launch` and `netsum train`
set them (docs/training.md).  Rank 0 writes OUT/metrics.json: per-step loss, bytes through the
switch, time split (forward, backward, exposed communication, optimizer), the bucket sizes, test
accuracy every --eval-every steps with the training time so far, the switched/delegated summary;
every rank writes OUT/rank<R>.json: its final loss, the steps GradScaler skipped, the scales.
"""
import argparse
import contextlib
import datetime
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from netsum.training.digits import accuracy, batches, load_digits_split
from netsum.training.models import MODELS, make_model, synthetic
from netsum.training.stepsplit import split_step

COMMS = ("netsum-hook", "netsum-backend", "gloo")
WRAPS = ("ddp", "fsdp", "fsdp2")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[1])
    p.add_argument("--comm", choices=COMMS, default="netsum-hook")
    p.add_argument("--wrap", choices=WRAPS, default="ddp")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--amp", action="store_true",
                   help="float16 autocast + torch.amp.GradScaler (the model stays float32)")
    p.add_argument("--inject-inf", type=int, default=0, metavar="STEP",
                   help="--amp: rank --inject-rank's loss is Inf at this step")
    p.add_argument("--inject-rank", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.15,
                   help="SGD (momentum 0.9) peak learning rate, cosine decay to 0 over --steps")
    p.add_argument("--model", choices=MODELS, default="cnn")
    p.add_argument("--width", type=int, default=0,
                   help="CNN width (default 8: 3,658 parameters), MLP hidden size (512), "
                   "transformer d (128)")
    p.add_argument("--data", choices=("digits", "synthetic"), default="digits")
    p.add_argument("--train-size", type=int, default=16384,
                   help="--data synthetic: training samples (test: 2048)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bucket-kb", type=float, default=4.0,
                   help="DDP bucket cap in KiB (small: several buckets to overlap)")
    p.add_argument("--eval-every", type=int, default=25, help="0: only at the end")
    p.add_argument("--lanes", type=int, default=4, help="netsum: buckets in flight at once")
    p.add_argument("--slots", type=int, default=256, help="netsum: the job's slot window")
    p.add_argument("--delay", type=float, default=0.0,
                   help="netsum-hook: artificial latency (s) added to every received packet")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="the process group's timeout (s): a step fails after that long "
                   "without progress (NETSUM_TIMEOUT overrides it for the switch)")
    p.add_argument("--keep-job", action="store_true",
                   help="netsum: leave the job on the switch at the end (tests read its "
                   "counters)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dump-step1", action="store_true",
                   help="save each rank's step-1 bucket inputs and parameters (tests)")
    args = p.parse_args(argv)
    if args.wrap != "ddp" and args.comm == "netsum-hook":
        p.error("--wrap fsdp/fsdp2 take --comm netsum-backend or gloo (a comm hook is DDP's)")
    if args.inject_inf and not args.amp:
        p.error("--inject-inf needs --amp (GradScaler is what skips the step)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        return train(args)
    except Exception as exc:  # noqa: BLE001 - one line at the edge
        print(f"train_digits: rank {rank}: error: {type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}", file=sys.stderr,
              flush=True)
        # A dead peer leaves gloo's teardown waiting; the error is already said.
        os._exit(1)


def wrap(args: argparse.Namespace, model: nn.Module) -> nn.Module:
    if args.wrap == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy
        return FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                    device_id=torch.device("cpu"))
    if args.wrap == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for name in ("features", "head"):
            fully_shard(getattr(model, name))
        fully_shard(model)
        return model
    return DDP(model, bucket_cap_mb=args.bucket_kb / 1024)


def train(args: argparse.Namespace) -> int:
    timeout = datetime.timedelta(seconds=args.timeout)
    backend = "gloo"
    if args.comm == "netsum-backend":
        import netsum.training.backend  # noqa: F401 - registers backend "netsum"
        os.environ.setdefault("NETSUM_LANES", str(args.lanes))
        os.environ.setdefault("NETSUM_SLOTS", str(args.slots))
        backend = "netsum"
    dist.init_process_group(backend, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    dtype = DTYPES[args.dtype]
    data = load_digits_split(args.seed) if args.data == "digits" else \
        synthetic(args.train_size, args.seed)
    model = make_model(args.model, args.width).to(dtype)
    net = wrap(args, model)
    state: Any = None
    if args.comm == "netsum-hook":
        from netsum.training.hook import NetsumHookState, netsum_hook
        state = NetsumHookState.from_env(lanes=args.lanes, slots=args.slots, delay=args.delay)
        hook = netsum_hook
    elif args.comm == "gloo" and args.wrap == "ddp":
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

        assert isinstance(net, DDP)
        net.register_comm_hook(state, recording)
    pg: Any = dist.group.WORLD
    ledger = state.ledger if args.comm == "netsum-hook" else getattr(pg, "ledger", None)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps)
    scaler = torch.amp.GradScaler("cpu") if args.amp else None
    loss_fn = nn.CrossEntropyLoss()
    rows, evals, skipped, scales = [], [], [], []
    it = batches(len(data.y_train), args.batch, rank, world, args.seed)
    switched_before = _switched_bytes(ledger)
    trained = 0.0     # training time so far (s): step walls, evaluations left out
    for step in range(1, args.steps + 1):
        idx = torch.from_numpy(next(it))
        t_wall = time.time()
        t0 = time.monotonic()
        cast = torch.autocast("cpu", dtype=torch.float16) if args.amp else \
            contextlib.nullcontext()
        with cast:
            logits = net(data.x_train[idx].to(dtype))
        loss = loss_fn(logits.float(), data.y_train[idx])
        t_fwd = time.monotonic()
        if args.inject_inf == step and rank == args.inject_rank:
            loss = loss * float("inf")
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        t_bwd = time.monotonic()
        if scaler is not None:
            before = scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            if scaler.get_scale() < before:
                skipped.append(step)
        else:
            opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=False)
        t1 = time.monotonic()
        traces = state.take_traces() if state is not None else []
        sp = split_step(t0, t_bwd, t1, [(tr.submitted, tr.finished) for tr in traces])
        now_bytes = _switched_bytes(ledger)
        trained += sp.wall
        rows.append({"step": step, "loss": float(loss.detach()), "wall_s": sp.wall,
                     "compute_s": sp.compute, "exposed_s": sp.exposed, "comm_s": sp.comm,
                     "hidden_s": sp.hidden, "buckets": len(traces),
                     "forward_s": t_fwd - t0, "optimizer_s": t1 - t_bwd,
                     "backward_s": max(0.0, t_bwd - t_fwd - sp.exposed),
                     "t_wall": t_wall, "train_s": trained,
                     "bucket_numels": [tr.numel for tr in traces],
                     "switch_bytes": now_bytes - switched_before})
        switched_before = now_bytes
        if step == 1 and args.dump_step1:
            recording.past = True  # type: ignore[attr-defined]
            _dump(args.out, rank, dumps, model, args)
        if (args.eval_every and step % args.eval_every == 0) or step == args.steps:
            evals.append({"step": step, "train_s": trained,
                          "test_accuracy": accuracy(net, data.x_test.to(dtype), data.y_test)})
            if rank == 0:
                print(f"train_digits: {args.comm}: step {step}/{args.steps} loss "
                      f"{float(loss.detach()):.4f} test accuracy {evals[-1]['test_accuracy']:.4f}",
                      flush=True)
    final = accuracy(net, data.x_test.to(dtype), data.y_test)
    dist.barrier()
    if state is not None:
        state.close(unregister_job=not args.keep_job)
    elif args.comm == "netsum-backend":
        pg.close(unregister_job=not args.keep_job)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(json.dumps(
        {"final_loss": rows[-1]["loss"], "skipped": skipped, "scales": scales}))
    job = getattr(state, "job", None) or getattr(pg, "job", None)
    engine = getattr(state, "engine", None) or getattr(pg, "engine", None)
    if rank == 0:
        doc = {"comm": args.comm, "wrap": args.wrap, "dtype": args.dtype, "world_size": world,
               "steps": args.steps, "batch": args.batch, "lr": args.lr, "model": args.model,
               "data": args.data, "bucket_kb": args.bucket_kb, "lanes": args.lanes,
               "slots": args.slots,
               "params": sum(p.numel() for p in model.parameters()),
               "final_test_accuracy": final, "final_loss": rows[-1]["loss"],
               "steps_log": rows, "evals": evals,
               "layout_checks": getattr(state, "layout_checks", None),
               "job_ids": list(getattr(job, "job_ids", ())),
               "ledger": ledger.to_dict() if ledger is not None else None,
               "ledger_summary": ledger.summary() if ledger is not None else None,
               # netsum: values per packet, and rank 0's packets over the whole run
               "k": getattr(job, "k", None),
               "packets": dict(engine.totals) if engine is not None else None}
        (args.out / "metrics.json").write_text(json.dumps(doc))
    dist.destroy_process_group()
    return 0


def _switched_bytes(ledger: Any) -> int:
    if ledger is None:
        return 0
    tot = ledger.totals()
    return int(tot["switch"].bytes + tot["switch (all-reduce)"].bytes)


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
