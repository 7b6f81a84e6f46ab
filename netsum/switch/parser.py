"""Parser: BMv2 JSON parse states -> generated Python (the deparser is switch.deparser).

Each parse state becomes a function `state(pkt) -> next state | None` (None = accept).  Header
bytes are unpacked with one precompiled `struct.Struct` per header type: fields are grouped into
byte-aligned chunks; a chunk holding one 8/16/32/64-bit field maps straight to a struct code, a
run of such fields maps to a slice assignment `F[a:b] = S.unpack_from(buf, off)`, and sub-byte
fields are shifted out of their chunk.  Parser errors raise `ParserError(code)`; the life cycle
records the code in `parser_error` and keeps the packet (v1model semantics).
"""
from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np

from netsum.switch.expressions import ExprCompiler, parse_hexstr
from netsum.switch.layout import HeaderInfo, Layout, cfg_error, loading
# The emitter modules register into the primitive registry when imported.
from netsum.switch import headerops as _headerops, primitives as _primitives  # noqa: F401
from netsum.switch.primregistry import Namespace, PrimCtx, emitter, required
from netsum.switch.program import ParseState, Parser
from netsum.switch.valuesets import ValueSet
from netsum.switch.varbit import vl_unpack

__all__ = ["ParserError", "header_unpack", "header_pack", "pack_parts", "check_whole_bytes",
           "parser_source"]


class ParserError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


_INT = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _chunks(h: HeaderInfo) -> list[list[tuple[int, int, bool]]]:
    chunks: list[list[tuple[int, int, bool]]] = []
    cur: list[tuple[int, int, bool]] = []
    bits = 0
    for _n, s in h.fields:
        cur.append((s.index, s.width, s.signed))
        bits += s.width
        if bits % 8 == 0:
            chunks.append(cur)
            cur, bits = [], 0
    if cur:
        raise cfg_error(f"header '{h.name}'", f"type '{h.type_name}' is not a whole number of "
                                              "bytes")
    return chunks


def check_whole_bytes(h: HeaderInfo) -> None:
    """Load-time check that a fixed-size header is a whole number of bytes."""
    _chunks(h)


def _chunk_codes(h: HeaderInfo) -> list[tuple[list[Any], str]]:
    info = []
    for ch in _chunks(h):
        n = sum(w for _, w, _ in ch) // 8
        code = _INT.get(n, f"{n}s")
        if len(ch) == 1 and ch[0][2] and n in _INT and ch[0][1] == n * 8:
            code = code.lower()       # signed field of a struct-native width
        info.append((ch, code))
    return info


def _struct(ns: Namespace, h: HeaderInfo) -> tuple[str, list[tuple[list[Any], str]]]:
    info = _chunk_codes(h)
    st = struct.Struct(">" + "".join(code for _, code in info))
    return ns.ref(st, "S"), info


def _contiguous_ints(info: list[tuple[list[Any], str]]) -> bool:
    idx = [ch[0][0] for ch, _ in info]
    return all(len(ch) == 1 and not code.endswith("s") and ch[0][1] == struct.calcsize(code) * 8
               for ch, code in info) and idx == list(range(idx[0], idx[0] + len(idx)))


def _split(h: HeaderInfo) -> tuple[HeaderInfo, HeaderInfo]:
    """The fields before and after `h`'s vector range, as headers of their own."""
    vr = h.vector
    parts = (h.fields[:vr.first], h.fields[vr.first + vr.count:])
    return tuple(HeaderInfo(h.name, h.id, h.type_name, h.metadata, f, h.valid,  # type: ignore
                            sum(s.width for _n, s in f)) for f in parts)


def _vector_unpack(ns: Namespace, h: HeaderInfo) -> list[str]:
    # The range is a read-only big-endian view of the frame (netsum/switch/lanes.py); the fields
    # around it unpack as usual, the suffix at its own byte offset.
    vr = h.vector
    pre, suf = _split(h)
    after = vr.byte_offset + vr.count * vr.width // 8
    ns.names["FROMBUF"] = np.frombuffer
    return (header_unpack(ns, pre)
            + [f"F[{vr.slot}] = FROMBUF(buf, {vr.dtype!r}, {vr.count}, off + {vr.byte_offset})"]
            + [s.replace("unpack_from(buf, off)", f"unpack_from(buf, off + {after})")
               for s in header_unpack(ns, suf)])


def header_unpack(ns: Namespace, h: HeaderInfo) -> list[str]:
    """Statements unpacking header `h` from `buf` at `off` into F (length already checked)."""
    if h.vector is not None:
        return _vector_unpack(ns, h)
    sname, info = _struct(ns, h)
    if not info:
        return []
    if _contiguous_ints(info):
        a = info[0][0][0][0]
        return [f"F[{a}:{a + len(info)}] = {sname}.unpack_from(buf, off)"]
    out = [f"_v = {sname}.unpack_from(buf, off)"]
    for j, (ch, code) in enumerate(info):
        raw = f"_v[{j}]"
        if code.endswith("s"):
            signed = len(ch) == 1 and ch[0][2]
            raw = f"int.from_bytes(_v[{j}], 'big'{', signed=True' if signed else ''})"
            if len(ch) == 1:
                out.append(f"F[{ch[0][0]}] = {raw}")
                continue
        if len(ch) == 1 and (code.lower() == code or not ch[0][2]):
            out.append(f"F[{ch[0][0]}] = {raw}")
            continue
        out.append(f"_c = {raw}")
        shift = sum(w for _, w, _ in ch)
        for idx, w, signed in ch:
            shift -= w
            val = f"_c >> {shift} & {(1 << w) - 1}" if shift else f"_c & {(1 << w) - 1}"
            if signed:
                half = 1 << (w - 1)
                val = f"(({val}) ^ {half}) - {half}"
            out.append(f"F[{idx}] = {val}")
    return out


def pack_parts(h: HeaderInfo) -> tuple[str, list[str]]:
    """(struct codes, argument expressions over F) producing header `h`'s bytes."""
    if h.vector is not None:
        vr = h.vector
        pre, suf = (pack_parts(x) for x in _split(h))
        return (pre[0] + f"{vr.count * vr.width // 8}s" + suf[0],
                pre[1] + [f"F[{vr.slot}].tobytes()"] + suf[1])
    info = [(ch, code) for ch, code in _chunk_codes(h)]
    if not info:
        return "", []
    if _contiguous_ints(info):
        a = info[0][0][0][0]
        return "".join(c for _, c in info), [f"*F[{a}:{a + len(info)}]"]
    args = []
    for ch, code in info:
        if len(ch) == 1 and not code.endswith("s") and (code.lower() == code or not ch[0][2]):
            args.append(f"F[{ch[0][0]}]")
            continue
        terms = []
        shift = sum(w for _, w, _ in ch)
        for idx, w, signed in ch:
            shift -= w
            v = f"(F[{idx}] & {(1 << w) - 1})" if signed else f"F[{idx}]"
            terms.append(f"{v} << {shift}" if shift else v)
        val = " | ".join(terms)
        if code.endswith("s"):
            args.append(f"({val}).to_bytes({int(code[:-1])}, 'big')")
        else:
            args.append(f"({val})")
    return "".join(c for _, c in info), args


def header_pack(ns: Namespace, h: HeaderInfo) -> str:
    """Expression giving the bytes of header `h` from F."""
    codes, args = pack_parts(h)
    if not codes:
        return "b''"
    return f"{ns.ref(struct.Struct('>' + codes), 'S')}.pack({', '.join(args)})"


class _StateCompiler:
    def __init__(self, layout: Layout, ns: Namespace, ctx: PrimCtx,
                 value_sets: dict[str, ValueSet]) -> None:
        self.bodies: dict[str, list[str]] = {}     # state function -> body lines
        self.value_sets = value_sets
        self.layout = layout
        self.ns = ns
        self.ctx = ctx
        self.too_short = layout.errors.get("PacketTooShort", 1)
        self.stack_oob = layout.errors.get("StackOutOfBounds", 3)
        self.hdr_short = layout.errors.get("HeaderTooShort", 4)
        self.bad_arg = layout.errors.get("ParserInvalidArgument", 6)

    def extract(self, h: HeaderInfo, path: str, vl: bool = False) -> list[str]:
        """Extract `h` at `off`; with `vl`, its varbit field is `_vl` bits wide (computed
        before: extract_VL's length expression)."""
        if h.varbit >= 0 and not vl:
            raise cfg_error(path, f"header '{h.name}' has a variable-length field: it needs "
                                  "extract_VL with a length")
        if vl and h.varbit < 0:
            raise cfg_error(path, f"extract_VL of header '{h.name}', which has no "
                                  "variable-length field")
        fail = ["    pkt.off = off"]
        n: int | str
        if not vl:
            n = h.nbytes
            out = [f"if off + {n} > _n:"] + fail + [f"    raise ParserError({self.too_short})"]
            out += header_unpack(self.ns, h)
        else:
            # bmv2's order of checks: width a multiple of 8, enough packet, max_length.
            n = "_nb"
            out = ["if _vl < 0 or _vl & 7:"] + fail + [f"    raise ParserError({self.bad_arg})",
                   f"_nb = {h.nbits >> 3} + (_vl >> 3)", "if off + _nb > _n:"] + fail + \
                [f"    raise ParserError({self.too_short})"]
            if h.max_bytes:
                out += [f"if _nb > {h.max_bytes}:"] + fail + \
                    [f"    raise ParserError({self.hdr_short})"]
            out += vl_unpack(h, "_vl", "_nb")
        return (out + [f"F[{h.valid}] = 1", f"off += {n}"]
                + [f"F[{v}] = 0" for v in self.layout.union_siblings(h.name)])

    def _to_next(self, next_slot: int, size: int, heads: list[HeaderInfo], path: str,
                 vl: bool) -> list[str]:
        """Extract into the next element of a header stack (or one member of the next union
        of a union stack): StackOutOfBounds when full."""
        out = [f"_k = F[{next_slot}]", f"if _k >= {size}:",
               "    pkt.off = off", f"    raise ParserError({self.stack_oob})"]
        for k, h in enumerate(heads):
            out.append(f"{'if' if k == 0 else 'elif'} _k == {k}:")
            out += ["    " + s for s in self.extract(h, path, vl)]
        out.append(f"F[{next_slot}] = _k + 1")
        return out

    def _extract(self, path: str, params: list[Any], comp: ExprCompiler, vl: bool
                 ) -> list[str]:
        p = params[0] if params and isinstance(params[0], dict) else {}
        t, v = p.get("type"), p.get("value")
        out = []
        if vl:
            if len(params) != 2:
                raise cfg_error(path, "extract_VL needs 2 parameters")
            out.append(f"_vl = {comp.compile(params[1])[0]}")
        lay = self.layout
        if t == "regular":
            return out + self.extract(lay.header(v, path), path, vl)
        if t == "stack":
            st = lay.stacks.get(v) if isinstance(v, str) else None
            if st is None:
                raise cfg_error(path, f"unknown header stack {v!r}")
            heads = [lay.headers[hn] for hn in st.headers]
            return out + self._to_next(st.next_slot, len(heads), heads, path, vl)
        if t == "union_stack":
            us = lay.union_stacks.get(v[0]) if isinstance(v, list) and len(v) == 2 and \
                isinstance(v[0], str) else None
            if us is None:
                raise cfg_error(path, f"unknown header union stack in {v!r}")
            assert isinstance(v, list)
            members = [lay.headers.get(f"{u}.{v[1]}") for u in us.unions]
            heads = [h for h in members if h is not None]
            if len(heads) != len(members):
                raise cfg_error(path, f"header union stack '{v[0]}' has no member {v[1]!r}")
            return out + self._to_next(us.next_slot, len(heads), heads, path, vl)
        raise cfg_error(path, f"extract of {t!r} is not supported")

    def op(self, path: str, op: dict[str, Any]) -> list[str]:
        kind = op.get("op")
        params = op.get("parameters") or []
        comp = ExprCompiler(self.layout, path, (), self.lookahead)
        if kind in ("extract", "extract_VL"):
            return self._extract(path, params, comp, kind == "extract_VL")
        if kind == "set":
            # The same as the `assign` primitive, which also takes whole headers, unions and
            # stacks (copies) and varbit fields (value and width), as bmv2's parser `set` does.
            if len(params) != 2:
                raise cfg_error(path, "set needs 2 parameters")
            self.ctx.path = path
            self.ctx.comp = comp
            return required("assign")(self.ctx, params)
        if kind == "verify":
            if len(params) != 2:
                raise cfg_error(path, "verify needs 2 parameters")
            err, _ = comp.compile(params[1])
            return [f"if not {comp.cond(params[0])}:", "    pkt.off = off",
                    f"    raise ParserError({err})"]
        if kind in ("shift", "advance"):
            amount, _ = comp.compile(params[0]) if params else ("0", 0)
            nbytes = amount if kind == "shift" else f"(({amount}) >> 3)"
            return [f"off += {nbytes}", "if off > _n:", "    off = _n", "    pkt.off = off",
                    f"    raise ParserError({self.too_short})"]
        if kind == "primitive":
            inner = params[0] if params else None
            inner = inner.get("value", inner) if isinstance(inner, dict) and "op" not in inner \
                else inner
            if not isinstance(inner, dict) or not isinstance(inner.get("op"), str) or \
                    (emit := emitter(inner["op"])) is None:
                raise cfg_error(path, f"parser primitive {inner!r} is not supported")
            self.ctx.path = path
            self.ctx.comp = comp
            return emit(self.ctx, inner.get("parameters") or [])
        raise cfg_error(path, f"parser op {kind!r} is not supported")

    def lookahead(self, bit_off: Any, width: Any) -> str:
        # Only validated ints are ever spliced into generated source: the JSON may come from a
        # P4Runtime client, so anything else would be code injection.
        if type(bit_off) is not int or type(width) is not int or bit_off < 0 or width <= 0:
            raise cfg_error("lookahead", f"bad lookahead [{bit_off!r}, {width!r}]")
        return f"LA(buf, off, {bit_off}, {width})"

    def state(self, st: ParseState, fname: str, names: dict[str, str]) -> str:
        with loading(st.path):
            return self._state(st.path, st, fname, names)

    def _state(self, path: str, st: ParseState, fname: str, names: dict[str, str]) -> str:
        body = list(_PROLOGUE)
        for k, op in enumerate(st.ops):
            body += self.op(f"{path}.parser_ops[{k}] ('{op.get('op')}')", op)
        body.append("pkt.off = off")
        comp = ExprCompiler(self.layout, f"{path}.transition_key", (), self.lookahead)
        key_parts = []
        for k, el in enumerate(st.transition_key):
            t = el.get("type") if isinstance(el, dict) else None
            if t == "field" and (last := self.layout.mangled_last(el.get("value"))):
                t, el = "union_stack_field", {"type": t, "value": last}
            if t == "field":
                s = self.layout.slot(el.get("value"), f"{path}.transition_key[{k}]")
                key_parts.append((f"F[{s.index}]" if not s.signed else
                                  f"(F[{s.index}] & {s.mask})", s.width))
            elif t in ("stack_field", "union_stack_field"):
                # P4_16: `stack.last` with nothing extracted yet is error StackOutOfBounds.
                kp = f"{path}.transition_key[{k}]"
                nslot, slots = self.layout.stack_field(el.get("value"), kp) if \
                    t == "stack_field" else self.layout.union_stack_field(el.get("value"), kp)
                body += [f"if not F[{nslot}]:", "    pkt.off = off",
                         f"    raise ParserError({self.stack_oob})"]
                idx = "".join(f"{s.index}, " for s in slots)
                src = f"F[({idx})[F[{nslot}] - 1]]"
                w = slots[0].width
                key_parts.append((src if not slots[0].signed else f"({src} & {(1 << w) - 1})", w))
            elif t == "lookahead":
                v = el.get("value")
                if not (isinstance(v, list) and len(v) == 2):
                    raise cfg_error(f"{path}.transition_key[{k}]", f"bad lookahead {v!r}")
                key_parts.append((self.lookahead(v[0], v[1]), v[1]))
            elif t == "expression":
                src, bits = comp.compile(el)
                key_parts.append((src, bits or 32))
            else:
                raise cfg_error(f"{path}.transition_key[{k}]", f"key of type {t!r} is not "
                                                               "supported")
        terms, shift = [], 0
        for src, w in reversed(key_parts):
            terms.append(f"({src} << {shift})" if shift else src)
            shift += (w + 7) // 8 * 8
        if terms:
            body.append(f"_key = {' | '.join(terms)}")
        transitions = st.transitions
        # No matching value and no default: parser error NoMatch (an empty list accepts).
        no_match = self.layout.errors.get("NoMatch", 2)
        default = f"ParserError({no_match})" if transitions else "None"
        for k, tr in enumerate(transitions):
            tp = f"{path}.transitions[{k}]"
            nxt = tr.next_state
            target = names[nxt] if nxt is not None else "None"
            t = tr.type
            if tr.is_default:
                default = target
                break
            if t not in ("hexstr", "parse_vset"):
                raise cfg_error(tp, f"transition of type {t!r} is not supported")
            if not terms:
                raise cfg_error(tp, "value transition without a transition_key")
            m = tr.mask
            if t == "parse_vset":
                body.append(self.vset_test(tp, tr.value, m, [w for _, w in key_parts], target))
                continue
            v = parse_hexstr(tr.value, tp)
            if m is None:
                body.append(f"if _key == {v}: return {target}")
            else:
                mv = parse_hexstr(m, tp)
                body.append(f"if _key & {mv} == {v & mv}: return {target}")
        if default.startswith("ParserError"):
            body += ["pkt.off = off", f"raise {default}"]
        else:
            body.append(f"return {default}")
        self.bodies[fname] = body
        return f"def {fname}(pkt):\n" + "".join(f"    {s}\n" for s in body)

    def vset_test(self, path: str, name: Any, mask: Any, widths: list[int], target: str
                  ) -> str:
        """`if <key in the value set>: return target`; members are in the key's form
        (netsum/switch/valuesets.py), a mask applies to the key and to each member as in bmv2."""
        vs = self.value_sets.get(name) if isinstance(name, str) else None
        if vs is None:
            raise cfg_error(path, f"unknown value set {name!r}")
        problem = vs.use(widths)
        if problem is not None:
            raise cfg_error(path, problem)
        ref = self.ns.ref(vs, "VS")
        if mask is None:
            return f"if _key in {ref}.members: return {target}"
        mv = parse_hexstr(mask, path)
        return (f"if any(_key & {mv} == _m & {mv} for _m in {ref}.members): "
                f"return {target}")

    def inlined(self, fname: str, depth: int) -> list[str]:
        """The body of state `fname` with its successors' bodies in place of `return PSn`.
        Every body ends in `return` or `raise` on each path, so an inlined successor under
        `if cond:` never falls through into the following transition tests."""
        out: list[str] = []
        for line in self.bodies[fname]:
            m = _TRANSITION.fullmatch(line)
            if m is None or depth <= 0 or m.group(3) not in self.bodies:
                out.append(line)
                continue
            # The successor's prologue re-reads what this state already holds (F, buf, _n,
            # and off, which was just stored in pkt.off).
            inner = self.inlined(m.group(3), depth - 1)[len(_PROLOGUE):]
            if m.group(1):
                out.append(f"if {m.group(2)}:")
                out += ["    " + s for s in inner]
            else:
                out += inner
        return out


def lookahead_fn(too_short: int) -> Any:
    def LA(buf: bytes, off: int, bit_off: int, width: int) -> int:
        start = off * 8 + bit_off
        end = start + width
        nbytes = (end + 7) // 8 - off
        if off + nbytes > len(buf):
            raise ParserError(too_short)
        v = int.from_bytes(buf[off:off + nbytes], "big")
        return (v >> (nbytes * 8 - bit_off - width)) & ((1 << width) - 1)
    return LA


def _acyclic(succ: dict[str, set[str]]) -> bool:
    state: dict[str, int] = {}          # 1 = on the current path, 2 = done

    def visit(n: str) -> bool:
        state[n] = 1
        for m in succ.get(n, ()):
            if state.get(m) == 1 or (not state.get(m) and not visit(m)):
                return False
        state[n] = 2
        return True
    return all(state.get(n) or visit(n) for n in succ)


def parser_source(parser: Parser, layout: Layout, ns: Namespace, ctx: PrimCtx,
                  inline: bool = True, value_sets: dict[str, ValueSet] | None = None
                  ) -> tuple[str, str | None]:
    """(source defining one function per state, name of the start state function) of the
    loaded parser (netsum.switch.program)."""
    ns.names["ParserError"] = ParserError
    ns.names["LA"] = lookahead_fn(layout.errors.get("PacketTooShort", 1))
    states = parser.states
    names: dict[str, str] = {}
    for k, st in enumerate(states):
        names[st.name] = f"PS{k}"          # a name used twice: the last state of that name
    sc = _StateCompiler(layout, ns, ctx, value_sets or {})
    src = "".join(sc.state(st, names[st.name], names) for st in states)
    init = parser.init_state
    # Inline successor states into their predecessors when the state graph has no cycle and
    # few states: a packet then visits at most INLINE_MAX_STATES states, far below the
    # v1model loop guard (1024), so the guard can never see a different count of steps.
    succ = {f: {m.group(3) for line in b if (m := _TRANSITION.fullmatch(line))}
            for f, b in sc.bodies.items()}
    if inline and len(states) <= INLINE_MAX_STATES and _acyclic(succ):
        src = "".join(f"def {f}(pkt):\n" + "".join(f"    {s}\n" for s in
                                                    sc.inlined(f, INLINE_PARSE_DEPTH))
                      for f in sc.bodies)
    return src, (names[init] if init is not None else None)


_PROLOGUE = ("F = pkt.F", "buf = pkt.data", "off = pkt.off", "_n = len(buf)")
_TRANSITION = re.compile(r"(if (.*): )?return (PS\d+)")
INLINE_MAX_STATES = 64
INLINE_PARSE_DEPTH = 8
