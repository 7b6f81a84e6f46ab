"""The compiler pipeline: one list of passes, run in order, stopping between passes on errors.

Each pass reads the :class:`CompileState` fields filled by earlier passes and fills its own.
Order matters: variables get unique names and move to the top of their block before
anything looks a name up (so no later pass can bind a name to the wrong declaration); names must be resolved (and constants folded) before the layout can read the
V1Switch types; the layout must exist before any expression can be bound to storage; the
lowering type-checks what it emits and collects every error, and the code it drops is checked
in the same pass (CheckDropped), so one run reports all type errors; the JSON is generated
before the P4Info because lowering decides which tables and actions exist (unapplied tables
and inlined-only actions are dropped, as p4c does).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from p4.config.v1 import p4info_pb2

from . import ast as A
from .bmv2_json import GenerateJson
from .bound_args import BindActionListCalls
from .builtins import CreateBuiltins
from .direct_calls import InstantiateDirectCalls
from .check import CheckDropped
from .ctor_consts import BindPackageConstants
from .dead_reads import RemoveDeadReads
from .diagnostics import CompileError, Diagnostic, Diagnostics, NOPOS
from .layout import BuildLayout, Layout
from .lexer import tokenize
from .loops import CheckLoops
from .model import ControlPlane
from .generics import SpecializeGenerics
from .inline_functions import InlineFunctions
from .parser_ifs import SplitParserIfs
from .inline_parsers import InlineParsers
from .move_decls import MoveDeclarations
from .p4info import build_p4info, p4info_text
from .parser import parse
from .parser_lookahead import HoistLookahead
from .preprocess import preprocess
from .resolve import Globals, ResolveNames
from .stack_index import ExpandStackIndex
from .static_assert import HoistStaticAsserts
from .struct_consts import InlineStructConstants
from .unique_names import UniqueNames

__all__ = ["CompileResult", "CompileState", "PIPELINE", "compile_source", "compile_file"]

_RECURSION_LIMIT = 6000
#: The largest P4 source accepted (p4c's largest v1model samples are ~100 kB; a 50 MB file
#: used to take minutes and gigabytes).  The preprocessor's output has its own bound
#: (netsum.p4c.preprocess.MAX_PREPROCESSED).
MAX_SOURCE_BYTES = 4 << 20


@dataclass(frozen=True)
class CompileResult:
    bmv2_json: dict[str, Any]
    p4info: p4info_pb2.P4Info
    warnings: tuple[Diagnostic, ...] = ()

    def json_text(self) -> str:
        return json.dumps(self.bmv2_json, indent=2) + "\n"

    def p4info_text(self) -> str:
        return p4info_text(self.p4info)


@dataclass
class CompileState:
    """What the passes hand to each other (each pass fills the fields it owns)."""

    text: str
    filename: str
    include_dirs: Sequence[str | Path]
    defines: Mapping[str, str | None] | None
    diags: Diagnostics = field(default_factory=Diagnostics)
    preprocessed: str = ""
    program: A.Program | None = None
    globals: Globals | None = None
    layout: Layout | None = None
    bmv2_json: dict[str, Any] = field(default_factory=dict)
    control_plane: ControlPlane | None = None
    p4info: p4info_pb2.P4Info | None = None


def _preprocess(s: CompileState) -> None:
    s.preprocessed = preprocess(s.text, s.filename, s.include_dirs, s.defines, s.diags) or ""


def _parse(s: CompileState) -> None:
    s.program = parse(tokenize(s.preprocessed, s.filename, s.diags), s.diags)


def _check_loops(s: CompileState) -> None:
    assert s.program is not None
    s.program = CheckLoops().run(s.program, s.diags)


def _generics(s: CompileState) -> None:
    assert s.program is not None
    s.program = SpecializeGenerics().run(s.program, s.diags)


def _static_asserts(s: CompileState) -> None:
    assert s.program is not None
    s.program = HoistStaticAsserts().run(s.program, s.diags)


def _package_constants(s: CompileState) -> None:
    assert s.program is not None
    s.program = BindPackageConstants().run(s.program, s.diags)


def _bound_calls(s: CompileState) -> None:
    assert s.program is not None
    s.program = BindActionListCalls().run(s.program, s.diags)


def _builtins(s: CompileState) -> None:
    assert s.program is not None
    s.program = CreateBuiltins().run(s.program, s.diags)


def _direct_calls(s: CompileState) -> None:
    assert s.program is not None
    s.program = InstantiateDirectCalls().run(s.program, s.diags)


def _unique_names(s: CompileState) -> None:
    assert s.program is not None
    s.program = UniqueNames().run(s.program, s.diags)


def _struct_consts(s: CompileState) -> None:
    assert s.program is not None
    s.program = InlineStructConstants().run(s.program, s.diags)


def _move_declarations(s: CompileState) -> None:
    assert s.program is not None
    s.program = MoveDeclarations().run(s.program, s.diags)


def _parser_ifs(s: CompileState) -> None:
    assert s.program is not None
    s.program = SplitParserIfs().run(s.program, s.diags)


def _inline_parsers(s: CompileState) -> None:
    assert s.program is not None
    s.program = InlineParsers().run(s.program, s.diags)


def _hoist_lookahead(s: CompileState) -> None:
    assert s.program is not None
    s.program = HoistLookahead().run(s.program, s.diags)


def _inline_functions(s: CompileState) -> None:
    assert s.program is not None
    s.program = InlineFunctions().run(s.program, s.diags)


def _dead_reads(s: CompileState) -> None:
    assert s.program is not None
    s.program = RemoveDeadReads().run(s.program, s.diags)


def _stack_index(s: CompileState) -> None:
    assert s.program is not None
    s.program = ExpandStackIndex().run(s.program, s.diags)


def _resolve(s: CompileState) -> None:
    assert s.program is not None
    s.globals = ResolveNames().run(s.program, s.diags)


def _layout(s: CompileState) -> None:
    assert s.globals is not None
    s.layout = BuildLayout().run(s.globals, s.diags)


def _generate(s: CompileState) -> None:
    # One pass, not two: the driver stops between passes, and the errors of the code the
    # generator drops must be reported with those of the code it emits.
    assert s.globals is not None and s.layout is not None
    s.bmv2_json, s.control_plane = GenerateJson().run(s.globals, s.layout, s.filename, s.diags)
    CheckDropped().run(s.globals, s.layout, s.bmv2_json, s.diags)


def _p4info(s: CompileState) -> None:
    assert s.control_plane is not None
    main = s.globals.instances.get("main") if s.globals is not None else None
    s.p4info = build_p4info(s.control_plane, s.diags, main)


#: (name, pass) in execution order; the driver stops after the first pass that reports errors.
PIPELINE: tuple[tuple[str, Callable[[CompileState], None]], ...] = (
    ("Preprocess", _preprocess),        # cpp: #include/#define, line markers kept for positions
    ("Parse", _parse),                  # lexer + recursive descent; recovers per declaration
    ("CheckLoops", _check_loops),       # for-in, loops in parser states, stray break/continue
    ("SpecializeGenerics", _generics),  # header h<T> {...}; h<bit<8>> -> h_bit8
    ("HoistStaticAsserts", _static_asserts),  # static_assert(...); checked as a constant
    ("BindPackageConstants", _package_constants),  # V1Switch(P(false), ...): P's constants
    ("BindActionListCalls", _bound_calls),  # actions = { a(f(x)); }: f(x) inside a
    ("CreateBuiltins", _builtins),      # implicit NoAction defaults, implicit reject
    ("InstantiateDirectCalls", _direct_calls),  # Ctl.apply(...) -> an instance of Ctl
    # From here on a name never depends on scope: every variable and local constant has a
    # program-wide unique name, declared once at the top of its parser or control (or of an
    # action outside any control).  Every later pass relies on it.
    ("UniqueNames", _unique_names),
    ("InlineStructConstants", _struct_consts),  # const S c = {...}: the list where used
    ("MoveDeclarations", _move_declarations),
    ("SplitParserIfs", _parser_ifs),  # an if in a parser state: a select on its condition
    ("InlineParsers", _inline_parsers),  # sub-parser applications become states
    ("HoistLookahead", _hoist_lookahead),  # lookaheads inside expressions read first
    ("InlineFunctions", _inline_functions),  # calls of functions with statements, in order
    ("RemoveDeadReads", _dead_reads),  # unused register reads; typedef'd instances unused
    ("ExpandStackIndex", _stack_index),  # hs[i] with a run-time i: one branch per element
    ("ResolveNames", _resolve),         # global symbols, types, folded constants
    ("BuildLayout", _layout),           # V1Switch blocks; header instances and scalars
    # Lowering is the type check (Typer, call binding, v1model placement), run once; then
    # the actions and tables it drops are checked too (CheckDropped).
    ("GenerateJson", _generate),        # inlining, synthesized tables, jumps, BMv2 document
    ("GenerateP4Info", _p4info),        # ids, aliases, the protobuf
)


def compile_source(text: str, filename: str = "<string>", include_dirs: Sequence[str | Path] = (),
                   defines: Mapping[str, str | None] | None = None) -> CompileResult:
    """Compile P4_16 source text; raises CompileError with every diagnostic found."""
    state = CompileState(text, filename, include_dirs, defines)
    if len(text) > MAX_SOURCE_BYTES:
        state.diags.error(NOPOS, f"{filename} is {len(text)} characters; netsum-p4c accepts "
                                 f"sources of at most {MAX_SOURCE_BYTES >> 20} MiB")
        state.diags.check()
    if filename != "<string>":
        state.diags.sources[filename] = text.splitlines()
    # Recursive descent and tree walks recurse with expression nesting: allow deep (but sane)
    # programs for the duration of this call, and report anything deeper as a diagnostic.
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, _RECURSION_LIMIT))
    try:
        for name, run in PIPELINE:
            try:
                run(state)
            except RecursionError:
                state.diags.error(NOPOS, f"program nested too deeply for the compiler ({name})")
            state.diags.check()
    finally:
        sys.setrecursionlimit(saved)
    assert state.p4info is not None
    return CompileResult(state.bmv2_json, state.p4info, tuple(state.diags.warnings))


def compile_file(path: str | Path, include_dirs: Sequence[str | Path] = (),
                 defines: Mapping[str, str | None] | None = None) -> CompileResult:
    p = Path(path)
    d = Diagnostics()
    try:
        size = p.stat().st_size
        if size > MAX_SOURCE_BYTES:      # checked before reading: the lexer holds it all
            d.error(NOPOS, f"{p} is {size} bytes; netsum-p4c accepts sources of at most "
                           f"{MAX_SOURCE_BYTES >> 20} MiB")
            raise CompileError(d.errors)
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        d.error(NOPOS, f"cannot read {p}: {exc}")
        raise CompileError(d.errors) from None
    return compile_source(text, str(path), include_dirs, defines)
