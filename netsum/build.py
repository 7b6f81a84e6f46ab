"""The P4 build: compiles every program under p4/ into build/p4/ and keeps the golden copies.

Owns the mapping from P4 sources to build outputs (`netsum.p4` once per supported K:
`netsum.json` for the default K (wireformat.K_DEFAULT), `netsum_k<K>.json` for the others, each
with `.p4info.txtpb`), the staleness rule used by `ensure_built` (outputs older than the source,
anything else under p4/, the compiler itself or the wire format, which says what the default K
is, are rebuilt), and the golden copies in tests/golden/p4/ that pin the compiler's output for
these programs.  Golden copies of netsum.p4 are kept for K in `GOLDEN_K` only, always named
`netsum_k<K>` (whatever the default K is): the larger builds differ from them by nothing but
more of the same X-macro lanes (1.3 MB of JSON at K=256), which tests/unit/test_build.py checks
lane by lane instead.

    python -m netsum.build                  # netsum's compiler (what `make p4` runs)
    python -m netsum.build --p4c            # real p4c-bm2-ss, when it is on PATH
    python -m netsum.build --update-golden  # also refresh tests/golden/p4/
    python -m netsum.build --check-golden   # exit 1 if the compiler output differs from golden

Sources are compiled under their path relative to the repository root (`p4/netsum.p4`), so the
`source_info` in the JSON does not depend on where the repository is checked out.
"""
from __future__ import annotations

import argparse
import enum
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from netsum import wire as wireformat
from netsum.paths import CHECKOUT, P4_BUILD_DIR, P4_DIR
from netsum.wire import K_DEFAULT, K_SUPPORTED

__all__ = [
    "Backend", "BuildError", "Target", "Outputs", "GOLDEN_DIR", "GOLDEN_K", "targets",
    "golden_targets", "target_for",
    "build_target", "build_all", "ensure_built", "compile_outputs", "golden_mismatches",
    "update_golden", "main",
]

GOLDEN_DIR = (CHECKOUT or Path.cwd()) / "tests" / "golden" / "p4"
#: The aggregation program, built once per K in wireformat.K_SUPPORTED.
NETSUM_SOURCE = "netsum.p4"
P4C_BINARY = "p4c-bm2-ss"
UPDATE_HINT = "python -m netsum.build --update-golden"
#: netsum.p4 builds pinned by golden copies (see the module docstring).
GOLDEN_K = (32, 64)


class Backend(enum.Enum):
    NETSUM = "netsum-p4c"
    P4C = "p4c"


class BuildError(Exception):
    """A program did not compile, or a backend is unavailable.  str() is what the user sees."""


@dataclass(frozen=True, slots=True)
class Target:
    """One build product: a source compiled with some defines into `<stem>.json/.p4info.txtpb`."""
    source: Path
    stem: str
    defines: tuple[tuple[str, str], ...] = ()

    def json_name(self) -> str:
        return f"{self.stem}.json"

    def p4info_name(self) -> str:
        return f"{self.stem}.p4info.txtpb"


@dataclass(frozen=True, slots=True)
class Outputs:
    json_text: str
    p4info_text: str


def netsum_stem(k: int) -> str:
    return "netsum" if k == K_DEFAULT else f"netsum_k{k}"


def targets(p4_dir: Path = P4_DIR) -> list[Target]:
    """Every build product for the programs directly under `p4_dir`, in a stable order."""
    result: list[Target] = []
    for source in sorted(p4_dir.glob("*.p4")):
        if source.name == NETSUM_SOURCE:
            for k in K_SUPPORTED:
                result.append(Target(source, netsum_stem(k), (("NETSUM_K", str(k)),)))
        else:
            result.append(Target(source, source.stem))
    return result


def target_for(k: int, p4_dir: Path = P4_DIR) -> Target:
    if k not in K_SUPPORTED:
        raise BuildError(f"K={k} is not supported by netsum.p4 (supported: "
                         f"{', '.join(map(str, K_SUPPORTED))})")
    return Target(p4_dir / NETSUM_SOURCE, netsum_stem(k), (("NETSUM_K", str(k)),))


def golden_targets(p4_dir: Path = P4_DIR) -> list[Target]:
    """The targets whose outputs tests/golden/p4/ pins, netsum.p4's named by their K (not by
    which K is the default: changing the default renames no golden copy)."""
    result: list[Target] = []
    for t in targets(p4_dir):
        if t.source.name != NETSUM_SOURCE:
            result.append(t)
            continue
        k = int(dict(t.defines)["NETSUM_K"])
        if k in GOLDEN_K:
            result.append(Target(t.source, f"netsum_k{k}", t.defines))
    return result


def _base() -> Path:
    """What source names are shown relative to: the checkout, else the working directory."""
    return CHECKOUT or Path.cwd()


def _display_name(source: Path) -> str:
    try:
        return source.resolve().relative_to(_base().resolve()).as_posix()
    except ValueError:
        return str(source)


def compile_outputs(target: Target, backend: Backend = Backend.NETSUM) -> Outputs:
    """Compile one target in memory.  Raises BuildError with the compiler's diagnostics."""
    if backend is Backend.P4C:
        return _compile_p4c(target)
    compile_source, compile_error = _netsum_compiler()
    try:
        text = target.source.read_text()
    except OSError as exc:
        raise BuildError(f"{target.source}: cannot read: {exc.strerror or exc}") from exc
    try:
        result = compile_source(
            text, filename=_display_name(target.source),
            include_dirs=(target.source.parent,), defines=dict(target.defines))
    except compile_error as exc:
        raise BuildError(f"{_display_name(target.source)} ({_describe(target)}) does not "
                         f"compile:\n{exc}") from exc
    return Outputs(result.json_text(), result.p4info_text())


def _netsum_compiler() -> tuple[Any, type[Exception]]:
    """compiler.compile_source and compiler.CompileError (docs/architecture.md)."""
    # Imported late so that `--p4c` and the CLI's error path work without netsum's compiler.
    try:
        from netsum import p4c as compiler
    except Exception as exc:  # noqa: BLE001 - a broken install is reported, not a traceback
        raise BuildError(f"netsum's compiler is not importable: "
                         f"{type(exc).__name__}: {exc}") from exc
    compile_source = getattr(compiler, "compile_source", None)
    compile_error = getattr(compiler, "CompileError", None)
    if compile_source is None or not isinstance(compile_error, type):
        raise BuildError("netsum's compiler does not offer compile_source/CompileError "
                         "(docs/architecture.md): is it installed and complete?")
    return compile_source, compile_error


def _describe(target: Target) -> str:
    flags = " ".join(f"-D{k}={v}" for k, v in target.defines)
    return f"{target.stem}{' ' + flags if flags else ''}"


def _p4c_executable() -> str:
    exe = shutil.which(P4C_BINARY)
    if exe is None:
        raise BuildError(f"--p4c: {P4C_BINARY} is not on PATH (real p4c is not installable "
                         "here; use netsum's compiler, the default)")
    return exe


def _compile_p4c(target: Target) -> Outputs:
    exe = _p4c_executable()
    with tempfile.TemporaryDirectory(prefix="netsum-p4c-") as tmp:
        out_json = Path(tmp) / "out.json"
        out_info = Path(tmp) / "out.p4info.txtpb"
        argv = [exe, "--arch", "v1model", *[f"-D{k}={v}" for k, v in target.defines],
                "-o", str(out_json), "--p4runtime-files", str(out_info),
                _display_name(target.source)]
        proc = subprocess.run(argv, cwd=_base(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"{' '.join(argv)} failed:\n{proc.stderr.strip()}")
        return Outputs(out_json.read_text(), out_info.read_text())


def _write_atomic(path: Path, text: str) -> None:
    # Tests and the demo may read build outputs while another process rebuilds them.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_target(target: Target, out_dir: Path = P4_BUILD_DIR,
                 backend: Backend = Backend.NETSUM) -> tuple[Path, Path]:
    outputs = compile_outputs(target, backend)
    json_path = out_dir / target.json_name()
    info_path = out_dir / target.p4info_name()
    _write_atomic(json_path, outputs.json_text)
    _write_atomic(info_path, outputs.p4info_text)
    return json_path, info_path


def build_all(out_dir: Path = P4_BUILD_DIR, backend: Backend = Backend.NETSUM,
              p4_dir: Path = P4_DIR) -> list[tuple[Path, Path]]:
    """Build every target; compile errors of all targets are reported together."""
    # A missing backend is one error, not one per target.
    if backend is Backend.P4C:
        _p4c_executable()
    else:
        _netsum_compiler()
    built: list[tuple[Path, Path]] = []
    errors: list[str] = []
    for target in targets(p4_dir):
        try:
            built.append(build_target(target, out_dir, backend))
        except BuildError as exc:
            errors.append(str(exc))
    if errors:
        raise BuildError("\n".join(errors))
    return built


def _inputs(target: Target) -> list[Path]:
    """Files whose change makes the outputs stale: everything under p4/, the compiler and the
    wire format (its K_DEFAULT decides which K `netsum.json` holds: a changed default must not
    leave the old K's build under the default's name)."""
    files = [p for p in target.source.parent.rglob("*") if p.is_file()]
    files.append(Path(wireformat.__file__))
    compiler_dir = Path(__file__).resolve().parent / "p4c"
    files += [p for p in compiler_dir.rglob("*") if p.suffix in (".py", ".p4")]
    return files


def _newest_mtime(paths: Sequence[Path]) -> float:
    newest = 0.0
    for p in paths:
        try:
            newest = max(newest, p.stat().st_mtime)
        except OSError:
            continue  # vanished between listing and stat: another process is editing
    return newest


def ensure_built(k: int = K_DEFAULT, out_dir: Path = P4_BUILD_DIR,
                 p4_dir: Path = P4_DIR) -> tuple[Path, Path]:
    """(json_path, p4info_path) for netsum.p4 with K=k, rebuilt when older than its inputs."""
    target = target_for(k, p4_dir)
    json_path = out_dir / target.json_name()
    info_path = out_dir / target.p4info_name()
    try:
        oldest_output = min(json_path.stat().st_mtime, info_path.stat().st_mtime)
    except OSError:
        oldest_output = -1.0
    if oldest_output < _newest_mtime(_inputs(target)):
        return build_target(target, out_dir)
    return json_path, info_path


def golden_mismatches(golden_dir: Path = GOLDEN_DIR, p4_dir: Path = P4_DIR) -> list[str]:
    """Names of golden files that differ from (or are missing for) the compiler's output."""
    bad: list[str] = []
    for target in golden_targets(p4_dir):
        outputs = compile_outputs(target)
        for name, text in ((target.json_name(), outputs.json_text),
                           (target.p4info_name(), outputs.p4info_text)):
            path = golden_dir / name
            if not path.is_file() or path.read_text() != text:
                bad.append(name)
    return bad


def update_golden(golden_dir: Path = GOLDEN_DIR, p4_dir: Path = P4_DIR) -> list[Path]:
    written: list[Path] = []
    for target in golden_targets(p4_dir):
        outputs = compile_outputs(target)
        for name, text in ((target.json_name(), outputs.json_text),
                           (target.p4info_name(), outputs.p4info_text)):
            path = golden_dir / name
            if not path.is_file() or path.read_text() != text:
                _write_atomic(path, text)
                written.append(path)
    return written


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m netsum.build",
                                 description="Compile the P4 programs under p4/ into build/p4/.")
    ap.add_argument("--p4c", action="store_true",
                    help=f"compile with real {P4C_BINARY} (must be on PATH) instead of netsum's compiler")
    ap.add_argument("--out", type=Path, default=P4_BUILD_DIR, help="output directory (build/p4)")
    golden = ap.add_mutually_exclusive_group()
    golden.add_argument("--update-golden", action="store_true",
                        help="also rewrite tests/golden/p4/ from netsum's compiler output")
    golden.add_argument("--check-golden", action="store_true",
                        help="only compare netsum's compiler output with tests/golden/p4/")
    return ap.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    backend = Backend.P4C if args.p4c else Backend.NETSUM
    if args.update_golden and backend is Backend.P4C:
        raise BuildError("--update-golden pins netsum's compiler output; drop --p4c")
    if args.check_golden:
        bad = golden_mismatches()
        if bad:
            print(f"golden files differ from the compiler output: {', '.join(bad)}; "
                  f"if the change is intended run `{UPDATE_HINT}`", file=sys.stderr)
            return 1
        print("golden files are current")
        return 0
    for json_path, info_path in build_all(args.out, backend):
        print(f"built {_display_name(json_path)} {_display_name(info_path)}")
    if args.update_golden:
        written = update_golden()
        print(f"golden: {len(written)} file(s) updated in {_display_name(GOLDEN_DIR)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        return run(args)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(f"error: netsum's compiler is not importable: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
