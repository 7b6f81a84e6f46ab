"""BindPackageConstants: the constructor parameters of a parser or control instantiated once,
as an argument of the top-level package (`V1Switch(MyParser(false), ...) main;`), become
constants of that block (p4c's front end specializes the block the same way: in
parser-unroll-t1-cond `transition select(test)` with `test = false` is `transition accept`).

Only `bool`, `bit<N>` and `int<N>` parameters are bound; a block with any other constructor
parameter, or instantiated more than once, is left as it is (later passes report it).  A
sub-control's constructor parameters are bound where it is applied (lower_control).
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics

__all__ = ["BindPackageConstants"]

_VALUE_TYPES = (A.BoolType, A.BitType, A.IntType)


class BindPackageConstants:
    """Pass: Program → Program whose package-argument blocks take no constructor arguments."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        blocks = {d.name: d for d in prog.decls
                  if isinstance(d, (A.ParserDecl, A.ControlDecl)) and d.ctor_params}
        if not blocks:
            return prog
        uses: dict[str, int] = {}
        for d in prog.decls:
            for n in _constructed(d):
                uses[n] = uses.get(n, 0) + 1
        bound: dict[str, tuple[A.Arg, ...]] = {}
        out: list[A.Node] = []
        for d in prog.decls:
            if isinstance(d, A.Instantiation):
                args = []
                for a in d.args:
                    v = a.value
                    if isinstance(v, A.Call) and isinstance(v.func, A.Name) and \
                            v.func.name in blocks and uses.get(v.func.name) == 1 and \
                            _bindable(blocks[v.func.name].ctor_params, v.args):
                        bound[v.func.name] = v.args
                        a = dataclasses.replace(a, value=dataclasses.replace(v, args=()))
                    args.append(a)
                d = dataclasses.replace(d, args=tuple(args))
            out.append(d)
        return A.Program(prog.pos, tuple(_specialize(d, bound.get(d.name)) if
                                         isinstance(d, (A.ParserDecl, A.ControlDecl)) else d
                                         for d in out))


def _constructed(d: A.Node) -> list[str]:
    """Names of blocks that declaration d instantiates (an instance or a package argument)."""
    out: list[str] = []
    if isinstance(d, A.Instantiation):
        if isinstance(d.type, A.TypeName):
            out.append(d.type.name)
        for a in d.args:
            if isinstance(a.value, A.Call) and isinstance(a.value.func, A.Name):
                out.append(a.value.func.name)
    elif isinstance(d, (A.ParserDecl, A.ControlDecl)):
        for x in d.locals:
            out += _constructed(x)
    return out


def _bindable(params: tuple[A.Param, ...], args: tuple[A.Arg, ...]) -> bool:
    return len(params) == len(args) and not any(a.name for a in args) and \
        all(isinstance(p.type, _VALUE_TYPES) and a.value is not None
            for p, a in zip(params, args))


def _specialize(d: A.ParserDecl | A.ControlDecl, args: tuple[A.Arg, ...] | None) -> A.Node:
    if args is None:
        return d
    consts = tuple(A.ConstDecl(p.pos, (), p.name, p.type, a.value)
                   for p, a in zip(d.ctor_params, args) if a.value is not None)
    return dataclasses.replace(d, ctor_params=(), locals=consts + d.locals)
