"""BMv2 JSON expressions -> C over `uint64_t`, with the value range of each result.

bmv2 computes with unbounded integers and truncates on writes.  The C code holds every value
modulo 2^64 (signed fields sign-extended), which is exact for the ring and bitwise operators
(`+ - * & | ^ ~ <<`: reduction modulo 2^64 commutes with them) and so for every write to a
destination of at most 64 bits.  Operators that need the true value (comparisons, `>>`, `/`,
`%`, truthiness, indices, saturating casts) are emitted only when interval analysis proves each
operand lies in [0, 2^64) or in [-2^63, 2^63); otherwise the program is declined (`Decline`),
never mis-executed.  Each result carries the exact interval [lo, hi] of its true value, or None
when unknown.  This module shares nothing with netsum/switch/expressions.py but the JSON format.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netsum.switch.layout import Layout

__all__ = ["CE", "CExpr", "Decline", "unwrap", "hexval", "U64", "MAX_NATIVE_WIDTH"]

U64 = 1 << 64
MAX_NATIVE_WIDTH = 64


class Decline(Exception):
    """The program uses something the native backend does not run; the message says what."""


@dataclass(frozen=True, slots=True)
class CE:
    code: str               # a C expression of type uint64_t: the true value modulo 2^64
    lo: int | None = None   # the true value lies in [lo, hi]; None = unknown
    hi: int | None = None

    @property
    def unsigned(self) -> bool:
        return self.lo is not None and self.hi is not None and self.lo >= 0 and self.hi < U64

    @property
    def signed(self) -> bool:
        return self.lo is not None and self.hi is not None and -(U64 >> 1) <= self.lo and \
            self.hi < (U64 >> 1)

    @property
    def exact(self) -> bool:
        return self.unsigned or self.signed

    @property
    def boolean(self) -> bool:
        return self.lo is not None and self.hi is not None and 0 <= self.lo and self.hi <= 1


def unwrap(node: Any) -> Any:
    while isinstance(node, dict) and node.get("type") == "expression" and \
            isinstance(node.get("value"), dict):
        node = node["value"]
    return node


def hexval(v: Any, what: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return int(v, 16)
        except ValueError:
            pass
    raise Decline(f"{what}: bad hexstr {v!r}")


def _const(v: int) -> CE:
    return CE(f"{v % U64}ULL", v, v)


def _rng(lo: int | None, hi: int | None, code: str) -> CE:
    return CE(code, lo, hi)


class CExpr:
    """Compiles the expressions of one action, parse state, conditional or calculation.

    `params` are the runtime_data widths (`P[i]`); `lookahead(bit_offset, width)` gives the C
    text of a parser lookahead; `globals_` collects static tables the code refers to."""

    def __init__(self, layout: Layout, path: str, params: tuple[int, ...] = (),
                 lookahead: Callable[[int, int], str] | None = None,
                 globals_: list[str] | None = None) -> None:
        self.layout = layout
        self.path = path
        self.params = params
        self.lookahead = lookahead
        self.globals = globals_ if globals_ is not None else []

    def fail(self, what: str) -> Decline:
        return Decline(f"{self.path}: {what}")

    # -- operands ------------------------------------------------------------------------
    def field(self, ref: Any) -> tuple[int, int, bool]:
        """(slot, width, signed) of a field reference (aliases resolved)."""
        try:
            s = self.layout.slot(ref, self.path)
        except Exception as e:
            raise self.fail(str(e)) from None
        if s.width > MAX_NATIVE_WIDTH:
            raise self.fail(f"field {ref!r} is {s.width} bits wide (native: at most 64)")
        return s.index, s.width, s.signed

    @staticmethod
    def field_ce(slot: int, width: int, signed: bool) -> CE:
        if signed:
            return CE(f"F[{slot}]", -(1 << (width - 1)), (1 << (width - 1)) - 1)
        return CE(f"F[{slot}]", 0, (1 << width) - 1)

    def stack_slots(self, ref: Any, unions: bool) -> tuple[int, list[int], int, bool]:
        try:
            nxt, slots = (self.layout.union_stack_field(ref, self.path) if unions else
                          self.layout.stack_field(ref, self.path))
        except Exception as e:
            raise self.fail(str(e)) from None
        if slots[0].width > MAX_NATIVE_WIDTH:
            raise self.fail("stack field wider than 64 bits")
        return nxt, [s.index for s in slots], slots[0].width, slots[0].signed

    def slot_table(self, slots: list[int]) -> str:
        name = f"ST{len(self.globals)}"
        self.globals.append(f"static const int {name}[] = {{{', '.join(map(str, slots))}}};")
        return name

    def compile(self, node: Any) -> CE:
        n = unwrap(node)
        if not isinstance(n, dict):
            raise self.fail(f"bad expression {node!r}")
        if "op" in n:
            return self._op(n)
        t, v = n.get("type"), n.get("value")
        if t == "field":
            return self.field_ce(*self.field(v))
        if t in ("stack_field", "union_stack_field"):
            nxt, slots, w, sg = self.stack_slots(v, t == "union_stack_field")
            tab = self.slot_table(slots)
            base = self.field_ce(0, w, sg)
            return CE(f"(F[{nxt}] ? F[{tab}[F[{nxt}] - 1]] : 0)", min(0, base.lo or 0), base.hi)
        if t == "hexstr":
            return _const(hexval(v, self.path))
        if t == "bool":
            return _const(1 if v else 0)
        if t in ("local", "runtime_data"):
            if not isinstance(v, int) or not 0 <= v < len(self.params):
                raise self.fail(f"runtime_data index {v!r} out of range")
            return CE(f"P[{v}]", 0, (1 << self.params[v]) - 1)
        if t == "header":
            return CE(f"F[{self.header(v).valid}]", 0, 1)
        if t == "lookahead" and self.lookahead is not None:
            if not (isinstance(v, list) and len(v) == 2 and type(v[0]) is int and
                    type(v[1]) is int and v[0] >= 0 and 0 < v[1] <= MAX_NATIVE_WIDTH):
                raise self.fail(f"lookahead {v!r} (native: at most 64 bits)")
            return CE(self.lookahead(v[0], v[1]), 0, (1 << v[1]) - 1)
        raise self.fail(f"expression operand of type {t!r}")

    def header(self, name: Any) -> Any:
        h = self.layout.headers.get(name) if isinstance(name, str) else None
        if h is None:
            raise self.fail(f"unknown header {name!r}")
        return h

    def named_header(self, node: Any) -> Any:
        """A header operand named directly (a stack element chosen per packet declines)."""
        n = unwrap(node)
        if isinstance(n, dict) and n.get("type") == "header":
            return self.header(n.get("value"))
        raise self.fail(f"header operand {node!r} chosen at run time")

    def truth(self, e: CE) -> str:
        if e.boolean:
            return f"({e.code})"
        if not e.exact:
            raise self.fail("truth value of an expression whose value may exceed 64 bits")
        return f"(({e.code}) != 0)"

    def cond(self, node: Any) -> str:
        """A C condition: the truthiness of the expression (as Python's `if`)."""
        n = unwrap(node)
        if isinstance(n, dict) and n.get("op") in ("and", "or"):
            op = "&&" if n["op"] == "and" else "||"
            return f"({self.cond(n.get('left'))} {op} {self.cond(n.get('right'))})"
        if isinstance(n, dict) and n.get("op") == "not":
            return f"(!{self.cond(n.get('right'))})"
        return self.truth(self.compile(node))

    # -- operators -----------------------------------------------------------------------
    def _width(self, node: Any) -> int:
        n = unwrap(node)
        w = hexval(n.get("value"), self.path) if isinstance(n, dict) and \
            n.get("type") == "hexstr" else None
        if w is None or not 0 < w <= 4096:
            raise self.fail(f"bad width operand {node!r}")
        return w

    def _cmp(self, op: str, a: CE, b: CE) -> CE:
        if a.unsigned and b.unsigned:
            return CE(f"(u64)(({a.code}) {op} ({b.code}))", 0, 1)
        if a.signed and b.signed:
            return CE(f"(u64)((i64)({a.code}) {op} (i64)({b.code}))", 0, 1)
        raise self.fail(f"comparison '{op}' of values that may not fit one 64-bit window")

    def _op(self, n: dict[str, Any]) -> CE:
        op = n["op"]
        left, right = n.get("left"), n.get("right")
        if op == "-" and left is None:
            a = self.compile(right)
            return _rng(None if a.hi is None else -a.hi, None if a.lo is None else -a.lo,
                        f"((u64)0 - ({a.code}))")
        if op in ("+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%"):
            a, b = self.compile(left), self.compile(right)
            return self._arith(op, a, b)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return self._cmp(op, self.compile(left), self.compile(right))
        if op in ("and", "or"):
            a, b = self.compile(left), self.compile(right)
            if not (a.boolean and b.boolean):
                raise self.fail(f"'{op}' used as a value over non-boolean operands")
            return CE(f"(u64)(({a.code}) {'&&' if op == 'and' else '||'} ({b.code}))", 0, 1)
        if op == "not":
            return CE(f"(u64)(!{self.cond(right)})", 0, 1)
        if op == "~":
            a = self.compile(right)
            return _rng(None if a.hi is None else -a.hi - 1, None if a.lo is None else -a.lo - 1,
                        f"(~({a.code}))")
        if op == "d2b":
            a = self.compile(right)
            return a if a.boolean else CE(f"(u64){self.truth(a)}", 0, 1)
        if op == "b2d":
            return CE(f"(u64){self.truth(self.compile(right))}", 0, 1)
        if op == "?":
            c = self.cond(n.get("cond"))
            a, b = self.compile(left), self.compile(right)
            lo = min(a.lo, b.lo) if a.lo is not None and b.lo is not None else None
            hi = max(a.hi, b.hi) if a.hi is not None and b.hi is not None else None
            return CE(f"({c} ? ({a.code}) : ({b.code}))", lo, hi)
        if op == "two_comp_mod":
            a = self.compile(left)
            w = self._width(right)
            half = 1 << (w - 1)
            if w >= 64:
                inside = a.lo is not None and a.hi is not None and -half <= a.lo and a.hi < half
                return a if inside else CE(a.code)
            return CE(f"SEXT({a.code}, {w})", -half, half - 1)
        if op in ("usat_cast", "sat_cast"):
            a = self.compile(left)
            w = self._width(right)
            if w > 64 or not a.signed:
                raise self.fail(f"{op} needs a value inside 64 bits")
            if op == "usat_cast":
                return CE(f"usat({a.code}, {w})", 0, (1 << w) - 1)
            return CE(f"ssat({a.code}, {w})", -(1 << (w - 1)), (1 << (w - 1)) - 1)
        if op == "valid":
            return CE(f"F[{self.named_header(right).valid}]", 0, 1)
        if op == "valid_union":
            r = unwrap(right)
            name = r.get("value") if isinstance(r, dict) and r.get("type") == "header_union" \
                else None
            if not isinstance(name, str) or name not in self.layout.unions:
                raise self.fail(f"union operand {right!r} chosen at run time")
            vs = " || ".join(f"F[{self.layout.headers[m].valid}]"
                             for m in self.layout.unions[name]) or "0"
            return CE(f"(u64)({vs})", 0, 1)
        if op == "access_field":
            h = self.named_header(left)
            k = right
            if type(k) is not int or not 0 <= k < len(h.fields):
                raise self.fail(f"access_field: bad field offset {k!r}")
            s = h.fields[k][1]
            if s.width > MAX_NATIVE_WIDTH:
                raise self.fail("access_field of a field wider than 64 bits")
            return self.field_ce(s.index, s.width, s.signed)
        if op in ("last_stack_index", "size_stack"):
            r = unwrap(right)
            st = self.layout.stacks.get(str(r.get("value"))) if isinstance(r, dict) and \
                r.get("type") == "header_stack" else None
            if st is None or not st.headers:
                raise self.fail(f"{op} of {right!r}")
            size = len(st.headers)
            if op == "size_stack":
                return CE(f"F[{st.next_slot}]", 0, size)
            return CE(f"(F[{st.next_slot}] - 1)", -1, size - 1)
        raise self.fail(f"expression op {op!r}")

    def _arith(self, op: str, a: CE, b: CE) -> CE:
        known = a.lo is not None and a.hi is not None and b.lo is not None and b.hi is not None
        x, y = a.code, b.code
        if op in ("+", "-", "*"):
            lo = hi = None
            if known:
                assert a.lo is not None and a.hi is not None and b.lo is not None and \
                    b.hi is not None
                if op == "+":
                    lo, hi = a.lo + b.lo, a.hi + b.hi
                elif op == "-":
                    lo, hi = a.lo - b.hi, a.hi - b.lo
                else:
                    c = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
                    lo, hi = min(c), max(c)
            return CE(f"(({x}) {op} ({y}))", lo, hi)
        if op in ("&", "|", "^"):
            lo2 = hi2 = None
            if a.lo is not None and b.lo is not None and a.lo >= 0 and b.lo >= 0:
                assert a.hi is not None and b.hi is not None
                hi2 = min(a.hi, b.hi) if op == "&" else \
                    (1 << max(a.hi.bit_length(), b.hi.bit_length())) - 1
                lo2 = 0
            elif op == "&" and ((a.lo is not None and a.lo >= 0) or
                                (b.lo is not None and b.lo >= 0)):
                lo2, hi2 = 0, (a.hi if a.lo is not None and a.lo >= 0 else b.hi)
            elif known:
                assert a.lo is not None and a.hi is not None and b.lo is not None and \
                    b.hi is not None
                k = max(abs(a.lo), abs(a.hi) + 1, abs(b.lo), abs(b.hi) + 1).bit_length()
                lo2, hi2 = -(1 << k), (1 << k) - 1
            return CE(f"(({x}) {op} ({y}))", lo2, hi2)
        if op == "<<":
            if not b.unsigned:
                raise self.fail("shift by an amount that may be negative or beyond 64 bits")
            assert b.lo is not None and b.hi is not None
            lo3 = hi3 = None
            if a.lo is not None and a.hi is not None and b.hi <= 256:
                c = [a.lo << b.lo, a.lo << b.hi, a.hi << b.lo, a.hi << b.hi, 0]
                lo3, hi3 = min(c), max(c)
            if b.lo == b.hi:
                code = f"((u64)({x}) << {b.lo})" if b.lo < 64 else "(u64)0"
            else:
                code = f"SHL({x}, {y})"
            return CE(code, lo3, hi3)
        if op == ">>":
            if not b.unsigned:
                raise self.fail("shift by an amount that may be negative or beyond 64 bits")
            assert b.lo is not None and b.hi is not None
            if a.unsigned:
                assert a.lo is not None and a.hi is not None
                return CE(f"SHR({x}, {y})", a.lo >> b.hi, a.hi >> b.lo)
            if a.signed:
                assert a.lo is not None and a.hi is not None
                c = [a.lo >> b.lo, a.lo >> b.hi, a.hi >> b.lo, a.hi >> b.hi]
                return CE(f"SAR({x}, {y})", min(c), max(c))
            raise self.fail("right shift of a value that may exceed 64 bits")
        # / and %: Python's floor division (the reference path); by zero yields 0.
        if a.unsigned and b.unsigned:
            assert a.hi is not None and b.hi is not None
            if op == "/":
                return CE(f"DIVU({x}, {y})", 0, a.hi)
            return CE(f"MODU({x}, {y})", 0, max(b.hi - 1, 0))
        if a.signed and b.signed:
            assert a.lo is not None and a.hi is not None and b.lo is not None and \
                b.hi is not None
            m = max(abs(a.lo), abs(a.hi)) + 1
            bm = max(abs(b.lo), abs(b.hi))
            if op == "/":
                return CE(f"divs({x}, {y})", -m, m)
            return CE(f"mods({x}, {y})", -bm, bm)
        raise self.fail(f"'{op}' of values that may not fit one 64-bit window")


def store(dst: str, width: int, signed: bool, e: CE) -> str:
    """C statement writing `e` to a field of `width` bits (truncation as bmv2's)."""
    if signed:
        return f"{dst} = SEXT({e.code}, {width});"
    if width >= 64 or (e.lo is not None and e.hi is not None and e.lo >= 0 and
                       e.hi < (1 << width)):
        return f"{dst} = {e.code};"
    return f"{dst} = ({e.code}) & {(1 << width) - 1}ULL;"
