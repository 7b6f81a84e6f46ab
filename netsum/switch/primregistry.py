"""The primitive registry: what an action primitive's emitter gets, and the one table of emitters.

An emitter turns one BMv2 primitive call (its JSON parameters) into source lines for the body of
a generated function `f(F, P, pkt)`.  Emitter modules (netsum.switch.primitives for the scalar,
extern and packet primitives; netsum.switch.headerops for whole headers, unions and stacks)
register into this module with `@primitive(name, ...)`; the code generators (netsum.switch.actions,
netsum.switch.parser) look names up with `emitter`.  This module imports no emitter module, and
the emitter modules import only this one to register, so none of them imports another.

Also here: the context an emitter is handed (`PrimCtx`) and what it holds -- the generated code's
global `Namespace`, the slots of standard_metadata (`StdFields`) and writable operands (`Dest`).
Names such as `R3`, `C1p`, `H0` in emitted code refer to objects put in the namespace with
`Namespace.ref`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from netsum.switch.expressions import Expr, ExprCompiler, unwrap
from netsum.switch.layout import Layout, cfg_error

__all__ = ["Namespace", "StdFields", "Dest", "PrimCtx", "Emitter", "primitive", "register",
           "emitter", "required",
           "primitive_names"]


@dataclass(slots=True)
class Namespace:
    """Globals of the generated code of one pipeline."""
    names: dict[str, Any] = field(default_factory=dict)
    _ids: dict[int, str] = field(default_factory=dict)

    def ref(self, obj: Any, hint: str) -> str:
        key = id(obj)
        if key in self._ids:
            return self._ids[key]
        name = f"{hint}{len(self.names)}"
        self.names[name] = obj
        self._ids[key] = name
        return name

    def fresh(self, hint: str) -> str:
        """A new unique global name, bound to None until the caller assigns it."""
        name = f"{hint}{len(self.names)}"
        self.names[name] = None
        return name


@dataclass(frozen=True, slots=True)
class StdFields:
    """Slots of the standard_metadata fields the life cycle uses (None when absent)."""
    ingress_port: int
    egress_spec: int
    egress_port: int
    instance_type: int
    packet_length: int
    mcast_grp: int | None
    egress_rid: int | None
    checksum_error: int | None
    parser_error: int | None
    ingress_global_timestamp: int | None
    egress_global_timestamp: int | None
    # Queueing metadata (netsum/switch/queues.py); also found under the `queueing_metadata.*` aliases.
    enq_timestamp: int | None = None
    enq_qdepth: int | None = None
    deq_timedelta: int | None = None
    deq_qdepth: int | None = None


@dataclass(frozen=True, slots=True)
class Dest:
    """A writable operand: `F[index]` where index is source text (a constant slot, or a
    per-packet choice for a field of `stack.last`)."""
    index: str
    width: int
    signed: bool


@dataclass(slots=True)
class PrimCtx:
    layout: Layout
    comp: ExprCompiler
    ns: Namespace
    std: StdFields
    registers: dict[str, Any]
    counters: dict[str, Any]
    meters: dict[str, Any]
    calculations: dict[str, Any]
    path: str

    def expr(self, node: Any) -> Expr:
        return self.comp.compile(node)

    def dest(self, node: Any) -> Dest:
        return Dest(*self.comp.dest(node))

    def vl_field(self, node: Any) -> tuple[int, int]:
        """(value slot, width slot) of a variable-length field operand."""
        n = unwrap(node)
        s = self.layout.slot(n.get("value"), self.path) if isinstance(n, dict) and \
            n.get("type") == "field" else None
        if s is None or s.index not in self.layout.vl_len:
            raise cfg_error(self.path, f"expected a variable-length field, got {node!r}")
        return s.index, self.layout.vl_len[s.index]

    def named(self, node: Any, kind: str, table: dict[str, Any]) -> Any:
        n = unwrap(node)
        name = n.get("value") if isinstance(n, dict) else None
        obj = table.get(name) if name is not None else None
        if obj is None:
            raise cfg_error(self.path, f"unknown {kind} {name!r}")
        return obj


Emitter = Callable[[PrimCtx, list[Any]], list[str]]
_EMITTERS: dict[str, Emitter] = {}


def register(name: str, fn: Emitter) -> None:
    """Make `fn` the emitter of primitive `name`; a second emitter for one name is a bug."""
    if name in _EMITTERS:
        raise RuntimeError(f"primitive {name!r} registered twice")
    _EMITTERS[name] = fn


def primitive(*names: str) -> Callable[[Emitter], Emitter]:
    """Decorator: the function is the emitter of the primitives `names`."""
    def reg(fn: Emitter) -> Emitter:
        for n in names:
            register(n, fn)
        return fn
    return reg


def emitter(name: str) -> Emitter | None:
    """The emitter of primitive `name`, None when no module registered one."""
    return _EMITTERS.get(name)


def required(name: str) -> Emitter:
    """The emitter of primitive `name`, which an emitter module this code imports registers
    (its absence is a bug in netsum, not in the program loaded)."""
    fn = _EMITTERS.get(name)
    if fn is None:
        raise RuntimeError(f"primitive {name!r} has no emitter: its module was not imported")
    return fn


def primitive_names() -> frozenset[str]:
    """Every registered primitive name."""
    return frozenset(_EMITTERS)
