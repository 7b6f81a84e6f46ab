"""Compile many P4 programs with two checkouts of netsum-p4c and compare the outputs byte for byte.

    .venv/bin/python benchmarks/compare_compilers.py --base /work/main --new . \\
        --work /tmp/cmp /tmp/p4c-td/testdata/p4_16_samples/*.p4

Each checkout compiles every program in its own process (``PYTHONPATH`` = the checkout), one
forked child per program (so no state leaks from one program to the next, and a hang is cut at
``--timeout`` seconds), through the command line's ``main`` -- the same code path as
``netsum-p4c prog.p4 -o DIR --p4runtime-files DIR/prog.p4info.txtpb -I <p4include>``.  It keeps
per program the BMv2 JSON, the P4Info text, stderr (diagnostics, internal errors) and the exit
status, then reports every program whose four differ, and the counts by exit status.  Exit status
0 when all are identical.  ``-D NAME=VALUE`` defines a macro for every program (netsum.p4's
``NETSUM_K``).  ``--dump DIR`` alone only compiles (with the netsum on PYTHONPATH).
"""
from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

OUTPUTS = ("json", "p4info.txtpb", "err", "rc")


def dump(out: Path, programs: list[Path], timeout: int, defines: list[str]) -> None:
    """Compile each program in a forked child of this process; write its four outputs."""
    import netsum.p4c.cli as cli   # imported once, before forking: children start warm
    include = Path(cli.__file__).parent / "p4include"
    out.mkdir(parents=True, exist_ok=True)
    for prog in programs:
        d = out / prog.stem
        d.mkdir(exist_ok=True)
        pid = os.fork()
        if pid == 0:
            err = io.StringIO()
            rc = 3
            try:
                signal.alarm(timeout)
                with redirect_stderr(err), redirect_stdout(err):
                    rc = cli.main([str(prog), "-o", str(d), "-I", str(include),
                                   "--p4runtime-files", str(d / "prog.p4info.txtpb"),
                                   *(f"-D{x}" for x in defines)])
            except BaseException as exc:  # noqa: BLE001 -- recorded, compared like any output
                err.write(f"[compare] child died: {type(exc).__name__}\n")
            (d / "err").write_text(err.getvalue().replace(str(d), "OUT"))
            (d / "rc").write_text(f"{rc}\n")
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if not (d / "rc").exists():
            (d / "rc").write_text(f"killed {status}\n")
        js = d / f"{prog.stem}.json"
        if js.exists():
            js.rename(d / "json")
        if (d / "prog.p4info.txtpb").exists():
            (d / "prog.p4info.txtpb").rename(d / "p4info.txtpb")


def compare(a: Path, b: Path, programs: list[Path]) -> int:
    differ: list[str] = []
    by_rc: dict[str, int] = {}
    for prog in programs:
        da, db = a / prog.stem, b / prog.stem
        rc = (da / "rc").read_text().strip() if (da / "rc").exists() else "?"
        by_rc[rc] = by_rc.get(rc, 0) + 1
        for o in OUTPUTS:
            fa, fb = da / o, db / o
            ba = fa.read_bytes() if fa.exists() else None
            bb = fb.read_bytes() if fb.exists() else None
            if ba != bb:
                differ.append(f"{prog.name}: {o} differs")
    for line in differ:
        print(line)
    print(f"{len(programs)} programs compared ({', '.join(f'exit {k}: {v}' for k, v in sorted(by_rc.items()))}); "
          f"{len(differ)} outputs differ")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="+", type=Path)
    ap.add_argument("--base", type=Path, help="checkout compiled first (the reference)")
    ap.add_argument("--new", type=Path, help="checkout compared with it")
    ap.add_argument("--work", type=Path, default=Path("/tmp/netsum-compare"))
    ap.add_argument("--dump", type=Path, help="only compile, with the netsum on PYTHONPATH")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="a preprocessor define NAME=VALUE for every program")
    args = ap.parse_args()
    programs = sorted(p.resolve() for p in args.programs)
    if args.dump:
        dump(args.dump, programs, args.timeout, args.defines)
        return 0
    if args.base is None or args.new is None:
        ap.error("--base and --new are needed (or --dump)")
    dirs = []
    for tag, root in (("base", args.base), ("new", args.new)):
        d = args.work / tag
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(root.resolve()))
        subprocess.run([sys.executable, __file__, "--dump", str(d), "--timeout",
                        str(args.timeout), *(f"-D{x}" for x in args.defines),
                        *map(str, programs)], env=env, check=True)
        print(f"{tag} ({root}): {len(programs)} programs in {time.perf_counter() - t0:.0f} s")
        dirs.append(d)
    return compare(dirs[0], dirs[1], programs)


if __name__ == "__main__":
    sys.exit(main())
