"""Generic traversal of the AST: the Visitor and Transform every front-end pass builds on.

The AST (:mod:`ast`) is frozen dataclasses whose children are nodes, tuples of nodes or
scalars, so one walk over ``dataclasses.fields`` reaches everything; a pass says only what it
does at the nodes it cares about instead of writing out a walk per node type.

* :func:`nodes` -- the Visitor: every node under a root, top-down, in field order.
* :func:`rebuild` -- the Transform: a callback sees every node top-down and may replace it;
  unchanged subtrees keep their identity (so "did anything change" is ``new is old``).
* :func:`statements` and :func:`nested` -- the statements directly inside a statement
  (blocks, branches, switch cases, loops), and all of them at any depth: for passes that
  reason about control flow rather than expressions; :func:`flat` opens blocks in a
  sequence.
* :func:`identifiers` -- every name declared or written in a program (fresh-name sources).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from . import ast as A

__all__ = ["fields_of", "nodes", "rebuild", "statements", "nested", "flat",
           "identifiers"]

_FIELDS: dict[type, tuple[str, ...]] = {}


def fields_of(node: A.Node) -> tuple[str, ...]:
    """The names of node's fields that may hold children (every field but ``pos``)."""
    cls = type(node)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(node)
                                     if f.name != "pos")
    return names


def nodes(root: Any, annotations: bool = False) -> Iterator[A.Node]:
    """Every node in root (a node or a tuple of them), root included, each before its
    children; siblings come last first (callers collect sets, counts or ``any``, or rely on
    this order: the key assignments ExpandStackIndex emits follow it).  An annotation is
    yielded but its arguments are not entered unless ``annotations`` (they are not
    expressions of the program)."""
    stack: list[Any] = [root]
    while stack:
        x = stack.pop()
        if type(x) is tuple:
            stack.extend(x)
        elif isinstance(x, A.Node):
            yield x
            if annotations or not isinstance(x, A.Annotation):
                stack.extend(v for f in fields_of(x)
                             if isinstance(v := getattr(x, f), (A.Node, tuple)))


def rebuild(node: Any, visit: Callable[[A.Node], A.Node | None]) -> Any:
    """node with ``visit`` applied top-down (a node it returns replaces the subtree, None
    descends); unchanged subtrees keep their identity."""
    if isinstance(node, tuple):
        items = tuple(rebuild(i, visit) for i in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    if not isinstance(node, A.Node):
        return node
    got = visit(node)
    if got is not None:
        return got
    changes = {}
    for f in fields_of(node):
        old = getattr(node, f)
        if old is None or isinstance(old, (str, int, bool)):
            continue
        new = rebuild(old, visit)
        if new is not old:
            changes[f] = new
    return dataclasses.replace(node, **changes) if changes else node


def statements(s: A.Stmt) -> Iterator[A.Stmt]:
    """The statements directly inside s (a loop's init, update and body included)."""
    match s:
        case A.Block(stmts=ss):
            yield from ss
        case A.If(then=t, other=o):
            yield t
            if o is not None:
                yield o
        case A.Switch(cases=cs):
            for c in cs:
                if c.body is not None:
                    yield c.body
        case A.For(init=i, update=u, body=b):
            yield from i
            yield from u
            yield b
        case A.ForIn(body=b):
            yield b


def flat(stmts: tuple[A.Stmt, ...]) -> list[A.Stmt]:
    """stmts with every block opened: its statements in its place, at any depth (a block
    only sequences statements once MoveDeclarations has run)."""
    out: list[A.Stmt] = []
    for s in stmts:
        if isinstance(s, A.Block):
            out += flat(s.stmts)
        else:
            out.append(s)
    return out


def nested(s: A.Stmt) -> Iterator[A.Stmt]:
    """s and every statement inside it, each before the statements inside it."""
    stack: list[A.Stmt] = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(tuple(statements(x))))


def identifiers(prog: A.Program) -> set[str]:
    """Every declared name and every name written anywhere in the program."""
    out: set[str] = set()
    stack: list[Any] = [prog]
    named = (A.Decl, A.Name, A.TypeName, A.VarDecl)
    pop, push, node, add = stack.pop, stack.extend, A.Node, out.add
    while stack:
        x = pop()
        if type(x) is tuple:
            push(x)
        elif isinstance(x, node):
            if isinstance(x, named):
                add(x.name)
            for f in fields_of(x):
                v = getattr(x, f)
                if v is not None and type(v) is not str and type(v) is not int and \
                        type(v) is not bool:
                    stack.append(v)
    return out
