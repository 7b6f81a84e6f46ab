"""Which header fields a program refers to, found from its structure (the JSON's operands).

The switch does per-packet work only for standard_metadata fields the program uses: setting
`ingress_global_timestamp` / `egress_global_timestamp` costs a clock read per packet, so the
life cycle (netsum.switch.v1model, the native backend) writes them only when some part of the
program refers to one.  A field is referred to by:
- a `field` operand anywhere in actions (their loaded primitives), pipelines (conditions,
  action profile selectors), parsers, calculations, field lists and learn lists, and a
  checksum's condition;
- a checksum's target;
- a table key's `target`;
- a whole-header operand of a primitive that copies a header (`assign_header`, `copy_header`,
  and `assign` / parser `set` naming a header): every field of that header.
Other whole-header operands (`mark_to_drop(standard_metadata)`, `add_header`, validity tests)
read no field values.  Writes count as uses too (cheap and safe: an unused clock read costs
a little; a missed one would leave a timestamp at 0).

Runs before the init steps that validate the JSON sections (not the loaded objects), so
malformed JSON is skipped here (never an error): the init step that loads it reports it with
its path.
"""
from __future__ import annotations

from typing import Any

from netsum.switch.errors import ConfigError
from netsum.switch.layout import Layout
from netsum.switch.program import Action, Checksum, Control, Parser

__all__ = ["referenced_slots", "SECTIONS"]

#: The top-level JSON sections whose operands refer to fields (besides the loaded actions,
#: parser, controls and checksums).
SECTIONS = ("calculations", "field_lists", "learn_lists")
#: Primitives (and parser ops) whose header operands copy every field of the header.
_HEADER_COPIES = frozenset({"assign", "modify_field", "assign_header", "copy_header", "set"})


def referenced_slots(j: dict[str, Any], layout: Layout, checksums: tuple[Checksum, ...],
                     actions: tuple[Action, ...], parser: Parser,
                     controls: dict[str, Control]) -> set[int]:
    """Slots of `F` (field values) that program `j` with these (loaded) checksums, actions,
    parser and controls refers to."""
    out: set[int] = {c.target.index for c in checksums}
    stack: list[tuple[Any, bool]] = [(j.get(k), False) for k in SECTIONS]
    stack += [(list(a.primitives), False) for a in actions]
    stack += [([list(st.ops), list(st.transition_key)], False) for st in parser.states]
    for ctl in controls.values():
        stack += [(c.expression, False) for c in ctl.conditionals]
        stack += [(list(ctl.action_profiles), False)]       # selectors' input fields
        for t in ctl.tables:
            for kf in t.key:
                _add_field(out, layout, kf.target)
    stack += [(c.if_cond, False) for c in checksums]
    while stack:
        node, copying = stack.pop()
        if isinstance(node, list):
            stack += [(x, copying) for x in node]
            continue
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "field":
            _add_field(out, layout, node.get("value"))
        elif kind == "header" and copying:
            name = node.get("value")
            h = layout.headers.get(name) if isinstance(name, str) else None
            if h is not None:
                out.update(s.index for _, s in h.fields)
        if "match_type" in node and "target" in node:      # a table key element
            _add_field(out, layout, node.get("target"))
        op = node.get("op")
        inner = op in _HEADER_COPIES if isinstance(op, str) else copying
        stack += [(v, inner) for v in node.values() if isinstance(v, (dict, list))]
    return out


def _add_field(out: set[int], layout: Layout, ref: Any) -> None:
    try:
        out.add(layout.slot(ref, "").index)
    except ConfigError:
        pass            # not a field (a `valid` key names a header) or malformed: see above
