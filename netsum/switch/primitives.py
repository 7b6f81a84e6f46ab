"""Action primitives -> Python statements: the emitters of the scalar, extern and packet
primitives (assign, arithmetic, registers, counters, meters, hashes, clone/resubmit/recirculate,
digests, log_msg, assert, exit).  Whole-header primitives are in netsum.switch.headerops.

Every emitter gets the primitive's JSON parameters and returns source lines (unindented) for the
body of a generated function `f(F, P, pkt)`; it registers into netsum.switch.primregistry, where
the code generators look it up.  Unknown primitives are rejected at load time, never on a packet.
"""
from __future__ import annotations

from typing import Any

from netsum.switch.calculations import needs_payload
from netsum.switch.expressions import Expr, parse_hexstr, unwrap, write_src
from netsum.switch.layout import cfg_error
from netsum.switch.primregistry import Dest, Emitter, PrimCtx, primitive, register, required

__all__ = ["AssertFailure", "ActionLoopLimit", "log_format", "WHOLE_ASSIGN"]


class AssertFailure(Exception):
    """Raised by generated code for a failed assert()/assume(); the packet is dropped."""


class ActionLoopLimit(Exception):
    """Raised by generated code when a loop inside an action (`for`, p4c's backward `_jump`)
    runs more than switch.actions.LOOP_LIMIT basic blocks; the packet is dropped."""


def _nparams(ctx: PrimCtx, params: list[Any], n: int) -> None:
    if len(params) < n:
        raise cfg_error(ctx.path, f"expected {n} parameter(s), got {len(params)}")


def _store(slot: Dest, src: Expr) -> str:
    return write_src(slot.index, slot.width, slot.signed, src)


#: Operand type of a whole-object destination -> the primitive copying such objects.
WHOLE_ASSIGN = {"header": "assign_header", "header_union": "assign_union",
                "header_stack": "assign_header_stack",
                "header_union_stack": "assign_union_stack"}


@primitive("assign", "modify_field")
def _assign(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 2)
    # p4c writes whole-object copies as assign_header/_union/_header_stack/_union_stack;
    # `assign` naming such an object (as netsum-p4c once wrote) means the same copy.
    d = unwrap(p[0])
    whole = WHOLE_ASSIGN.get(str(d.get("type"))) if isinstance(d, dict) else None
    if whole is not None:
        return required(whole)(ctx, p)  # registered by netsum.switch.headerops
    s = unwrap(p[1])
    if isinstance(d, dict) and isinstance(s, dict) and d.get("type") == s.get("type") == "field" \
            and ctx.layout.slot(d.get("value"), ctx.path).index in ctx.layout.vl_len:
        return required("assign_VL")(ctx, p)
    return [_store(ctx.dest(p[0]), ctx.expr(p[1]))]


@primitive("mark_to_drop", "drop")
def _mark_to_drop(ctx: PrimCtx, p: list[Any]) -> list[str]:
    # bmv2's mark_to_drop(Header &std_hdr) writes the header it is given: p4c passes a copy of
    # standard_metadata (`s_0`) when the call sits in an action with an inout parameter, and
    # copies it back afterwards.  Without a parameter (P4_14 `drop`): standard_metadata.
    egress, mcast = ctx.std.egress_spec, ctx.std.mcast_grp
    n = unwrap(p[0]) if p else None
    if isinstance(n, dict) and n.get("type") == "header":
        h = ctx.layout.header(n.get("value"), ctx.path)
        e = ctx.layout.find(h.name, "egress_spec")
        if e is None:
            raise cfg_error(ctx.path, f"mark_to_drop: header '{h.name}' has no egress_spec")
        m = ctx.layout.find(h.name, "mcast_grp")
        egress, mcast = e.index, (m.index if m is not None else None)
    out = [f"F[{egress}] = DROP_PORT"]
    if mcast is not None:
        out.append(f"F[{mcast}] = 0")
    return out


@primitive("no_op")
def _no_op(ctx: PrimCtx, p: list[Any]) -> list[str]:
    return []


def _index_src(ctx: PrimCtx, node: Any) -> tuple[str, str]:
    """(setup line, guard prefix) for an array index expression."""
    src, bits = ctx.expr(node)
    guard = "" if bits is not None else "0 <= "
    return f"_i = {src}", guard


@primitive("register_read")
def _register_read(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 3)
    dst = ctx.dest(p[0])
    reg = ctx.named(p[1], "register_array", ctx.registers)
    r = ctx.ns.ref(reg.values, "R")
    setup, guard = _index_src(ctx, p[2])
    cell = f"int({r}[_i])" if reg.fused else f"{r}[_i]"    # numpy cells must become ints
    return [setup, f"if {guard}_i < {reg.size}:",
            "    " + _store(dst, (cell, reg.bitwidth)),
            "else:", "    STATS.register_oob += 1"]


@primitive("register_write")
def _register_write(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 3)
    reg = ctx.named(p[0], "register_array", ctx.registers)
    r = ctx.ns.ref(reg.values, "R")
    setup, guard = _index_src(ctx, p[1])
    val, bits = ctx.expr(p[2])
    if bits is None or bits > reg.bitwidth:
        val = f"({val}) & {(1 << reg.bitwidth) - 1}"
    return [setup, f"if {guard}_i < {reg.size}:", f"    {r}[_i] = {val}",
            "else:", "    STATS.register_oob += 1"]


@primitive("count")
def _count(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 2)
    ctr = ctx.named(p[0], "counter_array", ctx.counters)
    cp = ctx.ns.ref(ctr.packets, "Cp")
    cb = ctx.ns.ref(ctr.bytes, "Cb")
    setup, guard = _index_src(ctx, p[1])
    return [setup, f"if {guard}_i < {ctr.size}:", f"    {cp}[_i] += 1",
            f"    {cb}[_i] += F[{ctx.std.packet_length}]", "else:", "    STATS.counter_oob += 1"]


@primitive("execute_meter")
def _execute_meter(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 3)
    m = ctx.named(p[0], "meter_array", ctx.meters)
    mn = ctx.ns.ref(m, "M")
    idx, _ = ctx.expr(p[1])
    return [_store(ctx.dest(p[2]), (f"{mn}.execute({idx}, F[{ctx.std.packet_length}])", 2))]


def _fl_id(ctx: PrimCtx, p: list[Any], i: int) -> str:
    if len(p) <= i:
        return "None"
    n = unwrap(p[i])
    if isinstance(n, dict) and n.get("type") == "hexstr":
        return repr(parse_hexstr(n["value"], ctx.path))
    return "None"


@primitive("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress")
def _clone(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 1)
    sess, _ = ctx.expr(p[0])
    return [f"pkt.clone = ({sess}, {_fl_id(ctx, p, 1)})"]


@primitive("resubmit")
def _resubmit(ctx: PrimCtx, p: list[Any]) -> list[str]:
    return [f"pkt.resubmit = {_fl_id(ctx, p, 0)} or 0"]


@primitive("recirculate")
def _recirculate(ctx: PrimCtx, p: list[Any]) -> list[str]:
    return [f"pkt.recirc = {_fl_id(ctx, p, 0)} or 0"]


@primitive("modify_field_with_hash_based_offset")
def _hash(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 4)
    dst = ctx.dest(p[0])
    base, _ = ctx.expr(p[1])
    calc = ctx.named(p[2], "calculation", ctx.calculations)
    h = ctx.ns.ref(calc, "H")
    call = f"{h}(F, pkt.data[pkt.off:])" if needs_payload(calc) else f"{h}(F)"
    size, _ = ctx.expr(p[3])
    return [f"_s = {size}",
            _store(dst, (f"(({base}) + {call} % _s if _s else ({base}))", None))]


@primitive("modify_field_rng_uniform")
def _random(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 3)
    dst = ctx.dest(p[0])
    lo, _ = ctx.expr(p[1])
    hi, _ = ctx.expr(p[2])
    return [f"_lo = {lo}", f"_hi = {hi}",
            _store(dst, ("(RNG.randint(_lo, _hi) if _lo <= _hi else _lo)", None))]


@primitive("generate_digest")
def _digest(ctx: PrimCtx, p: list[Any]) -> list[str]:
    # As simple_switch: the call only records the learn list id (a later call replaces it);
    # the values are read at the end of ingress (netsum/switch/v1model.py).  The receiver is unused.
    _nparams(ctx, p, 2)
    n = unwrap(p[1])
    lid = parse_hexstr(n.get("value"), ctx.path) if isinstance(n, dict) and \
        n.get("type") == "hexstr" else None
    if lid is None or lid not in ctx.layout.learn_lists:
        raise cfg_error(ctx.path, f"generate_digest: unknown learn list {p[1]!r}")
    return [f"pkt.digest = {lid}"]


@primitive("truncate")
def _truncate(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 1)
    return [f"pkt.truncate = {ctx.expr(p[0])[0]}"]


def log_format(msg: str, nargs: int, path: str) -> str:
    """bmv2's log_msg format -> a Python `str.format` string.  Each unescaped `{...}` takes
    the next argument (printed in decimal); `\\{` and `\\}` are literal braces.  bmv2 exits
    the switch on a count mismatch or an unclosed `{`; we reject the program at load."""
    out: list[str] = []
    count = 0
    i = 0
    while i < len(msg):
        c = msg[i]
        if c == "\\" and msg[i + 1:i + 2] in ("{", "}"):
            out.append(msg[i + 1] * 2)
            i += 2
        elif c == "{":
            end = msg.find("}", i)
            if end < 0:
                raise cfg_error(path, f"log_msg: no matching '}}' in {msg!r}")
            out.append("{}")
            count += 1
            i = end + 1
        else:
            out.append("}}" if c == "}" else c)
            i += 1
    if count != nargs:
        raise cfg_error(path, f"log_msg: format {msg!r} expects {count} argument(s), "
                              f"got {nargs}")
    return "".join(out)


@primitive("log_msg")
def _log_msg(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 1)
    n = unwrap(p[0])
    if not (isinstance(n, dict) and n.get("type") == "string" and isinstance(n.get("value"), str)):
        raise cfg_error(ctx.path, f"log_msg: first parameter must be a string, got {p[0]!r}")
    args = []
    if len(p) > 1:
        lst = unwrap(p[1])
        vals = lst.get("value") if isinstance(lst, dict) and \
            lst.get("type") == "parameters_vector" else None
        if not isinstance(vals, list):
            raise cfg_error(ctx.path, f"log_msg: bad parameters_vector {p[1]!r}")
        args = [ctx.expr(el)[0] for el in vals]
    fmt = log_format(n["value"], len(args), ctx.path)
    return [f"if LOG_ON: LOG_MSG({fmt!r}, ({', '.join(args)}{',' if args else ''}))"]


@primitive("exit")
def _exit(ctx: PrimCtx, p: list[Any]) -> list[str]:
    # As bmv2's exit: the packet is marked and the rest of the action still runs; the
    # control stops after the action (tables and inlined calls test pkt.exited).
    return ["pkt.exited = True"]


@primitive("assert", "assume")
def _assert(ctx: PrimCtx, p: list[Any]) -> list[str]:
    _nparams(ctx, p, 1)
    return [f"if not {ctx.comp.cond(p[0])}:", f"    raise AssertFailure({ctx.path!r})"]


def _binop(op: str) -> Emitter:
    def emit(ctx: PrimCtx, p: list[Any]) -> list[str]:
        _nparams(ctx, p, 3)
        a, _ = ctx.expr(p[1])
        b, _ = ctx.expr(p[2])
        return [_store(ctx.dest(p[0]), (f"(({a}) {op} ({b}))", None))]
    return emit


for _name, _op in (("add", "+"), ("subtract", "-"), ("bit_and", "&"), ("bit_or", "|"),
                   ("bit_xor", "^"), ("shift_left", "<<"), ("shift_right", ">>")):
    register(_name, _binop(_op))


def _fieldop(op: str) -> Emitter:
    def emit(ctx: PrimCtx, p: list[Any]) -> list[str]:
        _nparams(ctx, p, 2)
        d = ctx.dest(p[0])
        b, _ = ctx.expr(p[1])
        return [_store(d, (f"(F[{d.index}] {op} ({b}))", None))]
    return emit


register("add_to_field", _fieldop("+"))
register("subtract_from_field", _fieldop("-"))
