"""Compile BMv2 actions into Python functions `f(F, P, pkt)`.

Straight-line primitives become straight-line statements.  Control flow inside an action comes in
two encodings: the `"?"` operator (older p4c's Predication pass; handled by the expression
compiler) and `_jump_if_zero` / `_jump` with absolute targets (p4c >= Nov 2024).  p4c emits the
jumps only for structured if/else and early return, so they are turned back into nested `if`
blocks; any other jump pattern is rejected at load time.
"""
from __future__ import annotations

from typing import Any

from switch.expressions import parse_hexstr, unwrap
from switch.layout import cfg_error
from switch.primitives import PRIMITIVES, PrimCtx

__all__ = ["action_source", "block_source"]


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
    emitter = PRIMITIVES.get(op)
    if emitter is None:
        raise cfg_error(f"{base}.primitives[{i}]", f"primitive '{op}' is not supported")
    params = prim.get("parameters") or []
    if not isinstance(params, list):
        raise cfg_error(f"{base}.primitives[{i}]", "parameters must be a list")
    ctx.path = f"{base}.primitives[{i}] ('{op}')"
    ctx.comp.path = ctx.path
    try:
        return emitter(ctx, params)
    finally:
        ctx.path = base
        ctx.comp.path = base


def block_source(ctx: PrimCtx, prims: list[Any]) -> list[str]:
    """Statements (unindented) for a primitive list, jumps structured into if/else."""
    n = len(prims)

    def block(lo: int, hi: int) -> list[str]:
        out: list[str] = []
        i = lo
        while i < hi:
            prim = prims[i]
            op = prim.get("op") if isinstance(prim, dict) else None
            if op == "_jump_if_zero":
                t = _jump_target(ctx, prim, i)
                cond = ctx.comp.cond((prim.get("parameters") or [None])[0])
                if t <= i or (t > hi and t != n):
                    raise cfg_error(f"{ctx.path}.primitives[{i}]",
                                    f"unstructured jump to {t} is not supported")
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
                        raise cfg_error(f"{ctx.path}.primitives[{t - 1}]",
                                        f"unstructured jump to {e} is not supported")
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
                    raise cfg_error(f"{ctx.path}.primitives[{i}]",
                                    f"unstructured jump to {t} is not supported")
                i += 1
                continue
            out += _emit_prim(ctx, prim, i)
            i += 1
        return out

    return block(0, n)


def action_source(ctx: PrimCtx, fname: str, action: dict[str, Any]) -> str:
    prims = action.get("primitives") or []
    if not isinstance(prims, list):
        raise cfg_error(ctx.path, "primitives must be a list")
    body = block_source(ctx, prims) or ["pass"]
    return f"def {fname}(F, P, pkt):\n" + "".join(f"    {s}\n" for s in body)

