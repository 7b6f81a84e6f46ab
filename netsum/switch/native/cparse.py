"""Parser, deparser and calculations -> C for the native backend.

The parser is one C function whose parse states are labels: an extract checks the length,
loads each field big-endian (aligned 8/16/32/64-bit fields straight, others through
`ld_bits`), sets validity and moves the offset; parser errors record their code exactly where
netsum/switch/parser.py raises (the packet then goes on, as v1model says), including which offset
`pkt.off` holds then, since the deparser appends the frame from there.  The deparser writes
the valid headers in order into the context's scratch buffer.
"""
from __future__ import annotations

from typing import Any

from netsum.switch.expressions import ExprCompiler
from netsum.switch.layout import HeaderInfo
from netsum.switch.native.cexpr import CE, CExpr, Decline, MAX_NATIVE_WIDTH, U64, hexval, unwrap
from netsum.switch.native.cgen import CalcInfo, Gen
from netsum.switch.program import Deparser, ParseState, Parser

__all__ = ["parser_c", "deparser_c", "calculation_c", "MAX_PARSE_STATES"]

MAX_PARSE_STATES = 1024       # as switch.v1model.MAX_PARSE_STATES


def _field_bits(h: HeaderInfo, path: str) -> list[tuple[int, int, int, bool]]:
    """(slot, bit offset in the header, width, signed) per field; whole bytes only."""
    if h.varbit >= 0:
        raise Decline(f"{path}: header '{h.name}' has a variable-length field")
    out, pos = [], 0
    for _n, s in h.fields:
        if s.width > MAX_NATIVE_WIDTH:
            raise Decline(f"{path}: header '{h.name}' has a field of {s.width} bits")
        out.append((s.index, pos, s.width, s.signed))
        pos += s.width
    if pos % 8:
        raise Decline(f"{path}: header '{h.name}' is not a whole number of bytes")
    return out


def _vector(g: Gen, h: HeaderInfo) -> tuple[set[int], int, int, int] | None:
    """(slots held in Pkt.V, byte offset in the header, bytes, offset in V) of `h`'s vector
    range, or None."""
    at = g.vec.of(h) if g.vec is not None else None
    if at is None:
        return None
    vr, voff = at
    skip = {s.index for _n, s in h.fields[vr.first:vr.first + vr.count]}
    return skip, vr.byte_offset, vr.count * vr.width // 8, voff


def _load(base: str, pos: int, w: int, signed: bool) -> str:
    if pos % 8 == 0 and w in (8, 16, 32, 64):
        v = f"ld{w}({base} + {pos // 8})"
    else:
        v = f"ld_bits({base}, {pos}, {w})"
    return f"SEXT({v}, {w})" if signed and w < 64 else v


def _store(base: str, pos: int, w: int, val: str) -> str:
    if pos % 8 == 0 and w in (8, 16, 32, 64):
        return f"st{w}({base} + {pos // 8}, {val});"
    return f"or_bits({base}, {pos}, {w}, {val});"


class _Parser:
    def __init__(self, g: Gen, path: str) -> None:
        self.g = g
        self.path = path
        e = g.layout.errors
        self.too_short = e.get("PacketTooShort", 1)
        self.stack_oob = e.get("StackOutOfBounds", 3)
        self.no_match = e.get("NoMatch", 2)
        self.timeout = e.get("ParserTimeout", 5)

    def err(self, code: int | str, store_off: bool = True) -> str:
        return ("p->off = off; " if store_off else "") + f"code = {code}; goto perr;"

    def lookahead(self, bit_off: int, width: int) -> str:
        # A failing lookahead leaves pkt.off where the state stored it last (as netsum/switch/parser).
        return (f"({{ if ((u64)off * 8 + {bit_off + width} > (u64)_n * 8) {{ "
                f"{self.err(self.too_short, False)} }} ld_bits(buf, (u64)off * 8 + {bit_off}, "
                f"{width}); }})")

    def comp(self, path: str) -> CExpr:
        return self.g.comp(path, (), self.lookahead)

    def extract(self, h: HeaderInfo, path: str) -> list[str]:
        fields = _field_bits(h, path)
        nb = h.nbytes
        out = [f"if (off + {nb} > _n) {{ {self.err(self.too_short)} }}"]
        vec = _vector(self.g, h)
        if vec is not None:        # the range's bytes go to Pkt.V as they are (cvec.py)
            skip, at, size, voff = vec
            fields = [f for f in fields if f[0] not in skip]
            out.append(f"memcpy(p->V + {voff}, buf + off + {at}, {size});")
        out += [f"F[{s}] = {_load('buf + off', pos, w, sg)};" for s, pos, w, sg in fields]
        out += [f"F[{h.valid}] = 1;", f"off += {nb};"] + self.g.siblings_off(h.name)
        return out

    def op(self, path: str, op: dict[str, Any]) -> list[str]:
        kind = op.get("op")
        params = op.get("parameters") or []
        cx = self.comp(path)
        lay = self.g.layout
        if kind == "extract":
            p = unwrap(params[0]) if params else {}
            t, v = p.get("type"), p.get("value")
            if t == "regular":
                return self.extract(cx.header(v), path)
            if t == "stack":
                st = lay.stacks.get(v) if isinstance(v, str) else None
                if st is None or not st.headers:
                    raise Decline(f"{path}: unknown header stack {v!r}")
                out = [f"{{ u64 _k = F[{st.next_slot}];",
                       f"if (_k >= {len(st.headers)}) {{ {self.err(self.stack_oob)} }}"]
                for k, hn in enumerate(st.headers):
                    out.append(f"{'if' if k == 0 else 'else if'} (_k == {k}) {{")
                    out += ["    " + s for s in self.extract(lay.headers[hn], path)]
                    out.append("}")
                return out + [f"F[{st.next_slot}] = _k + 1; }}"]
            raise Decline(f"{path}: extract of {t!r}")
        if kind == "set":
            if len(params) != 2:
                raise Decline(f"{path}: set needs 2 parameters")
            return self.g.prim(cx, "assign", params)
        if kind == "verify":
            if len(params) != 2:
                raise Decline(f"{path}: verify needs 2 parameters")
            e = cx.compile(params[1])
            if not e.unsigned:
                raise Decline(f"{path}: verify error code")
            return [f"if (!{cx.cond(params[0])}) {{ {self.err(e.code)} }}"]
        if kind in ("shift", "advance"):
            a = cx.compile(params[0]) if params else CE("0", 0, 0)
            if not a.unsigned:
                raise Decline(f"{path}: {kind} by an amount that may be negative")
            nbytes = a.code if kind == "shift" else f"(({a.code}) >> 3)"
            return [f"{{ u64 _a = {nbytes}; if (_a > (u64)(_n - off)) {{ off = _n; "
                    f"{self.err(self.too_short)} }} off += (Py_ssize_t)_a; }}"]
        if kind == "primitive":
            inner = params[0] if params else None
            inner = inner.get("value", inner) if isinstance(inner, dict) and \
                "op" not in inner else inner
            if not isinstance(inner, dict) or not isinstance(inner.get("op"), str):
                raise Decline(f"{path}: parser primitive {inner!r}")
            return self.g.prim(cx, inner["op"], inner.get("parameters") or [])
        raise Decline(f"{path}: parser op {kind!r}")

    def key(self, path: str, st: ParseState) -> tuple[list[str], str | None]:
        """(statements, C expression of the concatenated transition key)."""
        lay = self.g.layout
        pre: list[str] = []
        parts: list[tuple[str, int]] = []
        cx = self.comp(f"{path}.transition_key")
        for k, el in enumerate(st.transition_key):
            kp = f"{path}.transition_key[{k}]"
            t = el.get("type") if isinstance(el, dict) else None
            if t == "field":
                s, w, sg = cx.field(el.get("value"))
                parts.append((f"(F[{s}] & {(1 << w) - 1}ULL)" if sg else f"F[{s}]", w))
            elif t == "stack_field":
                nxt, slots, w, _sg = cx.stack_slots(el.get("value"), False)
                pre.append(f"if (!F[{nxt}]) {{ {self.err(self.stack_oob)} }}")
                tab = cx.slot_table(slots)
                parts.append((f"(F[{tab}[F[{nxt}] - 1]] & {(1 << w) - 1}ULL)", w))
            elif t == "lookahead":
                v = el.get("value")
                if not (isinstance(v, list) and len(v) == 2 and type(v[0]) is int and
                        type(v[1]) is int and v[0] >= 0 and 0 < v[1] <= 64):
                    raise Decline(f"{kp}: lookahead {v!r}")
                parts.append((self.lookahead(v[0], v[1]), v[1]))
            elif t == "expression":
                # The key's layout follows the reference's width bound for the expression.
                ref = ExprCompiler(lay, kp, (), lambda a, b: "0").compile(el)[1] or 32
                e = cx.compile(el)
                if not e.unsigned or e.hi is None or e.hi >> ref:
                    raise Decline(f"{kp}: key expression outside its {ref} bits")
                parts.append((e.code, ref))
            else:
                raise Decline(f"{kp}: key of type {t!r}")
        if not parts:
            return pre, None
        terms, shift = [], 0
        for src, w in reversed(parts):
            terms.append(f"((u64)({src}) << {shift})" if shift else f"(u64)({src})")
            shift += (w + 7) // 8 * 8
        if shift > 64:
            raise Decline(f"{path}: transition key of {shift} bits (native: at most 64)")
        return pre, " | ".join(terms)

    def state(self, st: ParseState, labels: dict[str, str]) -> list[str]:
        path = st.path
        body: list[str] = []
        for k, op in enumerate(st.ops):
            body += self.op(f"{path}.parser_ops[{k}]", op)
        body.append("p->off = off;")
        pre, key = self.key(path, st)
        body += pre
        if key is not None:
            body.append(f"_key = {key};")

        def go(target: Any) -> str:
            nxt = "return;" if target is None else f"goto {labels[target]};"
            return f"if (++steps > {MAX_PARSE_STATES}) {{ {self.err(self.timeout)} }} {nxt}"
        transitions = st.transitions
        default: str | None = go(None) if not transitions else None
        for k, tr in enumerate(transitions):
            tp = f"{path}.transitions[{k}]"
            nxt = tr.next_state
            if tr.is_default:
                default = go(nxt)
                break
            if tr.type != "hexstr" or key is None:
                raise Decline(f"{tp}: transition of type {tr.type!r}")
            v = hexval(tr.value, tp)
            m = tr.mask
            mv = (U64 - 1) if m is None else hexval(m, tp)
            want = v & mv
            if want >= U64 or want < 0:
                continue                          # a value wider than the key never matches
            body.append(f"if ((_key & {mv % U64}ULL) == {want}ULL) {{ {go(nxt)} }}")
        body.append(default if default is not None else self.err(self.no_match))
        return body


def parser_c(g: Gen, parser: Parser) -> str:
    ps = _Parser(g, parser.path)
    states = parser.states
    labels = {st.name: f"S{k}" for k, st in enumerate(states)}
    init = parser.init_state
    lay = g.layout
    pe = g.std.parser_error
    lines = ["static void parse(Ctx *c, Pkt *p) {",
             "    u64 *F = p->F; const u8 *buf = p->data; Py_ssize_t _n = p->len, off = p->off;",
             "    int steps = 0; u64 code = 0, _key = 0; (void)_key; (void)buf; (void)c;"]
    lines.append(f"    goto {labels[init]};" if init is not None else "    return;")
    for k, st in enumerate(states):
        lines.append(f"S{k}: {{")
        lines += ["    " + s for s in ps.state(st, labels)]
        lines.append("}")
    lines += ["perr:",
              "    c->stats[S_PARSER_ERRORS]++;",
              f"    if (code == {ps.too_short}) c->stats[S_TRUNCATED]++;",
              f"    F[{pe}] = code;" if pe is not None else "    (void)F;",
              "}"]
    del lay
    return "\n".join(lines) + "\n"


def deparser_c(g: Gen, deparser: Deparser) -> tuple[str, int]:
    """(C of `Py_ssize_t deparse(Pkt *p, u8 *o)`, the largest header bytes it writes)."""
    lines = ["static Py_ssize_t deparse(Pkt *p, u8 *o) {", "    u64 *F = p->F; u8 *s = o;"]
    total = 0
    for h in deparser.headers:
        fields = _field_bits(h, f"{deparser.path} ('{h.name}')")
        aligned = all(pos % 8 == 0 and w in (8, 16, 32, 64) for _s, pos, w, _g in fields)
        body = [] if aligned else [f"memset(s, 0, {h.nbytes});"]
        vec = _vector(g, h)
        if vec is not None:
            skip, at, size, voff = vec
            fields = [f for f in fields if f[0] not in skip]
            body.append(f"memcpy(s + {at}, p->V + {voff}, {size});")
        body += [_store("s", pos, w, f"F[{s}]") for s, pos, w, _g in fields]
        lines.append(f"    if (F[{h.valid}]) {{ {' '.join(body)} s += {h.nbytes}; }}")
        total += h.nbytes
    lines += ["    return s - o;", "}"]
    return "\n".join(lines) + "\n", total


_ALGOS = {"crc16": ("h_crc16", 16), "crc32": ("h_crc32", 32), "csum16": ("h_csum16", 16),
          "xor16": ("h_xor16", 16), "identity": ("h_identity", 0)}


def calculation_c(g: Gen, calc: dict[str, Any], path: str, k: int) -> tuple[CalcInfo, int]:
    """The C function of one calculation and its scratch need in bytes (payload excluded)."""
    fn = f"CALC{k}"
    algo = calc.get("algo")
    if algo == "random":
        g.fns.append(f"static int {fn}(Ctx *c, Pkt *p, u64 *out) {{ (void)p; "
                     "return py_randbits(c, out); }\n")
        return CalcInfo(fn, 0, (1 << 32) - 1), 0
    if algo not in _ALGOS:
        raise Decline(f"{path}: hash algorithm {algo!r}")
    cfn, bits = _ALGOS[str(algo)]
    cx = g.comp(path)
    parts: list[tuple[str, int]] = []
    payload = False
    inputs = calc.get("input") or []
    for i, el in enumerate(inputs):
        t = el.get("type") if isinstance(el, dict) else None
        if t == "field":
            s, w, _sg = cx.field(el.get("value"))
            if s in g.layout.vl_len:
                raise Decline(f"{path}: variable-length field in a field list")
            parts.append((f"F[{s}]", w))
        elif t == "hexstr":
            v = hexval(el.get("value"), path)
            w = el.get("bitwidth", max(8, v.bit_length()))
            if type(w) is not int or not 0 < w <= 64:
                raise Decline(f"{path}: constant of {w!r} bits in a field list")
            parts.append((f"{v % U64}ULL", w))
        elif t == "expression":
            e = cx.compile(el)
            ref = ExprCompiler(g.layout, path).compile(el)[1]
            w = el.get("bitwidth", ref or 32)
            if type(w) is not int or not 0 < w <= 64:
                raise Decline(f"{path}: expression of {w!r} bits in a field list")
            parts.append((e.code, w))
        elif t == "payload" and i == len(inputs) - 1:
            payload = True
        else:
            raise Decline(f"{path}.input[{i}]: input of type {t!r}")
    nbits = sum(w for _, w in parts)
    nbytes = (nbits + 7) // 8
    body = [f"u8 *b = c->obuf; memset(b, 0, {nbytes});"]
    pos = 0
    for src, w in parts:
        body.append(_store("b", pos, w, f"({src}) & {(1 << w) - 1}ULL"))
        pos += w
    n = f"{nbytes}"
    if payload:
        body.append(f"Py_ssize_t _pl = p->off < p->len ? p->len - p->off : 0; "
                    f"memcpy(b + {nbytes}, p->data + p->off, (size_t)_pl);")
        n = f"{nbytes} + _pl"
    body.append(f"*out = {cfn}(b, {n}); return ST_OK;")
    g.fns.append(f"static int {fn}(Ctx *c, Pkt *p, u64 *out) {{\n    u64 *F = p->F; (void)F;\n" +
                 "".join(f"    {s}\n" for s in body) + "}\n")
    if bits == 0:                      # identity: the number itself, exact up to 64 bits
        exact = nbits <= 64 and not payload
        return CalcInfo(fn, 0 if exact else None, (1 << nbits) - 1 if exact else None), nbytes
    return CalcInfo(fn, 0, (1 << bits) - 1), nbytes
