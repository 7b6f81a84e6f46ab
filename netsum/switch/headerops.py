"""Primitives on whole headers, header unions and stacks of either (bmv2's core primitives);
their emitters register into netsum.switch.primregistry, as netsum.switch.primitives' do.

A header operand may be chosen per packet: `hs[i]` (`dereference_header_stack`) or a member
of `us[i]` (`access_union_header` of `dereference_union_stack`).  Such an operation is emitted
once per candidate under `if i == k:` branches; an index outside the stack takes no branch, so
the operation does nothing (P4_16 leaves writes out of bounds undefined; bmv2 would abort).

Union rule (P4_16 §8.20, bmv2's HeaderUnion): a member that becomes valid makes the other
members invalid.  Stack rule (push_front/pop_front, P4_16 §8.18, bmv2's StackP4_16): elements
move by n, the ones shifted in are invalid, the next index moves by n within 0..size; for a
stack of unions every member of a shifted-in union is invalid (bmv2 leaves those unions as the
rotation left them, which the spec does not allow).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netsum.switch.expressions import HeaderRef, parse_hexstr, unwrap
from netsum.switch.layout import HeaderInfo, cfg_error
from netsum.switch.primregistry import PrimCtx, primitive, register

__all__ = ["each_header", "header_copy"]


def each_header(ctx: PrimCtx, ref: HeaderRef, emit: Callable[[str], list[str]]) -> list[str]:
    """`emit(name)` for the header (or union) `ref` names; per-packet choices branch."""
    if ref.choice is None:
        return emit(ref.names[0])
    cond, t = ref.choice
    out = [f"if {cond}:"]
    for k, name in enumerate(ref.names):
        out.append(f"    {'if' if k == 0 else 'elif'} {t} == {k}:")
        out += ["        " + line for line in (emit(name) or ["pass"])]
    return out


def _siblings_off(ctx: PrimCtx, name: str, cond: str | None = None) -> list[str]:
    sib = ctx.layout.union_siblings(name)
    if not sib:
        return []
    stores = [f"F[{s}] = 0" for s in sib]
    return stores if cond is None else [f"if {cond}:"] + ["    " + s for s in stores]


def header_copy(ctx: PrimCtx, dst: HeaderInfo, src: HeaderInfo) -> list[str]:
    """dst = src: values (a varbit field's width too), validity, and the union rule."""
    if [(s.width, s.signed) for _, s in dst.fields] != \
            [(s.width, s.signed) for _, s in src.fields] or dst.varbit != src.varbit:
        raise cfg_error(ctx.path, f"assign_header between '{dst.name}' and '{src.name}' of "
                                  "different types")
    out = []
    if dst.span:
        a, b = dst.first, src.first
        out.append(f"F[{a}:{a + dst.span}] = F[{b}:{b + src.span}]")
    out.append(f"F[{dst.valid}] = F[{src.valid}]")
    return out + _siblings_off(ctx, dst.name, f"F[{dst.valid}]")


@primitive("assign_header", "copy_header")
def _assign_header(ctx: PrimCtx, p: list[Any]) -> list[str]:
    if len(p) < 2:
        raise cfg_error(ctx.path, f"expected 2 parameter(s), got {len(p)}")
    lay = ctx.layout
    dst, src = ctx.comp.header_ref(p[0]), ctx.comp.header_ref(p[1])
    return each_header(ctx, dst, lambda a: each_header(
        ctx, src, lambda b: header_copy(ctx, lay.headers[a], lay.headers[b])))


def _union_copy(ctx: PrimCtx, a: str, b: str) -> list[str]:
    ma, mb = ctx.layout.unions[a], ctx.layout.unions[b]
    if len(ma) != len(mb):
        raise cfg_error(ctx.path, f"assign_union between '{a}' and '{b}' of different types")
    out = []
    for x, y in zip(ma, mb):
        out += header_copy(ctx, ctx.layout.headers[x], ctx.layout.headers[y])
    return out


@primitive("assign_union")
def _assign_union(ctx: PrimCtx, p: list[Any]) -> list[str]:
    if len(p) < 2:
        raise cfg_error(ctx.path, f"expected 2 parameter(s), got {len(p)}")
    dst, src = ctx.comp.union_ref(p[0]), ctx.comp.union_ref(p[1])
    return each_header(ctx, dst, lambda a: each_header(
        ctx, src, lambda b: _union_copy(ctx, a, b)))


def _stack_copy(kind: str) -> Callable[[PrimCtx, list[Any]], list[str]]:
    """assign_header_stack / assign_union_stack: the next index and every element."""
    def emit(ctx: PrimCtx, p: list[Any]) -> list[str]:
        if len(p) < 2:
            raise cfg_error(ctx.path, f"expected 2 parameter(s), got {len(p)}")
        lay = ctx.layout
        table: dict[str, Any] = lay.stacks if kind == "header_stack" else lay.union_stacks

        def find(x: Any) -> Any:
            n = unwrap(x)
            return table.get(str(n.get("value"))) if isinstance(n, dict) else None
        a, b = find(p[0]), find(p[1])
        if a is None or b is None:
            raise cfg_error(ctx.path, f"assign of {kind}s: unknown {kind} in {p[:2]!r}")
        ea, eb = (a.headers, b.headers) if kind == "header_stack" else (a.unions, b.unions)
        if len(ea) != len(eb):
            raise cfg_error(ctx.path, f"assign of {kind}s: '{a.name}' and '{b.name}' differ "
                                      "in size")
        out = [f"F[{a.next_slot}] = F[{b.next_slot}]"]
        for x, y in zip(ea, eb):
            out += header_copy(ctx, lay.headers[x], lay.headers[y]) if \
                kind == "header_stack" else _union_copy(ctx, x, y)
        return out
    return emit


register("assign_header_stack", _stack_copy("header_stack"))
register("assign_union_stack", _stack_copy("header_union_stack"))


def _shift_stack(ctx: PrimCtx, p: list[Any], push: bool) -> list[str]:
    """push_front(n) / pop_front(n) on a header stack or a header union stack."""
    if len(p) < 2:
        raise cfg_error(ctx.path, f"expected 2 parameter(s), got {len(p)}")
    n0 = unwrap(p[0])
    lay = ctx.layout
    st: Any
    if isinstance(n0, dict) and n0.get("type") == "header_union_stack":
        st = lay.union_stacks.get(str(n0.get("value")))
        elements = [[lay.headers[m] for m in lay.unions[u]] for u in st.unions] if st else []
    else:
        st = lay.stacks.get(str(n0.get("value"))) if isinstance(n0, dict) else None
        elements = [[lay.headers[h]] for h in st.headers] if st else []
    if st is None:
        raise cfg_error(ctx.path, f"unknown header stack in {p[0]!r}")
    cnt = unwrap(p[1])
    if not (isinstance(cnt, dict) and cnt.get("type") == "hexstr"):
        raise cfg_error(ctx.path, f"push/pop count must be a constant, got {p[1]!r}")
    size = len(elements)
    # counts past the stack size act like the size (everything shifted out), as in bmv2
    n = min(parse_hexstr(cnt.get("value"), ctx.path), size)
    if n < 0:
        raise cfg_error(ctx.path, f"push/pop count {cnt.get('value')!r} is negative")
    out = []
    order = range(size - 1, -1, -1) if push else range(size)
    for i in order:
        src = i - n if push else i + n
        for k, h in enumerate(elements[i]):
            if 0 <= src < size:
                g = elements[src][k]
                if h.span:
                    out.append(f"F[{h.first}:{h.first + h.span}] = "
                               f"F[{g.first}:{g.first + g.span}]")
                out.append(f"F[{h.valid}] = F[{g.valid}]")
            else:
                out.append(f"F[{h.valid}] = 0")
    nxt = st.next_slot
    out.append(f"F[{nxt}] = min(F[{nxt}] + {n}, {size})" if push else
               f"F[{nxt}] = max(F[{nxt}] - {n}, 0)")
    return out


register("push", lambda ctx, p: _shift_stack(ctx, p, True))
register("pop", lambda ctx, p: _shift_stack(ctx, p, False))


def _set_valid(ctx: PrimCtx, name: str) -> list[str]:
    h = ctx.layout.headers[name]
    # bmv2 zeroes the fields of a header that becomes valid (P4 leaves them unspecified);
    # a varbit field becomes empty.
    zero = [f"    F[{h.first}:{h.first + h.span}] = {[0] * h.span!r}"] if h.span else []
    return ([f"if not F[{h.valid}]:"] + zero + [f"    F[{h.valid}] = 1"]
            + _siblings_off(ctx, name))


@primitive("add_header")
def _add_header(ctx: PrimCtx, p: list[Any]) -> list[str]:
    if not p:
        raise cfg_error(ctx.path, "expected 1 parameter(s), got 0")
    return each_header(ctx, ctx.comp.header_ref(p[0]), lambda h: _set_valid(ctx, h))


@primitive("remove_header")
def _remove_header(ctx: PrimCtx, p: list[Any]) -> list[str]:
    if not p:
        raise cfg_error(ctx.path, "expected 1 parameter(s), got 0")
    return each_header(ctx, ctx.comp.header_ref(p[0]),
                       lambda h: [f"F[{ctx.layout.headers[h].valid}] = 0"])


@primitive("assign_VL")
def _assign_vl(ctx: PrimCtx, p: list[Any]) -> list[str]:
    """A varbit field takes the value and the width of another."""
    if len(p) < 2:
        raise cfg_error(ctx.path, f"expected 2 parameter(s), got {len(p)}")
    dst, src = ctx.vl_field(p[0]), ctx.vl_field(p[1])
    return [f"F[{dst[0]}] = F[{src[0]}]", f"F[{dst[1]}] = F[{src[1]}]"]
