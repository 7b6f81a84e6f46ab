"""`netsum-stf`: run one STF test, or sweep p4c's bmv2 STF programs (`python -m netsum.tools.stf`).

    netsum-stf run PROG.stf (--p4 PROG.p4 | --json PROG.json --p4info PROG.p4info.txtpb)
    netsum-stf sweep --samples P4C/testdata/p4_16_samples [--json-dir DIR]
                     [--p4c P4C-BM2-SS] [--jobs 2] [--out results/stf] [--only NAME ...]

Exit status: 0 when every test passed, 1 when some did not, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from netsum.tools.stf.run import Outcome, Verdict, run_test
from netsum.tools.stf.sweep import (Program, compile_netsum, compile_p4c, from_json_dir,
                              select_programs, sweep, summary_table, write_results)


def _report(out: Outcome) -> None:
    line = out.verdict.value + (f": {out.reason}" if out.reason else "")
    print(line)
    for d in out.details[1:20]:
        print(f"  {d}")


def _run(a: argparse.Namespace) -> int:
    stf = Path(a.stf)
    if a.p4:
        with tempfile.TemporaryDirectory(prefix="netsum-stf-") as tmp:
            made = compile_netsum(Program(stf.stem, Path(a.p4), stf), Path(tmp))
            if isinstance(made, Outcome):
                _report(made)
                return 1
            out = run_test(stf, made[0], made[1])
    else:
        if not a.json or not a.p4info:
            print("netsum-stf run: give --p4, or --json and --p4info", file=sys.stderr)
            return 2
        out = run_test(stf, Path(a.json), Path(a.p4info))
    _report(out)
    return 0 if out.verdict is Verdict.PASS else 1


def _sweep(a: argparse.Namespace) -> int:
    samples = Path(a.samples)
    if not samples.is_dir():
        print(f"netsum-stf sweep: '{samples}' is not a directory", file=sys.stderr)
        return 2
    progs = select_programs(samples, a.only or ())
    if not progs:
        print("netsum-stf sweep: no program selected", file=sys.stderr)
        return 2
    if a.json_dir:
        compiler, label = from_json_dir(Path(a.json_dir)), f"p4c ({a.json_dir})"
    elif a.p4c:
        compiler, label = compile_p4c(Path(a.p4c)), "p4c-bm2-ss"
    else:
        compiler, label = compile_netsum, "netsum-p4c"
    out_dir = Path(a.out)

    def progress(done: int, total: int, prog: Program, out: Outcome) -> None:
        why = f"  {out.reason[:100]}" if out.verdict is not Verdict.PASS else ""
        print(f"[{done:3d}/{total}] {prog.name:45s} {out.verdict.value}{why}", flush=True)

    results = sweep(progs, compiler, out_dir / "work", jobs=a.jobs, progress=progress)
    command = "netsum-stf " + " ".join(sys.argv[1:])
    write_results(results, out_dir, label, command)
    print()
    print(summary_table(results, label))
    print(f"\nresults: {out_dir / 'results.json'}, failures by cause: {out_dir / 'summary.md'}")
    return 0 if all(o.verdict is Verdict.PASS for o in results.values()) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="netsum-stf", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one STF test on netsum-switch")
    r.add_argument("stf")
    r.add_argument("--p4", help="compile this program with netsum-p4c first")
    r.add_argument("--json")
    r.add_argument("--p4info")
    s = sub.add_parser("sweep", help="run p4c's bmv2 STF programs")
    s.add_argument("--samples", required=True, help="p4c's testdata/p4_16_samples")
    s.add_argument("--json-dir", help="take NAME.json + NAME.p4info.txtpb from here (real p4c)")
    s.add_argument("--p4c", help="compile with this p4c-bm2-ss (outputs kept in OUT/work/NAME)")
    s.add_argument("--jobs", type=int, default=2)
    s.add_argument("--out", default="results/stf")
    s.add_argument("--only", nargs="*", help="program names (file stems) to run")
    a = p.parse_args(argv)
    return _run(a) if a.cmd == "run" else _sweep(a)


if __name__ == "__main__":
    sys.exit(main())
