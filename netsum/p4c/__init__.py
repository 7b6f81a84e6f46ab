"""netsum's P4_16 compiler for v1model: P4 source → BMv2 JSON (format 2.23) + P4Info.

Public API (docs/architecture.md): compile_file, compile_source, CompileResult, CompileError.
"""
from .diagnostics import CompileError, Diagnostic
from .driver import CompileResult, compile_file, compile_source

__all__ = ["compile_file", "compile_source", "CompileResult", "CompileError", "Diagnostic"]
