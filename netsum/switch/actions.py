"""Compile BMv2 actions into Python functions `f(F, P, pkt)`.

Straight-line primitives become straight-line statements.  Control flow inside an action comes in
two encodings: the `"?"` operator (older p4c's Predication pass; handled by the expression
compiler) and `_jump_if_zero` / `_jump` with absolute targets (p4c >= Nov 2024).  For if/else
and early return p4c's jumps are structured and are turned back into nested `if` blocks; any
other pattern (`for` loops, whose `_jump` goes backward, `break`, `continue`) becomes a loop over
basic blocks with a program counter, guarded by LOOP_LIMIT block steps per action call.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netsum.switch.expressions import parse_hexstr, unwrap
from netsum.switch.layout import cfg_error, loading
# The emitter modules register into the primitive registry when imported.
from netsum.switch import headerops as _headerops, primitives as _primitives  # noqa: F401
from netsum.switch.primregistry import PrimCtx, emitter

__all__ = ["action_source", "block_source", "prim_lines", "LOOP_LIMIT", "Unstructured"]

#: Basic blocks one action call may run: a P4 loop whose bound the packet controls cannot spin
#: the switch (the packet is dropped, `stats.loop_limit`).
LOOP_LIMIT = 1 << 20


class Unstructured(Exception):
    """The jumps of an action do not nest as if/else: use the basic-block form."""


def _jump_target(ctx: PrimCtx, prim: dict[str, Any], i: int) -> int:
    params = prim.get("parameters") or []
    node = unwrap(params[-1]) if params else None
    if not isinstance(node, dict) or node.get("type") != "hexstr":
        raise cfg_error(f"{ctx.path}.primitives[{i}]", "jump target must be a hexstr")
    return parse_hexstr(node["value"], ctx.path)


def _emit_prim(ctx: PrimCtx, prim: Any, i: int) -> list[str]:
    base = ctx.path
    if not isinstance(prim, dict) or not isinstance(prim.get("op"), str):
        raise cfg_error(f"{base}.primitives[{i}]", f"bad primitive {prim!r}")
    op = prim["op"]
    emit = emitter(op)
    if emit is None:
        raise cfg_error(f"{base}.primitives[{i}]", f"primitive '{op}' is not supported")
    params = prim.get("parameters") or []
    if not isinstance(params, list):
        raise cfg_error(f"{base}.primitives[{i}]", "parameters must be a list")
    ctx.path = f"{base}.primitives[{i}] ('{op}')"
    ctx.comp.path = ctx.path
    try:
        with loading(ctx.path):
            return emit(ctx, params)
    finally:
        ctx.path = base
        ctx.comp.path = base


def prim_lines(ctx: PrimCtx, prims: Sequence[Any], lo: int, hi: int) -> list[str]:
    """Statements of the straight-line primitives lo..hi-1, exactly as emitted."""
    out: list[str] = []
    for i in range(lo, hi):
        out += _emit_prim(ctx, prims[i], i)
    return out


def block_source(ctx: PrimCtx, prims: Sequence[Any],
                 runs: dict[int, tuple[int, list[str]]] | None = None) -> list[str]:
    """Statements (unindented) for a primitive list, jumps structured into if/else.  `runs`
    maps the first primitive of a straight-line run to (end, statements replacing it)."""
    n = len(prims)
    runs = runs or {}

    def block(lo: int, hi: int) -> list[str]:
        out: list[str] = []
        i = lo
        while i < hi:
            run = runs.get(i)
            if run is not None and run[0] <= hi:
                out += run[1]
                i = run[0]
                continue
            prim = prims[i]
            op = prim.get("op") if isinstance(prim, dict) else None
            if op == "_jump_if_zero":
                t = _jump_target(ctx, prim, i)
                cond = ctx.comp.cond((prim.get("parameters") or [None])[0])
                if t <= i or (t > hi and t != n):
                    raise Unstructured()
                if t > hi:                  # early return when the condition is false
                    out += [f"if not ({cond}):", "    return"]
                    i += 1
                    continue
                then_end, else_end = t, t
                last = prims[t - 1] if t - 1 > i else None
                if isinstance(last, dict) and last.get("op") == "_jump":
                    e = _jump_target(ctx, last, t - 1)
                    if t <= e <= hi:
                        then_end, else_end = t - 1, e
                    elif e == n:
                        then_end = t - 1     # `return` at the end of the then-branch
                        body = block(i + 1, then_end) + ["return"]
                        out += [f"if {cond}:"] + ["    " + s for s in body]
                        i = t
                        continue
                    else:
                        raise Unstructured()
                body = block(i + 1, then_end) or ["pass"]
                out += [f"if {cond}:"] + ["    " + s for s in body]
                if else_end > then_end + 1 or (else_end > t):
                    ebody = block(t, else_end) or ["pass"]
                    out += ["else:"] + ["    " + s for s in ebody]
                i = else_end
                continue
            if op == "_jump":
                t = _jump_target(ctx, prim, i)
                if t == n:
                    out.append("return")
                elif t != i + 1:
                    raise Unstructured()
                i += 1
                continue
            out += _emit_prim(ctx, prim, i)
            i += 1
        return out

    return block(0, n)


def flat_source(ctx: PrimCtx, prims: Sequence[Any],
                runs: dict[int, tuple[int, list[str]]] | None = None) -> list[str]:
    """Any jump pattern: basic blocks (split at jump targets and after jumps) in a loop on a
    program counter `_pc`; `_pc == len(prims)` ends the action.  A lane run (`runs`, as in
    block_source) never holds a jump or a jump target, so it lies inside one block."""
    runs = runs or {}
    n = len(prims)
    targets: dict[int, int] = {}
    leaders = {0}
    for i, prim in enumerate(prims):
        op = prim.get("op") if isinstance(prim, dict) else None
        if op in ("_jump", "_jump_if_zero"):
            t = _jump_target(ctx, prim, i)
            if not 0 <= t <= n:
                raise cfg_error(f"{ctx.path}.primitives[{i}]", f"jump target {t} outside "
                                f"0..{n}")
            targets[i] = t
            leaders.update((t, i + 1))
    starts = sorted(x for x in leaders if x < n)
    out = ["_pc = 0", "_steps = 0", "while True:", "    _steps += 1",
           f"    if _steps > {LOOP_LIMIT}:", f"        raise ActionLoopLimit({ctx.path!r})"]
    for k, lo in enumerate(starts):
        hi = starts[k + 1] if k + 1 < len(starts) else n
        body: list[str] = []
        nxt = f"_pc = {hi}"
        i = lo
        while i < hi:
            run = runs.get(i)
            if run is not None and run[0] <= hi:
                body += run[1]
                i = run[0]
                continue
            prim = prims[i]
            op = prim.get("op") if isinstance(prim, dict) else None
            i += 1
            if op == "_jump":
                nxt = f"_pc = {targets[i - 1]}"
            elif op == "_jump_if_zero":
                cond = ctx.comp.cond((prim.get("parameters") or [None])[0])
                nxt = f"_pc = {i} if ({cond}) else {targets[i - 1]}"
            else:
                body += _emit_prim(ctx, prim, i - 1)
        out.append(f"    {'if' if k == 0 else 'elif'} _pc == {lo}:")
        out += [f"        {line}" for line in body + [nxt]]
    out += ["    else:" if starts else "    if True:", "        return"]
    return out


def action_source(ctx: PrimCtx, fname: str, prims: Sequence[Any],
                  runs: dict[int, tuple[int, list[str]]] | None = None) -> str:
    """The Python source of one action's function `fname(F, P, pkt)` over its primitives
    (netsum.switch.program.Action.primitives); `runs` replaces the register lane runs."""
    try:
        body = block_source(ctx, prims, runs) or ["pass"]
    except Unstructured:
        ctx.comp = type(ctx.comp)(ctx.comp.layout, ctx.comp.path, ctx.comp.params,
                                  ctx.comp.lookahead)
        body = flat_source(ctx, prims, runs)
    return f"def {fname}(F, P, pkt):\n" + "".join(f"    {s}\n" for s in body)

