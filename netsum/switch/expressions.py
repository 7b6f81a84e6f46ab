"""BMv2 JSON expressions -> Python source text over the field list `F`.

bmv2 evaluates with unbounded integers and truncates only on writes (JSON_format.md), which is
exactly Python's int semantics; p4c already inserts the `& mask` / `two_comp_mod` it needs.  Each
compiled expression also carries an upper bound on its bit width (None when it may be negative or
unbounded) so that writes can skip a redundant mask.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netsum.switch.layout import FieldSlot, Layout, cfg_error

__all__ = ["Expr", "ExprCompiler", "HeaderRef", "unwrap", "parse_hexstr", "write_src",
           "MAX_WIDTH"]

Expr = tuple[str, int | None]      # (python source, max bits if known non-negative)


@dataclass(frozen=True, slots=True)
class HeaderRef:
    """A header (or header union) operand.  `names` lists the candidates in element order;
    `choice` is None for a named object (one candidate), else (condition, temp): the condition
    binds the per-packet index to `temp` and is true when it lies inside the stack."""
    choice: tuple[str, str] | None
    names: tuple[str, ...]

#: Largest width accepted anywhere (fields, registers, casts).  Caps memory per value, and lets
#: a shift by a packet-controlled amount be cut short: any shift of at least MAX_SHIFT bits
#: leaves nothing inside a destination of at most MAX_WIDTH bits.
MAX_WIDTH = 4096
MAX_SHIFT = 2 * MAX_WIDTH

_ARITH = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|", "^": "^"}
_CMP = {"==": "==", "!=": "!=", ">": ">", "<": "<", ">=": ">=", "<=": "<="}


def unwrap(node: Any) -> Any:
    """Strip p4c's single or double `{"type":"expression","value":...}` wrapping."""
    while isinstance(node, dict) and node.get("type") == "expression" and \
            isinstance(node.get("value"), dict):
        node = node["value"]
    return node


def parse_hexstr(v: Any, path: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if not isinstance(v, str):
        raise cfg_error(path, f"bad hexstr {v!r}")
    try:
        return int(v, 16)
    except ValueError:
        raise cfg_error(path, f"bad hexstr {v!r}") from None


class ExprCompiler:
    """Compiles expressions of one action / parser state / conditional.

    `params` gives runtime_data widths (for `local` operands); `lookahead` (parser only) turns a
    `lookahead` operand into source text."""

    def __init__(self, layout: Layout, path: str, params: tuple[int, ...] = (),
                 lookahead: Callable[[int, int], str] | None = None) -> None:
        self.layout = layout
        self.path = path
        self.params = params
        self.lookahead = lookahead
        self._tmp = 0

    def temp(self, hint: str) -> str:
        """A fresh local name for an assignment expression (never shared by nested nodes)."""
        self._tmp += 1
        return f"_{hint}{self._tmp}"

    def compile(self, node: Any) -> Expr:
        n = unwrap(node)
        if not isinstance(n, dict):
            raise cfg_error(self.path, f"bad expression {node!r}")
        if "op" in n:
            return self._op(n)
        t = n.get("type")
        v = n.get("value")
        if t == "field" and (last := self.layout.mangled_last(v)):
            return self.stack_field(last, True)
        if t == "field" and isinstance(v, list) and len(v) == 2 and isinstance(v[0], dict):
            return self._field_of_ref(v[0], v[1])
        if t == "field":
            s = self.layout.slot(v, self.path)
            return f"F[{s.index}]", (None if s.signed else s.width)
        if t in ("stack_field", "union_stack_field"):
            return self.stack_field(v, t == "union_stack_field")
        if t == "hexstr":
            c = parse_hexstr(v, self.path)
            return repr(c), (c.bit_length() if c >= 0 else None)
        if t == "bool":
            return ("True" if v else "False"), 1
        if t in ("local", "runtime_data"):
            if not isinstance(v, int) or not 0 <= v < len(self.params):
                raise cfg_error(self.path, f"runtime_data index {v!r} out of range")
            return f"P[{v}]", self.params[v]
        if t == "header":
            h = self.layout.header(v, self.path)
            return f"F[{h.valid}]", 1
        if t == "lookahead" and self.lookahead is not None:
            if not (isinstance(v, list) and len(v) == 2):
                raise cfg_error(self.path, f"bad lookahead {v!r}")
            return self.lookahead(v[0], v[1]), v[1]
        if t == "string":
            return repr(str(v)), None
        raise cfg_error(self.path, f"expression operand of type {t!r} is not supported")

    def stack_field(self, ref: Any, of_unions: bool = False) -> Expr:
        """A field of `stack.last` (of a union stack: of a member of the last union), i.e.
        element `next - 1`.  With `next == 0` (nothing extracted or pushed) there is no last
        element: bmv2 asserts; we read 0.  Parsers check this first and raise
        StackOutOfBounds as P4_16 requires (netsum/switch/parser.py)."""
        nxt, slots = self.layout.union_stack_field(ref, self.path) if of_unions else \
            self.layout.stack_field(ref, self.path)
        t = self.temp("n")
        idx = "(" + "".join(f"{s.index}, " for s in slots) + ")"
        signed = any(s.signed for s in slots)
        return (f"(F[{idx}[{t} - 1]] if ({t} := F[{nxt}]) else 0)",
                None if signed else slots[0].width)

    def cond(self, node: Any) -> str:
        return self.compile(node)[0]

    # -- references chosen per packet (run-time stack indices, union stacks) ---------------
    def _index(self, node: Any, size: int) -> tuple[str, str]:
        """(condition, temp): the condition binds a fresh temp to the index value and is true
        when 0 <= index < size."""
        src, bits = self.compile(node)
        t = self.temp("x")
        low = "" if bits is not None else "0 <= "
        return f"{low}({t} := {src}) < {size}", t

    def header_ref(self, node: Any) -> HeaderRef:
        """A header operand: a named header, `hs[i]` (`dereference_header_stack`) or the k-th
        member of a union (`access_union_header`, the union itself maybe `us[i]`)."""
        n = unwrap(node)
        if not isinstance(n, dict):
            raise cfg_error(self.path, f"bad header operand {node!r}")
        if n.get("type") == "header":
            return HeaderRef(None, (self.layout.header(n.get("value"), self.path).name,))
        op = n.get("op")
        if op == "dereference_header_stack":
            st = self._named_stack(n.get("left"), "header_stack", self.layout.stacks)
            return HeaderRef(self._index(n.get("right"), len(st.headers)), tuple(st.headers))
        if op == "access_union_header":
            u = self.union_ref(n.get("left"))
            k = n.get("right")
            members = [self.layout.unions[name] for name in u.names]
            if type(k) is not int or not all(0 <= k < len(m) for m in members):
                raise cfg_error(self.path, f"access_union_header: bad member offset {k!r}")
            return HeaderRef(u.choice, tuple(m[k] for m in members))
        raise cfg_error(self.path, f"expected a header operand, got {node!r}")

    def union_ref(self, node: Any) -> HeaderRef:
        """A header union operand: a named union or `us[i]` (`dereference_union_stack`)."""
        n = unwrap(node)
        if isinstance(n, dict) and n.get("type") == "header_union":
            name = n.get("value")
            if not isinstance(name, str) or name not in self.layout.unions:
                raise cfg_error(self.path, f"unknown header union {name!r}")
            return HeaderRef(None, (name,))
        if isinstance(n, dict) and n.get("op") == "dereference_union_stack":
            st = self._named_stack(n.get("left"), "header_union_stack",
                                   self.layout.union_stacks)
            return HeaderRef(self._index(n.get("right"), len(st.unions)), tuple(st.unions))
        raise cfg_error(self.path, f"expected a header union operand, got {node!r}")

    def _named_stack(self, node: Any, kind: str, table: dict[str, Any]) -> Any:
        n = unwrap(node)
        name = n.get("value") if isinstance(n, dict) and n.get("type") == kind else None
        st = table.get(name) if isinstance(name, str) else None
        if st is None:
            raise cfg_error(self.path, f"expected a {kind}, got {node!r}")
        if not (getattr(st, "headers", None) or getattr(st, "unions", None)):
            raise cfg_error(self.path, f"{kind} '{name}' has no elements")
        return st

    def access_field(self, n: dict[str, Any]) -> tuple[HeaderRef, tuple[FieldSlot, ...]]:
        """`access_field`: field number `right` (in header type order) of header `left`."""
        ref = self.header_ref(n.get("left"))
        k = n.get("right")
        heads = [self.layout.headers[h] for h in ref.names]
        if type(k) is not int or not all(0 <= k < len(h.fields) for h in heads):
            raise cfg_error(self.path, f"access_field: bad field offset {k!r}")
        slots = tuple(h.fields[k][1] for h in heads)
        if len({(s.width, s.signed) for s in slots}) != 1:
            raise cfg_error(self.path, "access_field over headers of different types")
        return ref, slots

    def dest(self, node: Any) -> tuple[str, int, bool]:
        """(index source text, width, signed) of a writable operand: a field, a field of
        `stack.last`, or a field of a header chosen per packet (a write to an element outside
        the stack goes to the scratch slot, i.e. is discarded: P4_16 leaves it undefined)."""
        n = unwrap(node)
        if isinstance(n, dict) and n.get("op") == "access_field":
            ref, slots = self.access_field(n)
            if ref.choice is None:
                return str(slots[0].index), slots[0].width, slots[0].signed
            cond, t = ref.choice
            idx = "".join(f"{s.index}, " for s in slots)
            return (f"(({idx})[{t}] if {cond} else {self.layout.scratch})", slots[0].width,
                    slots[0].signed)
        return self.layout.dest_src(n, self.path)

    def _field_of_ref(self, header: Any, fname: Any) -> Expr:
        """p4c writes `hs[i].isValid()` (after its midend turns it into the hidden field) as
        the field reference [<dereference_header_stack>, "$valid$"], which bmv2 cannot load:
        a field, by name, of a header chosen per packet."""
        ref = self.header_ref(header)
        heads = [self.layout.headers[h] for h in ref.names]
        if fname == "$valid$":
            return self._pick(ref, [h.valid for h in heads]), 1
        slots = [self.layout.slot([h.name, fname], self.path) for h in heads]
        if len({(s.width, s.signed) for s in slots}) != 1:
            raise cfg_error(self.path, f"field {fname!r} of headers of different types")
        return (self._pick(ref, [s.index for s in slots]),
                None if slots[0].signed else slots[0].width)

    def _pick(self, ref: HeaderRef, slots: list[int] | tuple[int, ...]) -> str:
        """Read F at one of `slots` (one per choice of `ref`); 0 outside the stack."""
        if ref.choice is None:
            return f"F[{slots[0]}]"
        cond, t = ref.choice
        return f"(F[({''.join(f'{s}, ' for s in slots)})[{t}]] if {cond} else 0)"

    def _width(self, node: Any) -> int:
        n = unwrap(node)
        w = parse_hexstr(n.get("value"), self.path) if isinstance(n, dict) and \
            n.get("type") == "hexstr" else None
        if w is None or not 0 < w <= MAX_WIDTH:
            raise cfg_error(self.path, f"bad width operand {node!r}")
        return w

    def _op(self, n: dict[str, Any]) -> Expr:
        op = n["op"]
        left, right = n.get("left"), n.get("right")
        if op == "-" and left is None:       # unary minus (older p4c)
            a, _ = self.compile(right)
            return f"(-{a})", None
        if op in _ARITH:
            a, ab = self.compile(left)
            b, bb = self.compile(right)
            bits: int | None = None
            if ab is not None and bb is not None:
                if op == "&":
                    bits = min(ab, bb)
                elif op in ("|", "^"):
                    bits = max(ab, bb)
                elif op == "+":
                    bits = max(ab, bb) + 1
                elif op == "*":
                    bits = ab + bb
                elif op == ">>":
                    bits = ab
            elif op == "&" and (ab is not None or bb is not None):
                # x & m with m >= 0 lies in 0..m even when x is negative (two's complement)
                bits = min(x for x in (ab, bb) if x is not None)
            if op == "<<" and not b.isdigit():
                t = self.temp("s")
                return f"(({a}) << {t} if ({t} := {b}) < {MAX_SHIFT} else 0)", bits
            if op == "<<" and int(b) >= MAX_SHIFT:
                return "0", 0
            return f"({a} {_ARITH[op]} {b})", bits
        if op in ("/", "%"):
            a, ab = self.compile(left)
            b, _ = self.compile(right)
            py = "//" if op == "/" else "%"
            # Division by zero is undefined in P4; bmv2 would abort.  We yield 0 instead.
            t = self.temp("d")
            return f"(({a}) {py} {t} if ({t} := {b}) else 0)", ab
        if op in _CMP:
            a, _ = self.compile(left)
            b, _ = self.compile(right)
            return f"({a} {_CMP[op]} {b})", 1
        if op == "and":
            return f"({self.cond(left)} and {self.cond(right)})", 1
        if op == "or":
            return f"({self.cond(left)} or {self.cond(right)})", 1
        if op == "not":
            return f"(not {self.cond(right)})", 1
        if op == "~":
            a, _ = self.compile(right)
            return f"(~{a})", None
        if op == "d2b":
            a, ab = self.compile(right)
            return (a, 1) if ab == 1 else (f"({a} != 0)", 1)
        if op == "b2d":
            a, _ = self.compile(right)
            return f"(1 if {a} else 0)", 1
        if op == "?":
            c = self.cond(n.get("cond"))
            a, ab = self.compile(left)
            b, bb = self.compile(right)
            bits = max(ab, bb) if ab is not None and bb is not None else None
            return f"({a} if {c} else {b})", bits
        if op == "two_comp_mod":
            a, _ = self.compile(left)
            width = self._width(right)
            half = 1 << (width - 1)
            return f"((({a}) + {half} & {(1 << width) - 1}) - {half})", None
        if op == "usat_cast":
            a, _ = self.compile(left)
            width = self._width(right)
            top = (1 << width) - 1
            return f"min(max({a}, 0), {top})", width
        if op == "sat_cast":
            a, _ = self.compile(left)
            width = self._width(right)
            hi = (1 << (width - 1)) - 1
            return f"min(max({a}, {-hi - 1}), {hi})", None
        if op == "valid":
            ref = self.header_ref(right)
            return self._pick(ref, [self.layout.headers[h].valid for h in ref.names]), 1
        if op == "valid_union":
            ref = self.union_ref(right)
            if ref.choice is None:
                members = self.layout.unions[ref.names[0]]
                vs = " or ".join(f"F[{self.layout.headers[m].valid}]" for m in members)
                return f"(1 if ({vs or 'False'}) else 0)", 1
            # A union is valid when one member is; each union gets its validity sum.
            cond, t = ref.choice
            sums = ", ".join("(" + " + ".join(f"F[{self.layout.headers[m].valid}]" for m in
                                              self.layout.unions[u]) + ")"
                             for u in ref.names)
            return f"((1 if ({sums},)[{t}] else 0) if {cond} else 0)", 1
        if op == "access_field":
            ref, slots = self.access_field(n)
            signed = slots[0].signed
            return self._pick(ref, [s.index for s in slots]), None if signed else slots[0].width
        if op in ("last_stack_index", "size_stack"):
            r = unwrap(right)
            if isinstance(r, dict) and r.get("type") == "header_union_stack":
                st = self._named_stack(r, "header_union_stack", self.layout.union_stacks)
                size = len(st.unions)
            else:
                st = self._named_stack(r, "header_stack", self.layout.stacks)
                size = len(st.headers)
            if op == "size_stack":
                return f"F[{st.next_slot}]", size.bit_length()
            # bmv2: the count minus one; -1 for an empty stack (P4 leaves it undefined).
            return f"(F[{st.next_slot}] - 1)", None
        raise cfg_error(self.path, f"expression op {op!r} is not supported")


def write_src(dst_index: int | str, width: int, signed: bool, src: Expr) -> str:
    """Statement storing `src` into a field slot, truncating only when needed."""
    code, bits = src
    if signed:
        half = 1 << (width - 1)
        return f"F[{dst_index}] = (({code}) + {half} & {(1 << width) - 1}) - {half}"
    if bits is not None and bits <= width:
        return f"F[{dst_index}] = {code}"
    return f"F[{dst_index}] = {code} & {(1 << width) - 1}"
