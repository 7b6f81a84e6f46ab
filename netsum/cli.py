"""`netsum`: the umbrella command (`netsum demo`, `netsum train`, `netsum launch`,
`netsum doctor`).

Owns argument parsing and the single error edge: every expected failure (bad options, a build
error, a switch that does not start, a missing tool) becomes one line on stderr and a non-zero
exit status; Ctrl-C and SIGTERM stop the run, which removes everything it started.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from netsum import __version__
from netsum.netns import netns_available
from netsum.rig import BMV2_TOOLS, Mode, RigError, Target
from netsum.wire import K_DEFAULT, K_SUPPORTED

__all__ = ["main", "build_parser", "parse_size"]

DEFAULT_SIZE = "4MB"
COMMS = ("netsum-hook", "netsum-backend", "gloo")
DEFAULT_COMMS = ("netsum-hook", "gloo")
FSDP_COMMS = ("netsum-backend", "gloo")
_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 2**20, "m": 2**20, "gb": 2**30, "g": 2**30}



#: The modes the demo, `train` and `launch` run in (Mode.SHM is the rig's and vs_gloo's: their
#: workers and training ranks have no shared-memory transport).
_RUN_MODES = (Mode.NETNS.value, Mode.UDP.value)

def parse_size(text: str) -> int:
    """Tensor size → float32 elements: '4MB' (bytes, binary units) or '1000e' / '1000'
    (elements)."""
    t = text.strip().lower().replace(" ", "")
    try:
        if t.endswith("e"):
            n = int(t[:-1])
        else:
            num = t.rstrip("kmgb")
            unit = t[len(num):]
            if unit not in _UNITS:
                raise ValueError
            n = int(float(num) * _UNITS[unit]) // 4 if unit else int(num)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (e.g. 4MB, 512KB, 1000 elements as 1000 or 1000e)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is less than one float32 element")
    return n


def _loss(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"loss must be in [0, 1), got {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="netsum", description="netsum: in-network aggregation "
                                "emulator (P4 switch, controller, workers).")
    p.add_argument("--version", action="version", version=f"netsum {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", help="all-reduce a tensor through the switch and report",
                       description="Build the P4 program, start the switch and the controller, "
                       "run N workers that all-reduce a float32 tensor through the switch, check "
                       "every result, print a table, write a CSV and a PNG.")
    d.add_argument("--workers", "-n", type=int, default=4, help="worker processes (default 4)")
    d.add_argument("--size", type=parse_size, default=parse_size(DEFAULT_SIZE),
                   help=f"tensor size per worker: bytes with a unit (default {DEFAULT_SIZE}) "
                   "or elements (1000e)")
    d.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                   help=f"values per packet (default {K_DEFAULT})")
    d.add_argument("--loss", type=_loss, default=0.0,
                   help="drop probability per packet and port direction, through the P4 "
                   "program's drop simulator (e.g. 0.05)")
    d.add_argument("--mode", choices=_RUN_MODES,
                   help="netns (root: namespaces, veth, kernel UDP) or udp (unprivileged "
                   "UDP-tunnel ports); default: netns when available")
    d.add_argument("--target", choices=[t.value for t in Target], default=Target.EMBEDDED.value,
                   help="embedded netsum-switch (default) or real simple_switch_grpc + p4c")
    d.add_argument("--out", type=Path, default=Path("results/demo"),
                   help="output directory (default results/demo)")
    d.add_argument("--slots", type=int, default=256, help="the job's slot window (default 256)")
    d.add_argument("--timeout", type=float, default=10.0,
                   help="seconds without progress before a worker gives up")
    d.add_argument("--seed", type=int, default=0, help="seed of the synthetic tensors")
    d.add_argument("--leaves", type=int, default=0,
                   help="aggregate through a two-level tree: a root and this many leaf "
                   "switches (>= 2; mode udp), workers dealt over the leaves")
    d.add_argument("--train", action="store_true",
                   help="instead: train the digits CNN through the switch and with gloo "
                   "(the same as `netsum train` with its defaults)")
    t = sub.add_parser("train", help="train a small CNN through the switch and with gloo",
                       description="Start the switch, then train the digits CNN "
                       "(examples/train_digits.py) with N ranks through the switch (DDP hook) "
                       "and with gloo; print accuracies and the step time split, write "
                       "training.csv and training.png.")
    t.add_argument("--ranks", "-n", type=int, default=2, help="ranks (default 2)")
    t.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    t.add_argument("--comm", action="append", choices=COMMS,
                   help=f"a variant to run (repeatable; default: {' and '.join(DEFAULT_COMMS)})")
    t.add_argument("--mode", choices=_RUN_MODES,
                   help="netns (root) or udp (unprivileged); default: netns when available")
    t.add_argument("--wrap", choices=("ddp", "fsdp", "fsdp2"), default="ddp",
                   help="DDP (default), FSDP FULL_SHARD or FSDP2 fully_shard (FSDP takes "
                   "--comm netsum-backend and gloo)")
    t.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                   help="the model's parameters and gradients (default float32)")
    t.add_argument("--lanes", type=int, default=4, help="buckets in flight at once (default 4)")
    t.add_argument("--slots", type=int, default=256, help="the job's slot window (default 256)")
    t.add_argument("--timeout", type=float, default=60.0,
                   help="the process group's timeout: seconds without progress before a step "
                   "fails (default 60)")
    t.add_argument("--out", type=Path, default=Path("results/train"),
                   help="output directory (default results/train)")
    t.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                   help=f"values per packet (default {K_DEFAULT}); the switch is built for it "
                   "and the ranks get NETSUM_K.  Above 256 an emulation lever only: beyond "
                   "what a Tofino-class switch holds per packet")
    t.add_argument("--model", choices=("cnn", "mlp", "transformer"), default="cnn",
                   help="the digits CNN (default), the MLP or the 1.19M-parameter transformer "
                   "(netsum.training.models)")
    t.add_argument("--bucket-kb", type=float, default=4.0,
                   help="DDP's bucket size in KiB (default 4)")
    la = sub.add_parser("launch", help="run a training script's ranks through a switch of "
                        "their own (like torchrun --standalone)",
                        description="Start the switch and push its pipeline and forwarding, "
                        "then run N processes of SCRIPT with torchrun's environment and "
                        "netsum's (NETSUM_TOPOLOGY, the rank's host and switch port); rank 0 "
                        "installs the job at init_process_group(\"netsum\") or "
                        "NetsumHookState.from_env().  Output lines are prefixed [rankN]:.")
    la.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=2,
                    dest="nproc", help="ranks (default 2)")
    la.add_argument("--mode", choices=_RUN_MODES,
                    help="netns (root) or udp (unprivileged); default: netns when available")
    la.add_argument("--out", type=Path, default=Path("results/launch"),
                    help="where the switch's and the ranks' logs go (default results/launch)")
    la.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                    help=f"values per packet (default {K_DEFAULT}); the switch is built for it "
                   "and the ranks get NETSUM_K.  Above 256 an emulation lever only: beyond "
                   "what a Tofino-class switch holds per packet")
    la.add_argument("script", type=Path, help="the training script")
    la.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    sub.add_parser("doctor", help="what this machine supports",
                   description="Report root, network namespaces, real p4c/simple_switch_grpc, "
                   "and which demo mode would run.")
    return p


def doctor() -> int:
    def line(what: str, ok: bool, detail: str) -> None:
        print(f"  {'yes' if ok else 'no ':3}  {what:26} {detail}")

    print("netsum doctor")
    root = os.geteuid() == 0
    line("root", root, "" if root else "(netns mode needs CAP_NET_ADMIN)")
    ns = netns_available()
    line("network namespaces + veth", ns is None, ns or "")
    for tool in ("ip", "ethtool"):
        path = shutil.which(tool)
        line(tool, path is not None, path or "not on PATH")
    for tool in BMV2_TOOLS:
        path = shutil.which(tool)
        line(tool, path is not None, path or "not on PATH: --target bmv2 unavailable")
    try:
        from netsum import build
        build.ensure_built()
        line("netsum.p4 builds", True, "with netsum-p4c")
    except Exception as exc:  # noqa: BLE001 - report, do not crash the doctor
        line("netsum.p4 builds", False, str(exc).splitlines()[0])
    mode = "netns" if ns is None else "udp"
    print(f"netsum demo would run in mode {mode} on the embedded switch")
    return 0


def train(args: argparse.Namespace) -> int:
    try:
        import sklearn  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise RigError(f"netsum train needs the `train` extra ({exc.name} is missing): "
                       "pip install -e '.[train]' (torch==2.13.0 CPU, scikit-learn)") from None
    from netsum.demo import choose_mode
    from netsum.training.compare import TrainOptions, run_training, summary_table
    if args.command == "demo":
        # `netsum demo --train`: the train command's defaults, with the demo's --mode, --out
        # and --slots (not its --timeout: the demo's workers' 10 s, not a process group's).
        args = build_parser().parse_args(
            ["train", "--out", str(args.out), "--slots", str(args.slots),
             *(["--mode", args.mode] if args.mode else [])])
    if not 1 <= args.ranks <= 8:
        raise RigError(f"--ranks must be 1..8, got {args.ranks}")
    mode, why = choose_mode(Mode(args.mode) if args.mode else None)
    comms = tuple(args.comm or (FSDP_COMMS if args.wrap != "ddp" else DEFAULT_COMMS))
    if args.wrap != "ddp" and "netsum-hook" in comms:
        raise RigError("--wrap fsdp/fsdp2 take --comm netsum-backend and gloo (a comm hook is "
                       "DDP's)")
    opts = TrainOptions(args.out, ranks=args.ranks, steps=args.steps, comms=comms, mode=mode,
                        lanes=args.lanes, slots=args.slots, timeout=args.timeout,
                        extra=("--wrap", args.wrap, "--dtype", args.dtype, "--model", args.model,
                               "--bucket-kb", str(args.bucket_kb)),
                        k=args.k)
    print(f"netsum train: mode {mode.value} ({why})")
    results = run_training(opts)
    print(summary_table(results))
    print(f"netsum train: wrote {args.out / 'training.csv'} and {args.out / 'training.png'}")
    return 0 if all(r.ok for r in results) else 1


def launch(args: argparse.Namespace) -> int:
    from netsum.demo import choose_mode
    from netsum.training.launch import LaunchOptions
    from netsum.training.launch import launch as run
    mode, why = choose_mode(Mode(args.mode) if args.mode else None)
    print(f"netsum launch: mode {mode.value} ({why})", flush=True)
    return run(LaunchOptions(args.script, tuple(args.script_args), args.nproc, mode, args.out,
                             k=args.k),
               say=lambda line: print(line, flush=True))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes the same path as Ctrl-C, so the rig's clean-up runs.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.command == "doctor":
            return doctor()
        if args.command == "launch":
            return launch(args)
        if args.command == "train" or args.train:
            return train(args)
        from netsum.demo import DemoOptions, run_demo
        opts = DemoOptions(out=args.out, workers=args.workers, elements=args.size, k=args.k,
                           loss=args.loss, mode=Mode(args.mode) if args.mode else None,
                           target=Target(args.target), slots=args.slots,
                           timeout=args.timeout, seed=args.seed, leaves=args.leaves)
        return run_demo(opts)
    except RigError as exc:
        print(f"netsum: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"netsum: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print("netsum: error: out of memory; use a smaller --size or fewer --workers",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nnetsum: interrupted; every process and interface the run made is removed",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
