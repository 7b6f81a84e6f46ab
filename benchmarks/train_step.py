#!/usr/bin/env python3
"""Issue 23's training goal, measured side by side in one run: the step time of the netsum
hook and backend as a multiple of gloo's, for one model at several K.

For each K a switch of its own (netsum-switch on UDP-tunnel ports, or namespaces with
`--mode netns`, netsum.p4 built for that K), then `examples/train_digits.py` with 2 ranks once
per variant, one after the other (as `netsum train` runs them).  Variants:

  gloo            DDP's all-reduce over gloo (the baseline of the same K's block)
  netsum-hook     the DDP comm hook through the switch
  netsum-backend  the torch.distributed backend "netsum"
  VARIANT/pyroute the same with the lanes' several busy cores routed in Python
                  (NETSUM_DRIVER_MANY=0), the driver before wio.c's cycle_many
  VARIANT/nospec  the same without speculative exponents (NETSUM_SPECULATE=0): every
                  all-reduce pays its bootstrap round (docs/quantization.md)

The mean step after 5 warm-up steps, its exposed communication (hook and gloo), rank 0's
packets a step (bootstrap and retransmissions included, from the run's totals) and the
ratio to gloo's step in the same block are printed, with the load average before and after
(the machine is shared: compare ratios within a run, not across runs).

    .venv/bin/python benchmarks/train_step.py --model transformer --bucket-kb 256 --k 256,1024
    .venv/bin/python benchmarks/train_step.py --model cnn --k 256,1024 --steps 60
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from netsum.rig import Mode, Rig, RigConfig
from netsum.training.compare import TrainOptions, VariantResult, run_variant

VARIANTS = ("gloo", "netsum-hook", "netsum-backend", "netsum-hook/pyroute",
            "netsum-backend/pyroute", "netsum-hook/nospec", "netsum-backend/nospec")


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def run_block(k: int, args: argparse.Namespace, variants: list[str],
              out: Path) -> list[tuple[str, VariantResult]]:
    opts = TrainOptions(out, ranks=2, steps=args.steps, mode=Mode(args.mode), k=k,
                        lanes=args.lanes, slots=args.slots,
                        extra=("--model", args.model, "--bucket-kb", str(args.bucket_kb)))
    cfg = RigConfig(out / "rig", workers=2, mode=opts.mode, slots=opts.slots, k=k)
    got = []
    with Rig(cfg, lambda _m: None) as rig:
        rig.detach_controller()
        for name in variants:
            comm, _, how = name.partition("/")
            os.environ["NETSUM_DRIVER_MANY"] = "0" if how == "pyroute" else ""
            os.environ["NETSUM_SPECULATE"] = "0" if how == "nospec" else "1"
            res = run_variant(rig, comm, replace(opts, out=out / name), lambda _m: None)
            got.append((name, res))
            print(f"  K={k} {name}: {'ok' if res.ok else 'FAILED ' + res.error} "
                  f"(load {load()})", flush=True)
    os.environ.pop("NETSUM_DRIVER_MANY", None)
    os.environ.pop("NETSUM_SPECULATE", None)
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="transformer", choices=("cnn", "mlp", "transformer"))
    p.add_argument("--bucket-kb", type=float, default=256.0)
    p.add_argument("--k", default="256,1024", help="comma-separated K (default 256,1024)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--slots", type=int, default=256)
    p.add_argument("--mode", default="udp", choices=("udp", "netns"))
    p.add_argument("--variants", default="gloo,netsum-hook,netsum-backend",
                   help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--out", type=Path, default=Path("results/train-step"))
    args = p.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}")
    print(f"train_step: {args.model}, bucket {args.bucket_kb:g} KiB, {args.steps} steps, 2 ranks, "
          f"{args.mode} mode; load average before {load()}", flush=True)
    rows = []
    for k in (int(v) for v in args.k.split(",")):
        block = run_block(k, args, variants, args.out / f"k{k}")
        base = next((r.mean("wall_s") for n, r in block if n == "gloo" and r.ok), float("nan"))
        for name, res in block:
            step = res.mean("wall_s")
            exposed = res.mean("exposed_s") if name.split("/")[0] != "netsum-backend" else \
                float("nan")
            pk = res.metrics.get("packets")
            per = pk["packets"] / max(1, args.steps) if isinstance(pk, dict) else float("nan")
            retx = pk["retransmissions"] / max(1, args.steps) if isinstance(pk, dict) else \
                float("nan")
            # of the blocks sent with a predicted exponent, those that were kept
            hits = 1 - pk.get("misses", 0) / pk["predicted"] if isinstance(pk, dict) and \
                pk.get("predicted") else float("nan")
            rows.append((k, name, res.ok, step, exposed, per, retx, hits, step / base))
    print(f"load average after {load()}")
    print(f"{'K':>5} {'variant':24} {'ok':3} {'step ms':>8} {'exposed':>8} {'pkts/step':>9} "
          f"{'retx/step':>9} {'hits':>5} {'/ gloo':>7}")
    for k, name, ok, step, exposed, per, retx, hits, ratio in rows:
        print(f"{k:>5} {name:24} {'yes' if ok else 'NO':3} {1e3 * step:8.1f} "
              f"{1e3 * exposed:8.1f} {per:9.0f} {retx:9.1f} {hits:5.0%} {ratio:7.2f}")
    return 0 if all(r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
