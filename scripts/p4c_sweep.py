#!/usr/bin/env python3
"""netsum-p4c over p4c's own test programs: how much of the v1model language it compiles.

    .venv/bin/python scripts/p4c_sweep.py P4C_TREE [--jobs 2] [--only NAME ...] [--json out.json]

P4C_TREE is an extracted p4c source tree (``git archive`` of github.com/p4lang/p4c); the
programs are not part of netsum.  The corpus is every ``testdata/p4_16_samples/*.p4`` that
real p4c compiles for v1model: p4c left a P4Info for it in ``p4_16_samples_outputs/`` and
it includes ``v1model.p4`` (itself or through a local include).  Each is compiled in a child
process and counted as

  compiled         the JSON and P4Info were produced (P4Info also compared byte for byte
                   with p4c's ``NAME.p4.p4info.txtpb``);
  refused as p4c   a program real p4c-bm2-ss refuses (P4C_BM2_REFUSES: p4test alone wrote
                   its P4Info), refused with an error naming the same construct;
  unsupported      rejected, every error an ``unsupported construct: ...`` (honest);
  wrong error      rejected with some other error (p4c compiles it, so that error is ours),
                   or a program p4c-bm2-ss refuses refused for another reason;
  p4c refuses      compiled, although p4c-bm2-ss refuses it (netsum-p4c must refuse it too);
  internal error   anything else: an exception, a crash, no result in --timeout seconds.

The failures are then grouped by their first message (quoted names elided), largest group
first, so the next construct to support is the first line of the list.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_V1MODEL = re.compile(r'#\s*include\s*[<"]v1model\.p4[>"]')
_LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')
_QUOTED = re.compile(r"'[^']*'")
VERDICTS = ("compiled", "refused as p4c", "unsupported", "wrong error", "p4c refuses",
            "internal error")

#: The samples real p4c-bm2-ss 1.2.5.16 refuses although p4test writes their P4Info: program
#: -> (p4c-bm2-ss's reason, with where in p4c's source it is decided; a pattern netsum-p4c's
#: first error must match, naming the same construct).  Read off p4c's BMv2 back end
#: (backends/bmv2/...) and its XFAIL_TESTS list (backends/bmv2/CMakeLists.txt: -bmv2 samples
#: that p4c's own CI expects to fail).
_NO_MAIN = ("no main package: p4c-bm2-ss stops when the midend finds no top-level main "
            "(simple_switch/main.cpp)", r"no 'main' package instantiation")
_NOT_HEADERS = ("the headers parameter must be a struct of headers, stacks or unions "
                "(simpleSwitch.cpp)", r"headers type .* must be a struct|field '.*' of the "
                                      r"headers struct has type")
_UNKNOWN_EXTERN = ("unknown extern instance (common/extern.cpp, without --emit-externs)",
                   r"unsupported construct: extern '")
P4C_BM2_REFUSES: dict[str, tuple[str, str]] = {
    "bitwise-and": _NO_MAIN,
    "issue1524": _NO_MAIN,
    "issue2735": _NO_MAIN,
    "issue407-2": _NO_MAIN,
    "issue407-3": _NO_MAIN,
    "issue3394": _NOT_HEADERS,
    "parser-unroll-test3": _NOT_HEADERS,
    "parser-unroll-test4": _NOT_HEADERS,
    "parser-unroll-test5": _NOT_HEADERS,
    "issue1193-bmv2": _UNKNOWN_EXTERN,           # also in XFAIL_TESTS
    "issue1882-bmv2": _UNKNOWN_EXTERN,           # also in XFAIL_TESTS
    "issue1882-1-bmv2": _UNKNOWN_EXTERN,         # also in XFAIL_TESTS
    "issue2664-bmv2": _UNKNOWN_EXTERN,           # also in XFAIL_TESTS (Checksum)
    "issue841": _UNKNOWN_EXTERN,                 # Checksum16
    "issue3091": _UNKNOWN_EXTERN,                # ValueLookupTable
    "extern-funcs-bmv2": ("unknown extern function (common/extern.cpp; p4c's CI compiles it "
                          "with --emit-externs and a simple_switch extern module)",
                          r"unsupported construct: extern function '"),
    "issue907-bmv2": ("XFAIL_TESTS: a register of a struct", r"unsupported construct: a "
                                                               r"register of "),
    "issue692-bmv2": ("XFAIL_TESTS: reads stack.next", r"a header stack's \.next can only"),
    "issue1765-bmv2": ("XFAIL_TESTS: computations in the checksum controls "
                       "(simpleSwitch.cpp: Computations are not supported)",
                       r"unsupported construct: hash/checksum input must be"),
    "issue1765-1-bmv2": ("XFAIL_TESTS: computations in the checksum controls",
                         r"unsupported construct: hash/checksum input must be"),
    "issue986-bmv2": ("XFAIL_TESTS: a table applied twice with different successors "
                      "(controlFlowGraph.cpp: has multiple successors)",
                      r"table '.*' is applied more than once .*with different successors"),
    "issue2344": ("a table applied twice in a row (controlFlowGraph.cpp: a path from table "
                  "back to itself)", r"table '.*' is applied twice in a row"),
    "issue887": ("an if in the deparser (common/deparser.cpp: not supported within a "
                 "deparser)", r"unsupported construct: only packet\.emit"),
    "array1": ("an array field in a header (common/header.cpp: BUG nested stack)",
               r"unsupported construct: an array field"),
    "array2": ("an array field in a header (common/header.cpp: BUG nested stack)",
               r"unsupported construct: an array field"),
}


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    verdict: str
    message: str = ""          # the first error (or the exception) when not compiled
    p4info_identical: bool = False
    seconds: float = 0.0


def includes_v1model(src: Path, depth: int = 0) -> bool:
    try:
        text = src.read_text(errors="replace")
    except OSError:
        return False      # e.g. a symlink into a part of the tree that was not extracted
    if _V1MODEL.search(text):
        return True
    if depth > 3:
        return False
    for inc in _LOCAL_INCLUDE.findall(text):
        path = src.parent / inc
        if path.is_file() and includes_v1model(path, depth + 1):
            return True
    return False


def select_programs(tree: Path, only: list[str]) -> list[tuple[Path, Path]]:
    """(program, p4c's P4Info) for every v1model program p4c compiles, sorted by name."""
    samples = tree / "testdata" / "p4_16_samples"
    outputs = tree / "testdata" / "p4_16_samples_outputs"
    if not samples.is_dir() or not outputs.is_dir():
        raise SystemExit(f"p4c_sweep: {tree} has no testdata/p4_16_samples and "
                         "testdata/p4_16_samples_outputs (give an extracted p4c tree)")
    out = []
    for src in sorted(samples.glob("*.p4")):
        ref = outputs / f"{src.name}.p4info.txtpb"
        if not ref.is_file() or (only and src.stem not in only):
            continue
        if includes_v1model(src):
            out.append((src, ref))
    return out


def _timeout(signum: int, frame: Any) -> None:
    raise TimeoutError


def compile_one(job: tuple[str, str, float]) -> Result:
    """Child process: compile one program and classify the outcome."""
    from netsum import p4c as compiler  # imported here so the parent never runs the compiler itself

    src, ref, limit = Path(job[0]), Path(job[1]), job[2]
    name = src.stem
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(int(limit))
    t0 = time.perf_counter()
    try:
        res = compiler.compile_file(src, include_dirs=[src.parent])
        info = res.p4info_text()
        same = info == ref.read_text(errors="replace")
        if name in P4C_BM2_REFUSES:
            return Result(name, "p4c refuses", P4C_BM2_REFUSES[name][0], same,
                          time.perf_counter() - t0)
        return Result(name, "compiled", "", same, time.perf_counter() - t0)
    except compiler.CompileError as e:
        msgs = [d.message for d in e.diagnostics] or [str(e)]
        refusal = P4C_BM2_REFUSES.get(name)
        if refusal is not None:
            same = re.search(refusal[1], msgs[0]) is not None
            return Result(name, "refused as p4c" if same else "wrong error", msgs[0],
                          seconds=time.perf_counter() - t0)
        honest = all(m.startswith("unsupported construct") for m in msgs)
        return Result(name, "unsupported" if honest else "wrong error", msgs[0],
                      seconds=time.perf_counter() - t0)
    except TimeoutError:
        return Result(name, "internal error", f"no result in {limit:g} s",
                      seconds=time.perf_counter() - t0)
    except BaseException as e:  # noqa: BLE001 - the sweep's job is to report these
        where = traceback.extract_tb(e.__traceback__)[-1]
        return Result(name, "internal error",
                      f"{type(e).__name__}: {e} ({Path(where.filename).name}:{where.lineno})",
                      seconds=time.perf_counter() - t0)
    finally:
        signal.alarm(0)


def group(results: list[Result]) -> list[tuple[str, str, list[str]]]:
    """(verdict, message pattern, programs) for the failures, largest group first."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in results:
        if r.verdict not in ("compiled", "refused as p4c"):
            groups[(r.verdict, _QUOTED.sub("'…'", r.message))].append(r.name)
    return sorted(((v, m, names) for (v, m), names in groups.items()),
                  key=lambda g: (-len(g[2]), g[0], g[1]))


def report(results: list[Result], top: int) -> str:
    n = len(results)
    counts = Counter(r.verdict for r in results)
    same = sum(r.p4info_identical for r in results if r.verdict == "compiled")
    lines = [f"{'verdict':<16}{'programs':>9}{'share':>8}", "-" * 33]
    for v in VERDICTS:
        lines.append(f"{v:<16}{counts[v]:>9}{100 * counts[v] / max(n, 1):>7.1f}%")
    bm2 = n - sum(1 for r in results if r.name in P4C_BM2_REFUSES)
    lines += ["-" * 33, f"{'total':<16}{n:>9}",
              f"P4Info byte-identical to p4c's: {same} of {counts['compiled']} compiled "
              f"({100 * same / max(n, 1):.1f}% of all)",
              f"compiled {counts['compiled']} of the {bm2} programs p4c-bm2-ss compiles "
              f"({100 * counts['compiled'] / max(bm2, 1):.1f}%); refused as p4c-bm2-ss "
              f"refuses them: {counts['refused as p4c']} of {n - bm2}", "",
              f"failures by cause (largest first, top {top}):"]
    for verdict, msg, names in group(results)[:top]:
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        lines.append(f"{len(names):>4}  [{verdict}] {msg[:110]}")
        lines.append(f"      {shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path, help="extracted p4c source tree")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument("--only", nargs="*", default=[], help="program names (file stems)")
    ap.add_argument("--json", type=Path, help="write every program's result here")
    ap.add_argument("--top", type=int, default=40, help="failure groups to list")
    args = ap.parse_args(argv)
    progs = select_programs(args.tree, args.only)
    if not progs:
        print("p4c_sweep: no program selected", file=sys.stderr)
        return 2
    jobs = [(str(s), str(r), args.timeout) for s, r in progs]
    results: list[Result] = []
    t0 = time.perf_counter()
    ctx = mp.get_context("fork")
    with ctx.Pool(args.jobs, maxtasksperchild=25) as pool:
        for i, r in enumerate(pool.imap_unordered(compile_one, jobs), 1):
            results.append(r)
            if sys.stderr.isatty() or i % 50 == 0 or i == len(jobs):
                print(f"\r[{i}/{len(jobs)}] {time.perf_counter() - t0:.0f} s", end="",
                      file=sys.stderr, flush=True)
    print(file=sys.stderr)
    results.sort(key=lambda r: r.name)
    print(report(results, args.top))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
