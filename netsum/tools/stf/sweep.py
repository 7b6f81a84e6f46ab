"""The STF sweep: every v1model program of p4c's `testdata/p4_16_samples` that has an STF test,
compiled (by netsum-p4c, or taken from a folder of real p4c's outputs) and run on netsum-switch.

Selection, as p4c's own test list: `*-bmv2.p4` with a `.stf` beside it, that real p4c compiles
(it left `p4_16_samples_outputs/NAME.p4.p4info.txtpb`), for v1model (the source includes
`v1model.p4`; PSA and bmv2-specific-architecture programs are left out).

Results: one JSON object per program in `results.json`, a summary table on stdout, and
`summary.md` with the failures grouped by cause (largest group first).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from netsum.tools.stf.run import Outcome, Verdict, run_test

__all__ = ["Program", "select_programs", "compile_netsum", "compile_p4c", "from_json_dir", "sweep",
           "group_failures", "counts", "summary_table", "summary_markdown", "write_results",
           "VERDICT_ORDER"]

VERDICT_ORDER = (Verdict.PASS, Verdict.WRONG, Verdict.REFUSED, Verdict.NOT_COMPILED,
                 Verdict.UNSUPPORTED, Verdict.ERROR)
_V1MODEL = re.compile(r'#\s*include\s*[<"]v1model\.p4[>"]')


@dataclass(frozen=True, slots=True)
class Program:
    name: str            # file stem, e.g. "ternary2-bmv2"
    source: Path
    stf: Path


def select_programs(samples: Path, only: Sequence[str] = ()) -> list[Program]:
    """The v1model bmv2 STF programs real p4c compiles (see the module doc), sorted by name."""
    outputs = samples.parent / "p4_16_samples_outputs"
    progs = []
    for src in sorted(samples.glob("*-bmv2.p4")):
        stf = src.with_suffix(".stf")
        if not stf.is_file() or not (outputs / f"{src.name}.p4info.txtpb").is_file():
            continue
        if not _V1MODEL.search(src.read_text(errors="replace")):
            continue
        if only and src.stem not in only:
            continue
        progs.append(Program(src.stem, src, stf))
    return progs


# A compiler turns (program, output dir) into (json, p4info) or an Outcome saying why not.
Compiler = Callable[[Program, Path], "tuple[Path, Path] | Outcome"]


def _run_compiler(tool: str, argv: list[str], prog: Program, json_path: Path, info: Path,
                  timeout: float, internal_status: int | None = None
                  ) -> tuple[Path, Path] | Outcome:
    """Run one compiler on `prog` from its folder: its two outputs, or why there are none
    (its stderr also kept beside them as NAME.err; `internal_status`: the exit status that
    means the compiler itself failed)."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             cwd=prog.source.parent)
    except subprocess.TimeoutExpired:
        return Outcome(Verdict.NOT_COMPILED, f"{tool} did not finish in {timeout:g} s")
    if res.returncode == 0 and json_path.is_file() and info.is_file():
        return json_path, info
    (json_path.parent / f"{prog.name}.err").write_text(res.stderr or "")
    first = _first_error(res.stderr or res.stdout) or f"exit status {res.returncode}"
    kind = "internal error: " if res.returncode == internal_status else ""
    return Outcome(Verdict.NOT_COMPILED, kind + first, tuple((res.stderr or "").splitlines()[:40]))


def compile_netsum(prog: Program, out: Path, timeout: float = 300.0) -> tuple[Path, Path] | Outcome:
    """netsum-p4c as a user runs it (the command, in a subprocess)."""
    out.mkdir(parents=True, exist_ok=True)
    info = out / f"{prog.name}.p4info.txtpb"
    argv = [sys.executable, "-m", "netsum.p4c", str(prog.source.resolve()), "-o", str(out.resolve()),
            "--p4runtime-files", str(info.resolve())]
    return _run_compiler("netsum-p4c", argv, prog, out / f"{prog.name}.json", info, timeout,
                         internal_status=3)


def compile_p4c(p4c: Path, timeout: float = 300.0) -> Compiler:
    """Real p4c's bmv2 back end (`p4c-bm2-ss`), run as p4c's own test driver runs it."""
    def run(prog: Program, out: Path) -> tuple[Path, Path] | Outcome:
        out.mkdir(parents=True, exist_ok=True)
        json_path = out / f"{prog.name}.json"
        info = out / f"{prog.name}.p4info.txtpb"
        argv = [str(p4c), "--arch", "v1model", "-o", str(json_path.resolve()),
                "--p4runtime-files", str(info.resolve()), str(prog.source.resolve())]
        return _run_compiler("p4c", argv, prog, json_path, info, timeout)
    return run


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "error" in line.lower():
            # Drop the file path: keep "line:col: error: message".
            return re.sub(r"^.*?\.p4:", "", line).strip()
    return text.strip().splitlines()[0] if text.strip() else ""


def from_json_dir(folder: Path) -> Compiler:
    """Outputs made beforehand (real p4c): `NAME.json` and `NAME.p4info.txtpb` in `folder`."""
    def take(prog: Program, out: Path) -> tuple[Path, Path] | Outcome:
        j, i = folder / f"{prog.name}.json", folder / f"{prog.name}.p4info.txtpb"
        if not j.is_file() or not i.is_file():
            err = folder / f"{prog.name}.err"
            why = err.read_text(errors="replace").strip().splitlines()[:1] if err.exists() else []
            return Outcome(Verdict.NOT_COMPILED, why[0] if why else f"no {j.name} in {folder}")
        return j, i
    return take


def _one(prog: Program, compiler: Compiler, work: Path) -> Outcome:
    made = compiler(prog, work / prog.name)
    if isinstance(made, Outcome):
        return made
    json_path, info = made
    out = run_test(prog.stf, json_path, info, work / prog.name)
    if out.verdict is Verdict.PASS:
        # Passing programs need no logs; keep the folder small.
        for f in (work / prog.name).glob("*.log"):
            f.unlink()
    return out


def sweep(progs: Sequence[Program], compiler: Compiler, work: Path, jobs: int = 2,
          progress: Callable[[int, int, Program, Outcome], None] | None = None
          ) -> dict[str, Outcome]:
    """Run every program (`jobs` at a time); returns name -> Outcome in `progs` order."""
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Outcome] = {}
    lock = threading.Lock()
    done = 0

    def task(prog: Program) -> None:
        nonlocal done
        try:
            out = _one(prog, compiler, work)
        except Exception as exc:  # noqa: BLE001 - one program's runner fault must not end the sweep
            out = Outcome(Verdict.ERROR, f"runner: {type(exc).__name__}: {exc}")
        with lock:
            results[prog.name] = out
            done += 1
            if progress is not None:
                progress(done, len(progs), prog, out)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(task, progs))
    return {p.name: results[p.name] for p in progs}


_NORMALISE = [
    (re.compile(r"/\S+\.p4:\d+:\d+"), "FILE"),          # a position inside the message
    (re.compile(r"^\d+:\d+: "), ""),                  # position
    (re.compile(r"^line \d+: "), ""),
    (re.compile(r"'[^']*'"), "'…'"),                    # object names
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b\d+\b"), "N"),
]


def _group_key(out: Outcome) -> str:
    text = out.reason
    if out.verdict is Verdict.WRONG:
        return "output differs from the expectations"
    for pat, rep in _NORMALISE:
        text = pat.sub(rep, text)
    return text[:160]


def group_failures(results: dict[str, Outcome]) -> list[tuple[Verdict, str, list[str]]]:
    """(verdict, cause, programs) for every failure cause, largest group first."""
    groups: dict[tuple[Verdict, str], list[str]] = {}
    for name, out in results.items():
        if out.verdict is Verdict.PASS:
            continue
        groups.setdefault((out.verdict, _group_key(out)), []).append(name)
    return sorted(((v, k, names) for (v, k), names in groups.items()),
                  key=lambda g: (-len(g[2]), VERDICT_ORDER.index(g[0]), g[1]))


def counts(results: dict[str, Outcome]) -> dict[Verdict, int]:
    c = {v: 0 for v in VERDICT_ORDER}
    for out in results.values():
        c[out.verdict] += 1
    return c


def summary_table(results: dict[str, Outcome], label: str) -> str:
    c = counts(results)
    n = len(results) or 1
    head = "| " + " | ".join(["output of"] + [v.value for v in VERDICT_ORDER] + ["total"]) + " |"
    sep = "|" + "---|" * (len(VERDICT_ORDER) + 2)
    row = "| " + " | ".join([label] + [f"{c[v]} ({100 * c[v] / n:.0f}%)" if v is Verdict.PASS
                                       else str(c[v]) for v in VERDICT_ORDER]
                            + [str(len(results))]) + " |"
    return "\n".join([head, sep, row])


def summary_markdown(results: dict[str, Outcome], label: str, command: str) -> str:
    lines = [f"# STF sweep: {label}", "", f"    {command}", "", summary_table(results, label), "",
             "## Failures by cause (largest group first)", ""]
    for verdict, cause, names in group_failures(results):
        lines.append(f"- **{len(names)}** {verdict.value}: {cause}")
        if verdict is not Verdict.WRONG:
            lines.append(f"  - e.g. {names[0]}: `{results[names[0]].reason[:200]}`")
        lines.append(f"  - {', '.join(names)}")
        if verdict is Verdict.WRONG:
            for n in names:
                lines.append(f"  - `{n}`: {results[n].reason}")
    return "\n".join(lines) + "\n"


def write_results(results: dict[str, Outcome], out_dir: Path, label: str, command: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {"label": label, "command": command,
           "counts": {v.value: n for v, n in counts(results).items()},
           "programs": {name: o.as_dict() for name, o in results.items()}}
    (out_dir / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / "summary.md").write_text(summary_markdown(results, label, command))
