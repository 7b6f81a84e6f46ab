"""Packet-state layout: where every header field lives in the flat field list `F`.

A packet's state is one Python list: each field of each header instance (in JSON order) gets an
index, followed by a hidden `$valid$` slot per instance; header stacks and header union stacks
get a hidden "next index" slot.  Metadata instances are valid from the start.  A header with a
variable-length (varbit) field has one more hidden slot right after its fields holding the
field's current width in bits (0 until extracted, as bmv2 resets it per packet), so copying a
header's slot range copies the width too.  A field holds an int in its type's range:
`0 <= v < 2**w` for bit<w>, two's complement range for int<w>.  Copying a packet (clone,
multicast) is `F[:]`.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from netsum.switch.errors import ConfigError

#: Same cap as switch.expressions.MAX_WIDTH (kept here to avoid an import cycle).
MAX_FIELD_WIDTH = 4096

__all__ = ["MAX_FIELD_WIDTH", "FieldSlot", "HeaderInfo", "StackInfo", "UnionStackInfo", "Layout",
           "build_layout", "cfg_error", "loading", "loads"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
#: What a malformed JSON value of a shape no check anticipated raises inside an init step.
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError)


def cfg_error(path: str, what: str) -> ConfigError:
    return ConfigError(f"{path}: {what}")


@contextmanager
def loading(path: str) -> Iterator[None]:
    """Loads the object at JSON path `path`: an error its checks did not anticipate (a list
    where an object belongs, an unhashable name, ...) becomes a ConfigError naming `path`, so
    every load error names its object.  Nested uses name the innermost object: its ConfigError
    passes through the outer ones unchanged."""
    try:
        yield
    except _SHAPE_ERRORS as e:
        raise cfg_error(path, f"malformed ({type(e).__name__}: {e})") from None


def loads(arg: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: the function loads the object whose JSON path is its parameter `arg`
    (see `loading`)."""
    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with loading(str(sig.bind(*args, **kwargs).arguments[arg])):
                return fn(*args, **kwargs)
        return run
    return wrap


@dataclass(frozen=True, slots=True)
class FieldSlot:
    index: int
    width: int
    signed: bool

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(slots=True)
class HeaderInfo:
    name: str
    id: int
    type_name: str
    metadata: bool
    fields: list[tuple[str, FieldSlot]]      # in type order (incl. padding fields)
    valid: int                               # index of the $valid$ slot
    nbits: int                               # fixed fields only (a varbit field adds F[vl_len])
    #: Position in `fields` of the varbit field (-1: none); its slot's width is the maximum.
    varbit: int = -1
    vl_len: int = -1                         # slot of the varbit field's current width (bits)
    max_bytes: int = 0                       # p4c's `max_length` (0: no limit given)
    #: netsum.switch.lanes.VectorRange when a run of this header's fields lives in F as one array
    #: (set at load time by netsum.switch.lanes.plan_lanes; parser and deparser follow it)
    vector: Any = None

    @property
    def nbytes(self) -> int:
        return (self.nbits + 7) // 8

    @property
    def first(self) -> int:
        """First slot of the header's fields (its validity slot when it has no fields)."""
        return self.fields[0][1].index if self.fields else self.valid

    @property
    def span(self) -> int:
        """Number of consecutive slots from `first` holding the header's values."""
        return len(self.fields) + (1 if self.varbit >= 0 else 0)


@dataclass(slots=True)
class StackInfo:
    name: str
    id: int
    headers: list[str]
    next_slot: int


@dataclass(slots=True)
class UnionStackInfo:
    name: str
    id: int
    unions: list[str]                        # header union names, element order
    next_slot: int


@dataclass(slots=True)
class Layout:
    headers: dict[str, HeaderInfo] = field(default_factory=dict)
    header_by_id: dict[int, str] = field(default_factory=dict)
    stacks: dict[str, StackInfo] = field(default_factory=dict)
    unions: dict[str, list[str]] = field(default_factory=dict)
    union_stacks: dict[str, UnionStackInfo] = field(default_factory=dict)
    #: varbit field slot -> slot of its current width
    vl_len: dict[int, int] = field(default_factory=dict)
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    enums: dict[str, dict[str, int]] = field(default_factory=dict)
    field_lists: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    learn_lists: dict[int, tuple[int, ...]] = field(default_factory=dict)   # id -> field slots
    #: learn list id -> its name (a P4Info digest binds to the learn list of its name, as
    #: bmv2's PI layer binds them).
    learn_list_names: dict[int, str] = field(default_factory=dict)
    template: list[int] = field(default_factory=list)
    #: A hidden slot nothing reads: a write to a field of `stack.last` while the stack is
    #: empty (next index 0) lands here instead of in a real field.
    scratch: int = -1

    def slot(self, ref: Any, path: str) -> FieldSlot:
        """Resolve a JSON field reference [header, field] (or an alias) to its slot."""
        if isinstance(ref, str) and ref in self.aliases:
            ref = list(self.aliases[ref])
        if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)):
            raise cfg_error(path, f"bad field reference {ref!r}")
        hname, fname = ref
        h = self.headers.get(hname)
        if h is None:
            raise cfg_error(path, f"unknown header instance '{hname}'")
        if fname == "$valid$":
            return FieldSlot(h.valid, 1, False)
        for n, s in h.fields:
            if n == fname:
                return s
        raise cfg_error(path, f"header '{hname}' has no field '{fname}'")

    def stack_field(self, ref: Any, path: str) -> tuple[int, tuple[FieldSlot, ...]]:
        """Resolve a `stack_field` reference [stack, field] (a field of `stack.last`) to the
        stack's next-index slot and the field's slot in each element, in index order: the
        field read is element `F[next] - 1`, chosen per packet."""
        if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)):
            raise cfg_error(path, f"bad stack_field reference {ref!r}")
        st = self.stacks.get(ref[0])
        if st is None:
            raise cfg_error(path, f"unknown header stack '{ref[0]}'")
        if not st.headers:
            raise cfg_error(path, f"header stack '{ref[0]}' has no elements")
        if ref[1] == "$valid$":
            raise cfg_error(path, "stack_field '$valid$' is not supported")
        slots = tuple(self.slot([h, ref[1]], path) for h in st.headers)
        if len({(s.width, s.signed) for s in slots}) != 1:
            raise cfg_error(path, f"header stack '{ref[0]}': elements of different types")
        return st.next_slot, slots

    def mangled_last(self, ref: Any) -> list[str] | None:
        """p4c writes `us.last.m.f` (a field of a member of the last union of a union stack)
        as the field reference [us, "m.f"], which names no header (bmv2 refuses it); read as
        the union_stack_field [us, m, f] it stands for.  None for any other reference."""
        if not (isinstance(ref, list) and len(ref) == 2 and isinstance(ref[0], str)
                and ref[0] in self.union_stacks
                and isinstance(ref[1], str) and ref[1].count(".") == 1):
            return None
        member, fname = ref[1].split(".")
        return [ref[0], member, fname]

    def union_stack_field(self, ref: Any, path: str) -> tuple[int, tuple[FieldSlot, ...]]:
        """A `union_stack_field` [stack, member, field] (a field of member `member` of the
        last union of a union stack): as `stack_field`, over the unions' member headers."""
        if not (isinstance(ref, list) and len(ref) == 3 and all(isinstance(x, str)
                                                                  for x in ref)):
            raise cfg_error(path, f"bad union_stack_field reference {ref!r}")
        st = self.union_stacks.get(ref[0])
        if st is None or not st.unions:
            raise cfg_error(path, f"unknown or empty header union stack '{ref[0]}'")
        slots = tuple(self.slot([f"{u}.{ref[1]}", ref[2]], path) for u in st.unions)
        return st.next_slot, slots

    def dest_src(self, node: Any, path: str) -> tuple[str, int, bool]:
        """(index source text, width, signed) of a writable `field` or `stack_field` operand.
        A stack_field index is `(i0, .., iN-1, scratch)[F[next] - 1]`: next is always in
        0..N, so it picks element next-1, or the scratch slot when the stack is empty."""
        t = node.get("type") if isinstance(node, dict) else None
        if t == "field":
            s = self.slot(node["value"], path)
            return str(s.index), s.width, s.signed
        if t == "stack_field":
            nxt, slots = self.stack_field(node.get("value"), path)
            idx = "".join(f"{s.index}, " for s in slots)
            return f"({idx}{self.scratch})[F[{nxt}] - 1]", slots[0].width, slots[0].signed
        raise cfg_error(path, f"destination must be a field, got {node!r}")

    def header(self, name: Any, path: str) -> HeaderInfo:
        h = self.headers.get(name) if isinstance(name, str) else None
        if h is None:
            raise cfg_error(path, f"unknown header instance {name!r}")
        return h

    def find(self, hname: str, fname: str) -> FieldSlot | None:
        try:
            return self.slot([hname, fname], "")
        except ConfigError:
            return None

    def union_siblings(self, hname: str) -> list[int]:
        """Validity slots of the other members of the union `hname` belongs to: making one
        member valid makes the others invalid (P4_16 header unions)."""
        for members in self.unions.values():
            if hname in members:
                return [self.headers[m].valid for m in members if m != hname]
        return []

    def error_code(self, name: str) -> int:
        return self.errors.get(name, 0)


def _list(j: dict[str, Any], key: str) -> list[Any]:
    v = j.get(key, [])
    if v is None:
        return []
    if not isinstance(v, list):
        raise cfg_error(key, f"expected a list, got {type(v).__name__}")
    return v


def _named(obj: Any, path: str) -> str:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise cfg_error(path, "expected an object with a string 'name'")
    return obj["name"]


def build_layout(j: dict[str, Any]) -> Layout:
    """The layout of program `j`: the loader steps of `_LayoutBuilder`, in the order each
    step's names are defined before a later step refers to them."""
    b = _LayoutBuilder(j)
    b.header_types()
    b.headers()
    b.header_stacks()
    b.header_unions()
    b.header_union_stacks()
    b.errors()
    b.enums()
    b.field_lists()
    b.learn_lists()
    b.field_aliases()
    return b.finish()


class _LayoutBuilder:
    """bmv2's init_header_types .. init_field_aliases, one method each, filling one Layout;
    `index` is the next free slot of F (slots are handed out in the order of the steps)."""

    def __init__(self, j: dict[str, Any]) -> None:
        self.j = j
        self.lay = Layout()
        self.index = 0
        #: header type -> its fields (name, width, signed); width 0 marks the varbit field
        self.types: dict[str, list[tuple[str, int, bool]]] = {}
        #: varbit header type -> max_length (bytes, 0 = none)
        self.max_len: dict[str, int] = {}

    def _alloc(self) -> int:
        self.index += 1
        return self.index - 1

    def header_types(self) -> None:
        """Field lists of the header types; a varbit field gets width 0 here, its real width
        once the header's max_length is known."""
        for i, t in enumerate(_list(self.j, "header_types")):
            with loading(f"header_types[{i}]"):
                path = f"header_types[{i}]"
                name = _named(t, path)
                self.types[name] = [self._type_field(f"{path} ('{name}')", name, t, k, f)
                                    for k, f in enumerate(t.get("fields", []))]

    def _type_field(self, tpath: str, name: str, t: dict[str, Any], k: int,
                    f: Any) -> tuple[str, int, bool]:
        fp = f"{tpath}.fields[{k}]"
        if not (isinstance(f, list) and len(f) >= 2 and isinstance(f[0], str)):
            raise cfg_error(fp, f"bad field {f!r}")
        signed = bool(f[2]) if len(f) > 2 else False
        if f[1] == "*":
            if name in self.max_len:
                raise cfg_error(fp, f"field '{f[0]}': a header type can have only one "
                                    "variable-length field")
            if t.get("length_exp") is not None:
                raise cfg_error(tpath, "length_exp (P4_14 variable-length headers) is not "
                                       "supported; P4_16 gives the length to extract_VL")
            ml = t.get("max_length") or 0
            if type(ml) is not int or not 0 <= ml * 8 <= 2 * MAX_FIELD_WIDTH:
                raise cfg_error(tpath, f"bad max_length {ml!r}")
            self.max_len[name] = ml
            return f[0], 0, signed             # width 0 marks the varbit field
        if type(f[1]) is not int:
            raise cfg_error(fp, f"field '{f[0]}': bad width {f[1]!r}")
        if not 0 < f[1] <= MAX_FIELD_WIDTH:
            raise cfg_error(fp, f"field '{f[0]}': width {f[1]} outside 1..{MAX_FIELD_WIDTH}")
        return f[0], f[1], signed

    def headers(self) -> None:
        """Header instances: their field slots (and a varbit width slot) in JSON order, then
        one validity slot per instance."""
        lay = self.lay
        for i, h in enumerate(_list(self.j, "headers")):
            with loading(f"headers[{i}]"):
                path = f"headers[{i}]"
                name = _named(h, path)
                tname = h.get("header_type")
                if tname not in self.types:
                    raise cfg_error(f"{path} ('{name}')", f"unknown header_type {tname!r}")
                if name in lay.headers:
                    raise cfg_error(f"{path} ('{name}')", "duplicate header instance name")
                info = self._header(f"{path} ('{name}')", name, tname, h, i)
                lay.headers[name] = info
                lay.header_by_id[info.id] = name
        for info in lay.headers.values():
            info.valid = self._alloc()

    def _header(self, hpath: str, name: str, tname: str, h: dict[str, Any],
                i: int) -> HeaderInfo:
        fields = self.types[tname]
        nbits = sum(w for _, w, _ in fields)
        slots = []
        varbit = -1
        for k, (fname, w, signed) in enumerate(fields):
            if w == 0:           # varbit: as wide as the header's max_length leaves room for
                varbit = k
                ml = self.max_len[tname]
                w = ml * 8 - nbits if ml else MAX_FIELD_WIDTH
                if not 0 < w <= MAX_FIELD_WIDTH:
                    raise cfg_error(hpath, f"header type '{tname}': max_length {ml} leaves "
                                           f"{w} bits for field '{fname}'")
            slots.append((fname, FieldSlot(self._alloc(), w, signed)))
        info = HeaderInfo(name, int(h.get("id", i)), tname, bool(h.get("metadata", False)),
                          slots, -1, nbits)
        if varbit >= 0:
            info.varbit, info.max_bytes = varbit, self.max_len[tname]
            info.vl_len = self._alloc()
            self.lay.vl_len[slots[varbit][1].index] = info.vl_len
        return info

    def _header_names(self, path: str, name: str, ids: Any) -> list[str]:
        out = []
        for hid in ids:
            if hid not in self.lay.header_by_id:
                raise cfg_error(f"{path} ('{name}')", f"unknown header id {hid}")
            out.append(self.lay.header_by_id[hid])
        return out

    def header_stacks(self) -> None:
        """Header stacks: their element headers and a next-index slot each."""
        for i, s in enumerate(_list(self.j, "header_stacks")):
            with loading(f"header_stacks[{i}]"):
                path = f"header_stacks[{i}]"
                name = _named(s, path)
                names = self._header_names(path, name, s.get("header_ids", []))
                self.lay.stacks[name] = StackInfo(name, int(s.get("id", i)), names,
                                                  self._alloc())

    def header_unions(self) -> None:
        """Header unions: their member headers (no slots of their own)."""
        for i, u in enumerate(_list(self.j, "header_unions")):
            with loading(f"header_unions[{i}]"):
                path = f"header_unions[{i}]"
                name = _named(u, path)
                self.lay.unions[name] = self._header_names(path, name, u.get("header_ids", []))

    def header_union_stacks(self) -> None:
        """Stacks of header unions (all of one union type): a next-index slot each."""
        lay = self.lay
        with loading("header_unions"):
            union_by_id = {int(u.get("id", k)): _named(u, f"header_unions[{k}]")
                           for k, u in enumerate(_list(self.j, "header_unions"))}
        for i, s in enumerate(_list(self.j, "header_union_stacks")):
            with loading(f"header_union_stacks[{i}]"):
                path = f"header_union_stacks[{i}]"
                name = _named(s, path)
                unions = []
                for uid in s.get("header_union_ids", []):
                    if uid not in union_by_id:
                        raise cfg_error(f"{path} ('{name}')", f"unknown header union id {uid}")
                    unions.append(union_by_id[uid])
                if len({len(lay.unions[u]) for u in unions}) > 1:
                    raise cfg_error(f"{path} ('{name}')", "elements of different union types")
                lay.union_stacks[name] = UnionStackInfo(name, int(s.get("id", i)), unions,
                                                        self._alloc())

    def errors(self) -> None:
        """Parser error names -> codes."""
        for i, e in enumerate(_list(self.j, "errors")):
            with loading(f"errors[{i}]"):
                if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
                        and isinstance(e[1], int)):
                    raise cfg_error(f"errors[{i}]", f"bad error entry {e!r}")
                self.lay.errors[e[0]] = e[1]

    def enums(self) -> None:
        """Serializable enums: member names -> values."""
        for i, en in enumerate(_list(self.j, "enums")):
            with loading(f"enums[{i}]"):
                name = _named(en, f"enums[{i}]")
                self.lay.enums[name] = {m[0]: m[1] for m in en.get("entries", [])}

    def field_lists(self) -> None:
        """Field lists (clone/resubmit/recirculate preserved fields, old hash inputs): their
        field references, each resolved to check it."""
        for i, fl in enumerate(_list(self.j, "field_lists")):
            with loading(f"field_lists[{i}]"):
                path = f"field_lists[{i}]"
                _named(fl, path)
                refs = []
                for k, el in enumerate(fl.get("elements", [])):
                    if isinstance(el, dict) and el.get("type") == "field":
                        self.lay.slot(el.get("value"), f"{path}.elements[{k}]")
                        refs.append(tuple(el["value"]))
                self.lay.field_lists[int(fl.get("id", i))] = refs

    def learn_lists(self) -> None:
        """Learn lists (digest contents: field values read at the end of ingress)."""
        for i, ll in enumerate(_list(self.j, "learn_lists")):
            with loading(f"learn_lists[{i}]"):
                path = f"learn_lists[{i}]"
                name = _named(ll, path)
                lid = ll.get("id")
                if type(lid) is not int or lid <= 0:
                    raise cfg_error(f"{path} ('{name}')", f"bad id {lid!r}")
                els = ll.get("elements") or []
                if not isinstance(els, list):
                    raise cfg_error(f"{path} ('{name}')", "elements must be a list")
                idxs: list[int] = []
                for k, el in enumerate(els):
                    ep = f"{path} ('{name}').elements[{k}]"
                    if not (isinstance(el, dict) and el.get("type") == "field"):
                        raise cfg_error(ep, f"learn list element {el!r} is not a field")
                    idxs.append(self.lay.slot(el.get("value"), ep).index)
                self.lay.learn_lists[lid] = tuple(idxs)
                self.lay.learn_list_names[lid] = name

    def field_aliases(self) -> None:
        """Field aliases (`queueing_metadata.enq_timestamp` -> a real field)."""
        for i, a in enumerate(_list(self.j, "field_aliases")):
            with loading(f"field_aliases[{i}]"):
                if not (isinstance(a, list) and len(a) == 2 and isinstance(a[0], str)):
                    raise cfg_error(f"field_aliases[{i}]", f"bad alias {a!r}")
                self.lay.slot(a[1], f"field_aliases[{i}] ('{a[0]}')")
                self.lay.aliases[a[0]] = (a[1][0], a[1][1])

    def finish(self) -> Layout:
        """The scratch slot last, then the template a packet's F starts as: 0 everywhere
        but the validity slots of metadata instances (valid from the start)."""
        lay = self.lay
        lay.scratch = self._alloc()
        lay.template = [0] * self.index
        for info in lay.headers.values():
            if info.metadata:
                lay.template[info.valid] = 1
        return lay
