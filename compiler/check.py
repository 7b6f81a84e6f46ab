"""CheckTypes: type-check every block before any code is generated.

Walks parsers, actions, tables and apply blocks with the same Typer and lowering rules the
generator uses, but into throw-away output, so that all type errors and v1model placement
errors of the program are reported in one run before GenerateJson starts.
"""
from __future__ import annotations

from .diagnostics import Diagnostics
from .layout import Layout
from .resolve import Globals

__all__ = ["CheckTypes"]


class CheckTypes:
    def run(self, g: Globals, lay: Layout, diags: Diagnostics) -> None:
        # Imported here: the generator depends on this module's pass order, not vice versa.
        from .bmv2_json import GenerateJson
        import copy
        # A dry run on a copy of the layout: allocations made while checking must not leak
        # into the real scalars header.
        GenerateJson().run(g, copy.deepcopy(lay), "<check>", diags)
