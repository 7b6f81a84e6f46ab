"""Reading a topology document (YAML or JSON) from a file nobody vouches for, within fixed
bounds: its size, its nesting, and for YAML its aliases and what they expand to.

A YAML alias repeats a node without repeating its text, so nine nested aliases of nine items
make a 1 KB file that names 9^9 values ("billion laughs").  PyYAML builds such a document with
shared references, cheaply; whatever walks it afterwards -- the validator, an error message's
repr -- does not.  So the YAML event stream is checked first, before any node is built, and
the document is refused when it has more than MAX_ALIASES aliases, would expand to more than
MAX_NODES nodes, nests deeper than MAX_DEPTH, or refers to a node from inside itself.  JSON has
no aliases; it is held to the same depth and size.  Every refusal is one line, raised as
DocumentError; the caller adds the file's name.
"""
from __future__ import annotations

import json
import reprlib
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DocumentError", "MAX_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_NODES", "read_text",
           "load_document", "show"]

#: A topology of 4096 hosts and 255 jobs of 32 workers is about 600 KB written out.
MAX_BYTES = 1 << 20
#: The schema nests 5 levels (document, switches, a switch, its service, a value).
MAX_DEPTH = 32
#: Anchors are for repeating a block or a worker list here and there, not for generating data.
MAX_ALIASES = 100
#: Every scalar and collection, aliases expanded: what the validator may have to walk.
MAX_NODES = 250_000

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 4
_short.maxlevel = 2


class DocumentError(ValueError):
    """A document refused before or while parsing; str() is one line."""


def show(v: Any) -> str:
    """repr() bounded in length and in work, for error messages about values from a file."""
    return _short.repr(v)


def read_text(path: str | Path) -> str:
    """The file's text, refused beyond MAX_BYTES without reading further (so /dev/zero or a
    huge file costs MAX_BYTES at most).  OSError passes through."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise DocumentError(f"larger than the {MAX_BYTES >> 20} MiB a topology file may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 text (byte {exc.start})") from None


def load_document(text: str) -> Any:
    """The document's value: JSON when it starts with `{`, otherwise YAML (safe tags only)."""
    if len(text) > MAX_BYTES:
        raise DocumentError(f"larger than the {MAX_BYTES >> 20} MiB a topology file may have")
    if text.lstrip().startswith("{"):
        return _load_json(text)
    _check_yaml_events(text)
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML/JSON: {_first_line(exc)}") from None
    except (ValueError, RecursionError) as exc:   # e.g. an integer of 5000 digits
        raise DocumentError(f"not valid YAML: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if "integer string conversion" in text:
        return "a number has more digits than the 4300 Python reads"
    return text if len(text) <= 200 else text[:200] + "..."


def _refuse_constant(name: str) -> Any:
    raise DocumentError(f"{name} is not a number a topology can hold")


def _load_json(text: str) -> Any:
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid YAML/JSON: {_first_line(exc)}") from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:                      # an integer of 5000 digits
        if isinstance(exc, DocumentError):
            raise
        raise DocumentError(f"not valid JSON: {_first_line(exc)}") from None
    # Iterative walk (JSON values are trees: no sharing, so this is their real size).
    nodes = 0
    todo: list[tuple[Any, int]] = [(doc, 1)]
    while todo:
        v, depth = todo.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise DocumentError(f"more than {MAX_NODES} values")
        if isinstance(v, (dict, list)):
            if depth > MAX_DEPTH:
                raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
            todo.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return doc


def _check_yaml_events(text: str) -> None:
    """Walk the parser's events (flat: no recursion, nothing built) and count what the
    document would expand to.  An anchor's (nodes, height) is known when its node ends; an
    alias adds them where it stands."""
    anchors: dict[str, tuple[int, int]] = {}
    stack: list[list[Any]] = []          # open collections: [anchor, nodes, height]
    aliases = 0

    def add(nodes: int, height: int) -> None:
        if not stack:
            return
        top = stack[-1]
        top[1] += nodes
        top[2] = max(top[2], height + 1)
        if top[1] > MAX_NODES:
            raise DocumentError(f"expands to more than {MAX_NODES} values (YAML aliases "
                                "repeat nodes; a topology needs no more than it writes out)")
        if len(stack) - 1 + top[2] > MAX_DEPTH:
            raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")

    try:
        for ev in yaml.parse(text, Loader=_Loader):
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
                stack.append([ev.anchor, 1, 1])
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, nodes, height = stack.pop()
                if anchor is not None:
                    anchors[anchor] = (nodes, height)
                add(nodes, height)
            elif isinstance(ev, yaml.ScalarEvent):
                if ev.anchor is not None:
                    anchors[ev.anchor] = (1, 0)
                add(1, 0)
            elif isinstance(ev, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise DocumentError(f"more than {MAX_ALIASES} YAML aliases")
                if any(open_[0] == ev.anchor for open_ in stack):
                    raise DocumentError(f"alias *{ev.anchor} refers to a node that contains "
                                        "it (a recursive document)")
                # An undefined alias is the composer's error to report, with its position.
                add(*anchors.get(str(ev.anchor), (1, 0)))
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML/JSON: {_first_line(exc)}") from None
