"""Did a change make netsum slower?  One benchmark run on two revisions, alternately, in one run.

    python benchmarks/commits.py OLD [NEW] [--rounds 3] [--script own|new] [--timeout S]
                                 -- benchmarks/allreduce.py --workers 4 --k 256 ...

OLD and NEW are git revisions of this repository; NEW defaults to this checkout's working tree
(uncommitted changes included).  A revision gets a throwaway `git worktree` (detached) in a
temporary directory, removed again at exit, on Ctrl-C and on SIGTERM.  Both sides run in this
process's virtualenv, each with its own tree first on PYTHONPATH: the benchmark, and every
process it starts through the venv's entry points (netsum-switch, netsum-worker: their
`from netsum.x import main` resolves through the same sys.path), import that tree's netsum.
That is checked before anything is measured: for each side, `netsum` and the modules behind the
venv's netsum-switch and netsum-worker scripts are imported with the side's environment from a
neutral directory and must come from its tree (printed), else the tool stops.

Each round runs the benchmark command once per side, OLD and NEW alternately, the pair's order
swapped every round (the second of a pair is favoured on a loaded machine), so machine noise
falls on both.  `--script own` (the default) runs each revision's own copy of the script (its
harness matches its code); `--script new` runs NEW's copy against both (the same harness; only
when the script needs nothing OLD lacks).  The figures are parsed from what the benchmark
prints (allreduce.py, switch_pps.py, compile_time.py and vs_gloo.py are known; see PARSERS)
and tabled per figure: the median and min-max of each side, new/old of the medians, and a
verdict: "within noise" while the two ranges overlap, else "new better" / "new worse" in the
figure's own direction.  `OLD OLD` (the same revision on both sides) shows how far the noise
alone moves the ratio: on the shared 2-core machine at load 5-7 it moved medians by
0.81-2.47x and put one figure of eight out of range in 3 rounds (docs/benchmarks-log.md), so
read a lone verdict against such a run, or take more rounds.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]

#: The venv's console scripts whose code must come from the tree under test (the rig starts them).
ENTRY_POINTS = ("netsum-switch", "netsum-worker")


@dataclass(frozen=True, slots=True)
class Figure:
    """One number a benchmark printed: `higher` says which direction is better."""
    name: str
    value: float
    unit: str
    higher: bool


# -- parsing what a benchmark prints -----------------------------------------------------------
def _num(text: str) -> float:
    return float(text.replace(",", ""))


# benchmarks/allreduce.py's result rows: [path] mode workers K goodput M/s per-worker M/s retx
# bare fwd/s ceiling M/s ratio cpu-switch % cpu-workers % us/pkt-switch us/pkt-worker ok
_ALLREDUCE = re.compile(
    r"^\s*(?P<path>[\w/]+\s+)?(?P<mode>udp|netns)\s+(?P<n>\d+)\s+(?P<k>\d+)\s+"
    r"(?P<goodput>[\d.]+) M/s\s+(?P<mean>[\d.]+) M/s\s+(?P<retx>\d+)\s+(?P<fwd>[\d,]+)\s+"
    r"[\d.]+ M/s\s+[\d.na]+\s+\d+ %\s+\d+ %\s+(?P<sw_us>[\d.]+)\s+(?P<wk_us>[\d.]+)\s+"
    r"(?P<ok>yes|NO)\s*$")


def parse_allreduce(text: str) -> list[Figure]:
    """Goodput, CPU per packet and retransmissions of each row, and the bare loop's forwards/s
    (the harness's ceiling: no netsum code in it, so it shows the machine's own noise)."""
    out: list[Figure] = []
    for line in text.splitlines():
        m = _ALLREDUCE.match(line)
        if not m:
            continue
        path = (m["path"] or "").strip()
        point = f"{path + ' ' if path else ''}{m['mode']} {m['n']} workers K={m['k']}"
        if m["ok"] != "yes":
            raise ValueError(f"allreduce.py: the all-reduce at {point} failed")
        out += [Figure(f"{point}: goodput", _num(m["goodput"]), "M elements/s", True),
                Figure(f"{point}: per-worker goodput", _num(m["mean"]), "M elements/s", True),
                Figure(f"{point}: switch CPU per contribution", _num(m["sw_us"]), "us", False),
                Figure(f"{point}: workers' CPU per packet", _num(m["wk_us"]), "us", False),
                Figure(f"{point}: retransmissions", _num(m["retx"]), "", False),
                Figure(f"{m['n']} senders K={m['k']}: bare loop (no netsum code)",
                       _num(m["fwd"]), "fwd/s", True)]
    return out


_PPS = re.compile(r"^\s+(?P<where>in-process|udp ports|veth)\s+(?P<label>.+?)\s+"
                  r"(?P<pps>[\d,]+) pkt/s in(?:.*bare recv->send loop\s+(?P<bare>[\d,]+) pkt/s)?")
_PPS_P4 = re.compile(r"^\s+in-process\s+netsum\.p4 K=(?P<k>\d+) \((?P<names>[^)]*)\): "
                     r"(?P<rates>[\d,| ]+) contributions per CPU-s")
_PPS_LOOP = re.compile(r"^\s+udp ports\s+netsum\.p4 K=(?P<k>\d+), job of (?P<n>\d+)\s+"
                       r"C loop\s+(?P<c>[\d,]+) \| Python loop\s+(?P<py>[\d,]+) contributions/s"
                       r".*switch CPU (?P<c_us>[\d.]+) \| (?P<py_us>[\d.]+) us per contribution")


def parse_switch_pps(text: str) -> list[Figure]:
    """Every rate benchmarks/switch_pps.py prints: pkt/s of the router and the stand-in (and
    the bare loop beside them), netsum.p4's contributions per CPU-s per pipeline, and netsum.p4
    through the daemon's C and Python port loops."""
    out: list[Figure] = []
    for line in text.splitlines():
        if m := _PPS_P4.match(line):
            names = [x.strip() for x in m["names"].split("|")]
            rates = [_num(x) for x in m["rates"].split("|")]
            if len(names) != len(rates):
                raise ValueError(f"switch_pps.py: {len(names)} names, {len(rates)} rates: {line}")
            out += [Figure(f"in-process netsum.p4 K={m['k']}, {name}", rate,
                           "contributions/CPU-s", True) for name, rate in zip(names, rates)]
        elif m := _PPS_LOOP.match(line):
            point = f"udp ports netsum.p4 K={m['k']}, job of {m['n']}"
            out += [Figure(f"{point}, C loop", _num(m["c"]), "contributions/s", True),
                    Figure(f"{point}, Python loop", _num(m["py"]), "contributions/s", True),
                    Figure(f"{point}, C loop: switch CPU", _num(m["c_us"]), "us/contribution",
                           False),
                    Figure(f"{point}, Python loop: switch CPU", _num(m["py_us"]),
                           "us/contribution", False)]
        elif m := _PPS.match(line):
            point = f"{m['where']} {m['label']}"
            out.append(Figure(point, _num(m["pps"]), "pkt/s", True))
            if m["bare"]:
                out.append(Figure(f"{point}: bare loop (no netsum code)", _num(m["bare"]),
                                  "pkt/s", True))
    return out


_CPU = re.compile(r"^\s+(?P<kind>\S+) n=(?P<n>\d+)\s+(?P<size>\d+): ranks .*per packet: ranks\s+"
                  r"(?P<rank>[\d.]+)\s+switch\s+(?P<sw>[\d.]+)")
_CAP = re.compile(r"^emulation capacity \((?P<kind>[^,]+), n=(?P<n>\d+), K=(?P<k>\d+), "
                  r"(?P<size>\d+) elements\): (?P<gbps>[\d.]+) Gb/s")


def parse_vs_gloo(text: str) -> list[Figure]:
    """benchmarks/vs_gloo.py: each kind's median time per point and its ratio to gloo's, the
    ranks' CPU per packet, and the emulation capacity."""
    out: list[Figure] = []
    kinds: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words[:2] == ["ranks", "elements"]:
            kinds = [words[i - 1] for i in range(3, len(words)) if words[i] == "ms"]
            ratios = [w.removesuffix("/gloo") for w in words if w.endswith("/gloo")]
            continue
        if kinds and len(words) >= 2 + len(kinds) and words[0].isdigit() and \
                words[1].isdigit():
            point = f"n={words[0]} {int(words[1]):,}"
            for kind, t in zip(kinds, words[2:2 + len(kinds)]):
                if t != "-":
                    out.append(Figure(f"{point} {kind}: time", _num(t), "ms", False))
            at = 2 + len(kinds)
            for kind, r in zip(ratios, words[at:at + len(ratios)]):
                if r != "nan":
                    out.append(Figure(f"{point} {kind}/gloo", _num(r), "x", False))
        elif m := _CPU.match(line):
            out.append(Figure(f"n={m['n']} {int(m['size']):,} {m['kind']}: ranks' CPU per "
                              "packet", _num(m["rank"]), "us", False))
        elif m := _CAP.match(line):
            out.append(Figure(f"capacity {m['kind']} n={m['n']} K={m['k']}", _num(m["gbps"]),
                              "Gb/s", True))
    return out


def parse_compile_time(text: str) -> list[Figure]:
    """benchmarks/compile_time.py: per program, the median time of the whole compile and of
    the lowering (GenerateJson, the type check included), in ms (lower is better)."""
    out: list[Figure] = []
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("program"):
            header = line.split()[1:]
            continue
        cells = re.findall(r"([\d.]+)ms", line)
        if not header or not cells:
            continue
        label = line[:18].strip()
        for name, value in zip(header, cells):
            if name in ("GenerateJson", "total"):
                out.append(Figure(f"{label}: {name}", float(value), "ms", False))
    return out


#: script file name -> parser of its output
PARSERS: dict[str, Callable[[str], list[Figure]]] = {
    "allreduce.py": parse_allreduce,
    "switch_pps.py": parse_switch_pps,
    "vs_gloo.py": parse_vs_gloo,
    "compile_time.py": parse_compile_time,
}


# -- the verdict ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Compared:
    """One figure's samples on both sides, summarised."""
    name: str
    unit: str
    higher: bool
    old: tuple[float, ...]
    new: tuple[float, ...]

    @property
    def ratio(self) -> float:
        base = statistics.median(self.old)
        return statistics.median(self.new) / base if base else float("nan")

    @property
    def verdict(self) -> str:
        return verdict(self.old, self.new, self.higher)


def verdict(old: tuple[float, ...] | list[float], new: tuple[float, ...] | list[float],
            higher: bool) -> str:
    """"within noise" while the min-max ranges of the two samples overlap (touching counts);
    otherwise which side of the old range the whole new range lies on, read in the figure's
    direction (`higher`: bigger is better).  One run a side has no range to judge by."""
    if not old or not new:
        return "missing"
    if len(old) < 2 or len(new) < 2:
        return "too few runs"
    if min(new) <= max(old) and min(old) <= max(new):
        return "within noise"
    above = min(new) > max(old)
    return "new better" if above == higher else "new worse"


def compare(old: list[list[Figure]], new: list[list[Figure]]) -> list[Compared]:
    """Per figure name (in the order first printed), its values over the rounds of each side;
    a figure only one side prints shows up with the other side empty ("missing")."""
    names: dict[str, Figure] = {}
    for run in [*old, *new]:
        for f in run:
            names.setdefault(f.name, f)
    return [Compared(name, f.unit, f.higher,
                     tuple(x.value for run in old for x in run if x.name == name),
                     tuple(x.value for run in new for x in run if x.name == name))
            for name, f in names.items()]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def table(rows: list[Compared]) -> str:
    """A markdown table: one row per figure."""
    lines = ["| figure | unit | old median | new median | new/old | old min-max | new min-max "
             "| verdict |", "|---|---|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        def span(xs: tuple[float, ...]) -> str:
            return f"{_fmt(min(xs))}-{_fmt(max(xs))}" if xs else "-"
        med = [_fmt(statistics.median(xs)) if xs else "-" for xs in (r.old, r.new)]
        ratio = f"{r.ratio:.3f}" if r.old and r.new else "-"
        better = "higher" if r.higher else "lower"
        lines.append(f"| {r.name} | {r.unit}{' ' if r.unit else ''}({better} is better) | "
                     f"{med[0]} | {med[1]} | {ratio} | {span(r.old)} | {span(r.new)} | "
                     f"{r.verdict} |")
    return "\n".join(lines)


# -- the two trees ----------------------------------------------------------------------------
def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def describe(rev: str = "HEAD") -> str:
    """A commit's short hash and the start of its subject."""
    text = git("log", "-1", "--format=%h %s", rev)
    return text if len(text) <= 60 else text[:57].rstrip(" ,;:-(") + "..."


@dataclass(frozen=True, slots=True)
class Side:
    label: str          # "old" / "new"
    rev: str            # as given, or "working tree"
    desc: str           # the commit (and whether the working tree has changes)
    tree: Path


@contextmanager
def trees(old: str, new: str | None, tmp: Path) -> Iterator[tuple[Side, Side]]:
    """Worktrees for the revisions (NEW None: this checkout), removed on the way out."""
    made: list[Path] = []

    def checkout(label: str, rev: str) -> Side:
        sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        path = tmp / label
        git("worktree", "add", "--detach", str(path), sha)
        made.append(path)
        return Side(label, rev, describe(sha), path)

    try:
        o = checkout("old", old)
        if new is None:
            dirty = git("status", "--porcelain", "--untracked-files=no")
            head = describe()
            n = Side("new", "working tree", head + (f" + {len(dirty.splitlines())} uncommitted "
                                                    "changes" if dirty else ""), ROOT)
        else:
            n = checkout("new", new)
        yield o, n
    finally:
        for path in made:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                           capture_output=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)


def entry_modules(bindir: Path) -> dict[str, tuple[str, str]]:
    """The interpreter (its #! line) and the module each of the venv's ENTRY_POINTS scripts
    runs `main` from."""
    mods: dict[str, tuple[str, str]] = {}
    for name in ENTRY_POINTS:
        try:
            text = (bindir / name).read_text()
        except OSError:
            continue
        interp = text.splitlines()[0].removeprefix("#!").strip() if text.startswith("#!") \
            else sys.executable
        if m := re.search(r"^from (\S+) import", text, re.M):
            mods[name] = (interp, m.group(1))
    return mods


def env_for(side: Side) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(side.tree))


_WHERE = "import importlib, sys\nfor m in sys.argv[1:]:\n    print(m, importlib.import_module(m).__file__)"


def check_imports(side: Side, tmp: Path) -> list[str]:
    """Import netsum with this interpreter, and each entry point's module with the interpreter
    of its script, as the side's processes will (its PYTHONPATH, from a directory outside every
    tree); each must be a file of its tree.  Returns "module file" lines."""
    jobs: dict[str, list[str]] = {sys.executable: ["netsum"]}
    for interp, mod in entry_modules(Path(sys.executable).parent).values():
        jobs.setdefault(interp, []).append(mod)
    lines: list[str] = []
    for interp, mods in jobs.items():
        res = subprocess.run([interp, "-c", _WHERE, *mods], cwd=tmp, env=env_for(side),
                             capture_output=True, text=True, timeout=300)
        if res.returncode:
            raise SystemExit(f"commits: {side.label} ({side.desc}): {interp} cannot import "
                             f"{mods}:\n{res.stderr[-1500:]}")
        for line in res.stdout.splitlines():
            mod, file = line.split(" ", 1)
            if not Path(file).resolve().is_relative_to(side.tree.resolve()):
                raise SystemExit(f"commits: {side.label}: {mod} imports from {file}, not from "
                                 f"{side.tree}: the run would not measure {side.desc}")
            lines.append(f"{mod} {file}" + ("" if interp == sys.executable else
                                              f"  (by {interp})"))
    return lines


def run_once(side: Side, script: Path, args: list[str], timeout: float) -> tuple[str, float]:
    """The benchmark's stdout and how long it took.  Stopped early (timeout, SIGTERM, Ctrl-C),
    it gets SIGINT -- the signal its own clean-up handles (the rig stops the processes it
    started) -- and a while to exit before it is killed."""
    t0 = time.monotonic()
    with subprocess.Popen([sys.executable, str(script), *args], cwd=side.tree,
                          env=env_for(side), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as exc:
            if not isinstance(exc, KeyboardInterrupt):    # Ctrl-C reached its group already
                proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except BaseException:
                proc.kill()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise SystemExit(f"commits: {side.label}: {script.name} ran past "
                                 f"{timeout:g} s") from None
            raise
    if proc.returncode:
        raise SystemExit(f"commits: {side.label} ({side.desc}): {script.name} exited "
                         f"{proc.returncode}:\n{out[-1500:]}\n{err[-1500:]}")
    return out, time.monotonic() - t0


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)       # unwinds through the finally that removes the trees


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", help="the revision before the change")
    ap.add_argument("new", nargs="?", help="the revision after it (default: this working tree)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per side, interleaved")
    ap.add_argument("--script", choices=("own", "new"), default="own",
                    help="own: each revision runs its own copy of the script; new: NEW's copy")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per benchmark run")
    ap.epilog = ("-- SCRIPT [ARGS]: the benchmark, a script's path in the repository, and its "
                 "arguments")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not cmd:
        ap.error("no benchmark command (-- SCRIPT [ARGS])")
    script_rel = Path(cmd[0])
    if script_rel.is_absolute():
        script_rel = script_rel.resolve().relative_to(ROOT)
    parse = PARSERS.get(script_rel.name)
    if parse is None:
        ap.error(f"no parser for {script_rel.name}: known are {', '.join(PARSERS)}")
    signal.signal(signal.SIGTERM, _terminate)
    with tempfile.TemporaryDirectory(prefix="netsum-commits-") as tmp_s, \
            trees(a.old, a.new, Path(tmp_s)) as (old, new):
        tmp = Path(tmp_s)
        for side in (old, new):
            print(f"{side.label}: {side.rev} = {side.desc}  ({side.tree})")
            for line in check_imports(side, tmp):
                print(f"  {line}")
        scripts = {s.label: (new.tree if a.script == "new" else s.tree) / script_rel
                   for s in (old, new)}
        for label, path in scripts.items():
            if not path.is_file():
                raise SystemExit(f"commits: {label}: no {script_rel} in that tree")
        print(f"command: {script_rel} {' '.join(cmd[1:])}  ({a.script} script per side); "
              f"{a.rounds} rounds, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              "cores", flush=True)
        runs: dict[str, list[list[Figure]]] = {"old": [], "new": []}
        total, done = 2 * a.rounds, 0
        for r in range(a.rounds):
            for side in ((old, new) if r % 2 == 0 else (new, old)):
                text, took = run_once(side, scripts[side.label], cmd[1:], a.timeout)
                figs = parse(text)
                if not figs:
                    raise SystemExit(f"commits: {side.label}: no figures found in the output "
                                     f"of {script_rel.name}:\n{text[-1500:]}")
                runs[side.label].append(figs)
                done += 1
                print(f"[{done}/{total}] round {r + 1} {side.label}: {len(figs)} figures in "
                      f"{took:.0f} s", file=sys.stderr, flush=True)
        print(f"\nold = {old.desc}; new = {new.desc}; load average now "
              f"{os.getloadavg()[0]:.1f}\n")
        print(table(compare(runs["old"], runs["new"])))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("commits: interrupted (its worktrees removed)", file=sys.stderr)
        raise SystemExit(130) from None
