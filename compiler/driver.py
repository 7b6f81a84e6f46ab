"""The compiler pipeline: one list of passes, run in order, stopping between passes on errors.

Order matters: names must be resolved (and constants folded) before the layout can read the
V1Switch types; the layout must exist before any expression can be bound to storage; the
JSON must be generated before the P4Info because lowering decides which tables and actions
exist (unapplied tables and inlined-only actions are dropped, as p4c does).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from p4.config.v1 import p4info_pb2

from .bmv2_json import GenerateJson
from .check import CheckTypes
from .diagnostics import CompileError, Diagnostic, Diagnostics, NOPOS
from .layout import BuildLayout
from .lexer import tokenize
from .p4info import build_p4info, p4info_text
from .parser import parse
from .preprocess import preprocess
from .resolve import ResolveNames

__all__ = ["CompileResult", "compile_source", "compile_file"]


@dataclass(frozen=True)
class CompileResult:
    bmv2_json: dict[str, Any]
    p4info: p4info_pb2.P4Info
    warnings: tuple[Diagnostic, ...] = ()

    def json_text(self) -> str:
        return json.dumps(self.bmv2_json, indent=2) + "\n"

    def p4info_text(self) -> str:
        return p4info_text(self.p4info)


def compile_source(text: str, filename: str = "<string>", include_dirs: Sequence[str | Path] = (),
                   defines: Mapping[str, str | None] | None = None) -> CompileResult:
    """Compile P4_16 source text; raises CompileError with every diagnostic found."""
    diags = Diagnostics()
    if filename != "<string>":
        diags.sources[filename] = text.splitlines()
    # 1. C preprocessor (#include, #define) with line markers kept for positions.
    pre = preprocess(text, filename, include_dirs, defines, diags)
    diags.check()
    assert pre is not None
    # 2. Lex and parse; syntax errors recover at declaration boundaries.
    program = parse(tokenize(pre, filename, diags), diags)
    diags.check()
    # 3. ResolveNames: global symbol table, types, constants.
    g = ResolveNames().run(program, diags)
    diags.check()
    # 4. BuildLayout: header instances and scalars from V1Switch's H and M.
    layout = BuildLayout().run(g, diags)
    diags.check()
    # 5. CheckTypes: every statement and expression of every block, v1model placement rules.
    CheckTypes().run(g, layout, diags)
    diags.check()
    # 6. GenerateJson: lowering (inlining, synthesized tables, jumps) and the BMv2 document.
    doc, cp = GenerateJson().run(g, layout, filename, diags)
    diags.check()
    # 7. GenerateP4Info: ids, aliases, the protobuf.
    info = build_p4info(cp, diags)
    diags.check()
    return CompileResult(doc, info, tuple(diags.warnings))


def compile_file(path: str | Path, include_dirs: Sequence[str | Path] = (),
                 defines: Mapping[str, str | None] | None = None) -> CompileResult:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        d = Diagnostics()
        d.error(NOPOS, f"cannot read {p}: {exc}")
        raise CompileError(d.errors) from None
    return compile_source(text, str(path), include_dirs, defines)
