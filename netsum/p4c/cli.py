"""``netsum-p4c``: a p4c-shaped command line for the compiler.

    netsum-p4c prog.p4 -o outdir --p4runtime-files outdir/prog.p4info.txtpb [-I dir] [-D N=V]

Writes ``outdir/prog.json`` (BMv2 JSON) and the P4Info text.  Exit status 1 on compile errors
(p4c-style diagnostics on stderr), 2 on usage errors, 3 on an internal compiler error; never a
Python traceback.
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Sequence

from google.protobuf import json_format

from .diagnostics import CompileError
from .driver import CompileResult, compile_file

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="netsum-p4c",
                                 description="Compile a P4_16 v1model program to BMv2 JSON "
                                             "and P4Info (like p4c-bm2-ss).")
    ap.add_argument("source", help="the P4_16 program")
    ap.add_argument("-o", "--output", default=".",
                    help="output directory, or a .json file name (default: .)")
    ap.add_argument("--p4runtime-files", default=None,
                    help="comma-separated P4Info outputs (.txtpb/.txt text, .json, .bin)")
    ap.add_argument("--p4runtime-file", default=None,
                    help="older p4c spelling: one P4Info output, format from --p4runtime-format")
    ap.add_argument("--p4runtime-format", default="text", choices=["text", "json", "binary"],
                    help="format for --p4runtime-file (default text)")
    ap.add_argument("-I", dest="include", action="append", default=[],
                    help="add an include directory")
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="define a preprocessor macro NAME[=VALUE]")
    ap.add_argument("--std", default="p4-16", choices=["p4-16", "p4_16"])
    ap.add_argument("--arch", default="v1model", choices=["v1model"])
    ap.add_argument("--target", default="bmv2", choices=["bmv2"])
    ap.add_argument("-b", dest="target_b", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--Wdisable", action="append", default=[], help="accepted, ignored")
    return ap


def _write_p4info(result: CompileResult, path: Path, fmt: str | None = None) -> None:
    suffix = path.suffix
    if fmt == "json" or (fmt is None and suffix == ".json"):
        path.write_text(json_format.MessageToJson(result.p4info) + "\n")
    elif fmt == "binary" or (fmt is None and suffix == ".bin"):
        path.write_bytes(result.p4info.SerializeToString())
    else:
        path.write_text(result.p4info_text())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    defines: dict[str, str | None] = {}
    for d in args.defines:
        name, eq, value = d.partition("=")
        defines[name] = value if eq else None
    src = Path(args.source)
    try:
        result = compile_file(src, include_dirs=args.include, defines=defines)
        for w in result.warnings:
            print(w.render(), file=sys.stderr)
        out = Path(args.output)
        json_path = out if out.suffix == ".json" else out / (src.stem + ".json")
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(result.json_text())
        outputs: list[tuple[Path, str | None]] = [
            (Path(f), None) for f in (args.p4runtime_files or "").split(",") if f]
        if args.p4runtime_file:
            outputs.append((Path(args.p4runtime_file), args.p4runtime_format))
        for p, fmt in outputs:
            p.parent.mkdir(parents=True, exist_ok=True)
            _write_p4info(result, p, fmt)
    except CompileError as exc:
        print(str(exc), file=sys.stderr)
        n = len(exc.diagnostics)
        print(f"{n} error{'s' if n != 1 else ''} found", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"netsum-p4c: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the edge: any bug becomes one line, not a traceback
        where = traceback.extract_tb(exc.__traceback__)[-1]
        print(f"netsum-p4c: internal compiler error: {type(exc).__name__}: {exc} "
              f"(at {Path(where.filename).name}:{where.lineno})", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
