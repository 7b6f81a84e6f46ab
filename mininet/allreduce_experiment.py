#!/usr/bin/env python3
"""An all-reduce experiment under Mininet, laid out by the shared topology file.

Owns one experiment's life cycle: Mininet with the file's hosts, P4 switches (`NetsumSwitch`)
and links (`TCLink`, optional `--bw`), host set-up, the controller (pipeline, forwarding, the
file's jobs, the drop simulator for `--loss`), one `netsum-worker` per member of the chosen job
on its own Mininet host (kernel UDP to its switch's service address), the check of every result
against the float64 sum within the quantization bound, and the outputs: a console table,
`results.csv`, `allreduce.png` and `run.json` (what ran where, for debugging and for checking
that nothing is left afterwards) in `--out`.

    sudo .venv/bin/python mininet/allreduce_experiment.py --topo examples/single.yaml \\
        --size 1MB --k 32 --loss 0.01 --bw 100 --out results/mininet

Invariant: `net.stop()` runs in a `finally`, after every worker it started is gone, so Mininet
removes every interface; Ctrl-C and SIGTERM take the same path.  Exit status: 0 when every
worker's result is correct, 1 otherwise or on an error (one line on stderr), 2 for usage errors,
130 when interrupted.
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import signal
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from types import FrameType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
try:
    from netsum.experiments import mnenv, mnguard
    from netsum.experiments.testbed import HostProcs, root_interfaces
    from netsum.wire import K_DEFAULT, K_SUPPORTED
except ImportError as _exc:  # e.g. Debian's python3: it sees Mininet but not the project
    sys.exit(f"allreduce_experiment: error: cannot import {_exc.name or _exc} with {sys.executable}: run "
             f"it with the project's Python, e.g. sudo {ROOT / '.venv/bin/python'} {__file__}")

__all__ = ["Options", "ExperimentError", "run", "main"]

PROG = "allreduce_experiment"


class ExperimentError(Exception):
    """The experiment could not be set up or run.  str() is the one line the user sees."""


@dataclass(frozen=True, slots=True)
class Options:
    topo: Path
    job: int | None             # None: the file's first job
    elements: int
    k: int
    loss: float
    bw: float | None            # Mb/s on every link (TCLink, htb); None: unlimited
    out: Path
    timeout: float              # a worker's no-progress deadline (s)
    seed: int
    cli: bool
    target: str                 # embedded | bmv2


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes Ctrl-C's path, so the finally blocks stop workers, switches and Mininet.
    raise KeyboardInterrupt


def _write_csv(path: Path, outcome: Any, hosts: list[Any]) -> None:
    from netsum.jobrun import WorkerOutcome
    names = [f.name for f in fields(WorkerOutcome)]
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["job", "host", "switch", "port", *names])
        for w, h in zip(outcome.workers, hosts):
            wr.writerow([outcome.job_id, h.name, h.switch, h.port,
                         *[getattr(w, n) for n in names]])


def run(opts: Options, out: IO[str] = sys.stdout) -> int:
    problem = mnenv.environment_problem()
    if problem:
        raise ExperimentError(problem)

    from netsum.controller.errors import ControllerError, TopologyError
    from netsum.controller.topology import load_topology
    try:
        topology = load_topology(opts.topo)
    except TopologyError as exc:
        raise ExperimentError(str(exc)) from None
    if not topology.jobs:
        raise ExperimentError(f"{opts.topo}: the file defines no jobs")
    wanted = topology.jobs[0].id if opts.job is None else opts.job
    spec = next((j for j in topology.jobs if j.id == wanted), None)
    if spec is None:
        raise ExperimentError(f"{opts.topo}: no job {opts.job} (jobs: "
                                  f"{', '.join(str(j.id) for j in topology.jobs)})")

    import numpy as np
    from mininet.cli import CLI
    from mininet.link import TCLink
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from netsum.experiments import mnswitch as M
    from netsum.demo import format_table, write_png
    from netsum.jobrun import RunningJob
    from netsum.rig import job_counters
    from netsum.tensors import reference, synthetic_inputs
    from netsum.workers import quant

    opts.out.mkdir(parents=True, exist_ok=True)
    log_dir = opts.out / "logs"
    try:
        json_path, info_path, executable = M.build_program(opts.k, opts.target, opts.out / "p4")
    except M.NetsumMininetError as exc:
        raise ExperimentError(str(exc)) from None
    members = [topology.host(name) for name in spec.workers]
    n = len(members)

    setLogLevel("warning")
    # Mininet's logger has its own console handler; a root handler another library installs
    # would print every line twice ("Level 25:mininet:...").
    logging.getLogger("mininet").propagate = False
    switch_params: dict[str, Any] = {"logDir": str(log_dir), "seed": opts.seed}
    if executable is not None:
        switch_params["executable"] = executable
    mn_topo = M.TopoFromFile(topology, bw=opts.bw, freeGrpc=True, **switch_params)
    # build=False: a failure while building still leaves a Mininet object whose stop() can
    # remove what was made.
    net = Mininet(topo=mn_topo, switch=M.NetsumSwitch, link=TCLink, controller=None,
                  autoSetMacs=False, autoStaticArp=False, build=False, waitConnected=False)
    workers = HostProcs(log_dir)
    ctl = None
    tensors: list[Path] = []        # removed whatever happens: they can be hundreds of MB
    # Cleans up even when this process is killed outright, where no finally runs.
    guard = mnguard.Guard()
    guard.start()
    for name in root_interfaces(topology):
        guard.note("intf", name)
    try:
        out.write(f"{PROG}: Mininet with {len(topology.switches)} switch(es), "
                  f"{len(topology.hosts)} hosts from {opts.topo}"
                  f"{f', {opts.bw:g} Mb/s links' if opts.bw else ''}\n")
        try:
            # Mininet reports tc's stderr as errors; with htb at tens of Mb/s that is the
            # harmless "quantum of class ... is big" once per interface.  Links here carry
            # only bw (never delay/loss, which this kernel lacks), so nothing else is hidden.
            setLogLevel("critical" if opts.bw else "warning")
            net.build()
            for host in net.hosts:
                guard.note("netns", str(host.pid))
            M.set_link_mtu(net, opts.k)
            setLogLevel("warning")
            net.start()
        except M.NetsumMininetError:
            raise
        except Exception as exc:  # noqa: BLE001 - Mininet raises bare Exceptions
            text = " ".join(str(exc).split())
            hint = (" (left over from a run that was killed? `ip link del` it)"
                    if "File exists" in text else "")
            raise ExperimentError(f"Mininet could not start the network: {text}{hint}") from None
        M.configure_hosts(net, topology)
        topology = M.with_grpc_addrs(topology, net)
        try:
            ctl = M.start_controller(topology, info_path, json_path)
            for job in topology.jobs:
                ctl.create_job(job)
            if opts.loss > 0:
                for h in members:
                    ctl.set_drop(h.switch, h.port, opts.loss, "both")
        except ControllerError as exc:
            raise ExperimentError(f"controller: {exc}") from None
        for sw in topology.switches:
            out.write(f"  {sw.name}: {sw.role.value}, P4Runtime on {sw.grpc_addr}, log "
                      f"{log_dir / (sw.name + '.log')}\n")
        if opts.cli:
            out.write(f"{PROG}: switches configured; try `h1 ping -c1 h2`; `exit` runs job "
                      f"{spec.id}\n")
            setLogLevel("output")     # the CLI prints command output at this level
            CLI(net)
            setLogLevel("warning")

        inputs = synthetic_inputs(n, (opts.elements,), opts.seed)
        ref = reference(inputs, opts.k)
        job_dir = opts.out / f"job{spec.id}"
        job_dir.mkdir(parents=True, exist_ok=True)
        ins = [job_dir / f"in{r}.npy" for r in range(n)]
        outs = [job_dir / f"out{r}.npy" for r in range(n)]
        tensors += [*ins, *outs]
        for path, x in zip(ins, inputs):
            np.save(path, x)
        del inputs                  # the reference holds what the check needs
        bin_dir = Path(sys.executable).parent
        worker_cmd = (str(bin_dir / "netsum-worker") if (bin_dir / "netsum-worker").exists()
                      else "netsum-worker")
        out.write(f"{PROG}: job {spec.id}: {n} workers x {opts.elements} float32, K={opts.k}, "
                  f"loss {opts.loss:g}\n")
        started = time.monotonic()
        for rank, h in enumerate(members):
            svc = topology.switch(h.switch).service
            argv = [worker_cmd, "--job", str(spec.id), "--workers", str(n),
                    "--slots", str(spec.slots), "--k", str(opts.k),
                    "--udp", M.ipv4_text(svc.ipv4),
                    "--bind", f"{M.ipv4_text(h.ipv4)}:{h.udp_port}",
                    "--input", str(ins[rank]), "--output", str(outs[rank]),
                    "--timeout", str(opts.timeout), "--json"]
            workers.start(net.get(h.name), f"job{spec.id}-{h.name}", argv)
        blocks = quant.num_blocks(opts.elements, opts.k)
        spanned = {h.switch for h in members}
        # Per use of a slot the leaves count one DATA per worker plus the root's result.
        per_slot = n + (len(spanned) if len(spanned) > 1 else 0)
        running = RunningJob(lambda j: job_counters(ctl, j), spec.id, workers.children, ref,
                             ins, outs, blocks, min(spec.slots, blocks), started, per_slot)
        _write_manifest(opts, net, topology, spec.id, members, workers)

        def tick(job: RunningJob) -> None:
            for sw in topology.switches:
                node = net.get(sw.name)
                if not node.alive():
                    raise ExperimentError(f"switch {sw.name} exited during the job: "
                                          f"{node.logTail()}")
        outcome = running.wait(timeout=None, on_tick=tick)
    except M.NetsumMininetError as exc:
        raise ExperimentError(str(exc)) from None
    finally:
        workers.kill()
        for path in tensors:
            path.unlink(missing_ok=True)
        if ctl is not None:
            try:
                ctl.close()
            except Exception:  # noqa: BLE001 - closing must not hide the original error
                pass
        net.stop()
        guard.forget()
        guard.close()

    out.write(format_table(outcome) + "\n")
    for w, h in zip(outcome.workers, members):
        if not w.ok:
            out.write(f"  worker {w.rank} ({h.name}): {w.error}\n")
    counters = outcome.switch_counters
    out.write(f"  switch counters: {', '.join(f'{k}={v}' for k, v in counters.items())}\n"
              f"  ranks: {', '.join(f'{r}={h.name}' for r, h in enumerate(members))}; "
              f"wall {outcome.wall_s:.2f} s\n")
    _write_csv(opts.out / "results.csv", outcome, members)
    title = (f"Mininet {opts.topo.name}: job {spec.id}, {n} workers, {opts.elements} elements, "
             f"K={opts.k}, loss {opts.loss:g}" + (f", {opts.bw:g} Mb/s" if opts.bw else ""))
    write_png(outcome, opts.out / "allreduce.png", title)
    verdict = "all results correct" if outcome.ok else "SOME RESULTS WRONG"
    out.write(f"{PROG}: {verdict}; wrote {opts.out / 'results.csv'} and "
              f"{opts.out / 'allreduce.png'}\n")
    return 0 if outcome.ok else 1


def _write_manifest(opts: Options, net: Any, topology: Any, job_id: int, members: list[Any],
                    workers: HostProcs) -> None:
    doc = {"topology": str(opts.topo), "job": job_id,
           "switches": {sw.name: {"pid": net.get(sw.name).process.pid,
                                  "grpc_addr": sw.grpc_addr,
                                  "interfaces": [i for _, i in net.get(sw.name).dataPorts()]}
                        for sw in topology.switches},
           "workers": {h.name: c.popen.pid for h, c in zip(members, workers.children)}}
    (opts.out / "run.json").write_text(json.dumps(doc, indent=1))


def _probability(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"loss must be in [0, 1), got {text}")
    return v


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from netsum.cli import parse_size
    p = argparse.ArgumentParser(
        prog=PROG, description="All-reduce through netsum's P4 switch(es) under Mininet, laid "
        "out by a topology file; checks every result, prints a table, writes CSV and PNG.")
    p.add_argument("--topo", type=Path, default=ROOT / "examples" / "single.yaml",
                   help="topology/job file (default examples/single.yaml; "
                   "examples/tree.yaml is a two-level tree)")
    p.add_argument("--job", type=int, help="which job of the file to run (default: the first)")
    p.add_argument("--size", type=parse_size, default=parse_size("1MB"),
                   help="tensor per worker: bytes with a unit (default 1MB) or elements (4096e)")
    p.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                   help=f"values per packet (default {K_DEFAULT})")
    p.add_argument("--loss", type=_probability, default=0.0,
                   help="drop probability per packet on each worker port and direction, via "
                   "the P4 program's drop simulator (this kernel has no netem)")
    p.add_argument("--bw", type=_positive, help="link bandwidth in Mb/s (TCLink)")
    p.add_argument("--out", type=Path, default=Path("results/mininet"),
                   help="output directory (default results/mininet)")
    p.add_argument("--timeout", type=_positive, default=10.0,
                   help="seconds without progress before a worker gives up (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the tensors and drop simulator")
    p.add_argument("--target", choices=("embedded", "bmv2"), default="embedded",
                   help="netsum-switch (default) or real simple_switch_grpc + p4c")
    p.add_argument("--cli", action="store_true",
                   help="open Mininet's CLI once the switches are configured (before the job)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    opts = Options(topo=args.topo, job=args.job, elements=args.size, k=args.k, loss=args.loss,
                   bw=args.bw, out=args.out, timeout=args.timeout, seed=args.seed,
                   cli=args.cli, target=args.target)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run(opts)
    except ExperimentError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; workers, switches and Mininet's interfaces are removed",
              file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
