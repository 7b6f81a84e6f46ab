"""Load-time rewrite of generated action code: one bounds check for a run of array accesses.

The primitive emitters (`netsum.switch.primitives`) guard every register/counter access on its own:

    _i = <index>
    if _i < SIZE:
        <access using _i>
    else:
        STATS.register_oob += 1

An action doing K read-add-writes on K arrays with the same index pays 2K index evaluations and
2K compares.  `fuse_guards` turns a run of statements holding several such guarded accesses into

    _g0 = <index0>; _g1 = <index1> ...
    if <guard0 on _g0> and <guard1 on _g1> ...:
        <the run, each access unguarded on its _gN>
    else:
        <the run exactly as before>

which is the same program whenever every hoisted index has, at its access, the value it had at
the top of the run.  That holds when (1) an index reads only constants, action parameters `P[n]`
and fields `F[n]`, with operators that cannot raise (so evaluating it early changes nothing but
its timing), and (2) no statement of the run before the access may write a field the index reads.
A run ends just before an access that would break (2); the next run starts there.  The else
branch keeps the original statements, so out-of-range behaviour (skipped access, counted) is
untouched.  The rewrite works on the Python AST of each generated function, so it is a property
of the generated code, not of any one P4 program.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

__all__ = ["fuse_guards", "optimize_source"]

_IDX = "_i"                 # the index temporary of the emitters (switch.primitives)
_PREFIX = "_g"              # hoisted indices; no emitter uses this prefix
_ALL = None                 # "may write any field"

# Operators whose evaluation on ints never raises (no shifts by a packet value, no division).
_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_SAFE_UNARY = (ast.Invert, ast.USub, ast.UAdd)
_MAX_CONST_SHIFT = 8192     # larger literal shifts are not emitted (switch.expressions)


@dataclass(slots=True)
class _Guarded:
    """One emitted `_i = idx` + `if test: body else: orelse` pair."""
    assign: ast.Assign
    test_if: ast.If
    index: ast.expr
    deps: frozenset[int]


def _const_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _pure_index(node: ast.expr, deps: set[int]) -> bool:
    """True when `node` may be evaluated early: ints from F/P/constants, non-raising ops.
    Collects the field slots it reads into `deps`."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
            node.value.id in ("F", "P"):
        k = _const_int(node.slice)
        if k is None:
            return False
        if node.value.id == "F":
            deps.add(k)
        return True
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, (ast.RShift, ast.LShift)):
            k = _const_int(node.right)
            return k is not None and 0 <= k < _MAX_CONST_SHIFT and _pure_index(node.left, deps)
        return isinstance(node.op, _SAFE_BINOPS) and _pure_index(node.left, deps) and \
            _pure_index(node.right, deps)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, _SAFE_UNARY) and _pure_index(node.operand, deps)
    return False


def _field_writes(stmts: list[ast.stmt]) -> set[int] | None:
    """Field slots the statements may write; None (= _ALL) when that cannot be bounded."""
    out: set[int] = set()
    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and isinstance(node.value, ast.Name) and node.value.id == "F":
                if isinstance(node.slice, ast.Slice):
                    lo, hi = node.slice.lower, node.slice.upper
                    a = _const_int(lo) if lo is not None else None
                    b = _const_int(hi) if hi is not None else None
                    if a is None or b is None or node.slice.step is not None:
                        return _ALL
                    out.update(range(a, b))
                else:
                    k = _const_int(node.slice)
                    if k is None:
                        return _ALL
                    out.add(k)
            elif isinstance(node, ast.Call):
                # A callee handed F itself (hash calculations, nested actions) might write it.
                if any(isinstance(a, ast.Name) and a.id == "F" for a in node.args):
                    return _ALL
            elif isinstance(node, ast.Name) and node.id == "F" and \
                    isinstance(node.ctx, ast.Store):
                return _ALL
    return out


def _reads_idx(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == _IDX for n in ast.walk(node))


def _match(stmts: list[ast.stmt], i: int) -> _Guarded | None:
    if i + 1 >= len(stmts):
        return None
    a, b = stmts[i], stmts[i + 1]
    if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and
            isinstance(a.targets[0], ast.Name) and a.targets[0].id == _IDX):
        return None
    if not (isinstance(b, ast.If) and b.orelse and isinstance(b.test, ast.Compare)):
        return None
    # The test must mention only _i and constants, so it can be moved to the top of the run.
    for n in ast.walk(b.test):
        if isinstance(n, ast.Name) and n.id != _IDX:
            return None
        if isinstance(n, (ast.Call, ast.Subscript, ast.Attribute, ast.NamedExpr)):
            return None
    if _reads_idx(a.value) or any(_assigns_idx(s) for s in b.body + b.orelse):
        return None
    deps: set[int] = set()
    if not _pure_index(a.value, deps):
        return None
    return _Guarded(a, b, a.value, frozenset(deps))


def _assigns_idx(stmt: ast.stmt) -> bool:
    return any(isinstance(n, ast.Name) and n.id == _IDX and isinstance(n.ctx, ast.Store)
               for n in ast.walk(stmt))


class _Rename(ast.NodeTransformer):
    def __init__(self, new: str) -> None:
        self.new = new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == _IDX:
            return ast.copy_location(ast.Name(self.new, node.ctx), node)
        return node


class _Fuser:
    def __init__(self) -> None:
        self.count = 0

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """Rewrite one statement list (and, first, the blocks nested in it)."""
        for st in stmts:
            if isinstance(st, ast.If):
                st.body = self.block(st.body)
                st.orelse = self.block(st.orelse)
        out: list[ast.stmt] = []
        run: list[ast.stmt | _Guarded] = []
        writes: list[set[int] | None] = []       # per run item: fields it may write
        i = 0
        while i < len(stmts):
            g = _match(stmts, i)
            if g is not None:
                # The run restarts just after the last item that may write this index's
                # fields (p4c often computes an index into a temporary right before use).
                last = max((k for k, w in enumerate(writes) if w is _ALL or g.deps & w),
                           default=-1)
                if last >= 0:
                    out += self._emit(run[:last + 1])
                    run, writes = run[last + 1:], writes[last + 1:]
                run.append(g)
                writes.append(_field_writes(g.test_if.body))
                i += 2
                continue
            st = stmts[i]
            i += 1
            if _reads_idx(st):
                # Something outside the emitters' pattern uses _i: leave the run alone.
                out += self._emit(run) + [st]
                run, writes = [], []
                continue
            run.append(st)
            writes.append(_field_writes([st]))
        return out + self._emit(run)

    def _emit(self, run: list[ast.stmt | _Guarded]) -> list[ast.stmt]:
        original: list[ast.stmt] = []
        for item in run:
            original += [item.assign, item.test_if] if isinstance(item, _Guarded) else [item]
        guarded = [g for g in run if isinstance(g, _Guarded)]
        if len(guarded) < 2:
            return original
        names: dict[str, str] = {}         # dump of index -> hoisted name
        setup: list[ast.stmt] = []
        tests: dict[str, ast.expr] = {}
        fast: list[ast.stmt] = []
        for item in run:
            if not isinstance(item, _Guarded):
                # Shared with the else branch: nothing below mutates it, and the tree is only
                # unparsed to source, so one node in two places is fine.
                fast.append(item)
                continue
            key = ast.dump(item.index)
            name = names.get(key)
            if name is None:
                name = names[key] = f"{_PREFIX}{self.count}"
                self.count += 1
                setup.append(ast.Assign([ast.Name(name, ast.Store())], item.index))
            test = _Rename(name).visit(copy.deepcopy(item.test_if.test))
            tests.setdefault(ast.dump(test), test)
            fast += [_Rename(name).visit(copy.deepcopy(s)) for s in item.test_if.body]
        # Code after the run sees _i as the last access left it (the emitters never read it
        # there, but the rewrite does not rely on that).
        fast.append(ast.Assign([ast.Name(_IDX, ast.Store())],
                               ast.Name(names[ast.dump(guarded[-1].index)], ast.Load())))
        cond: ast.expr = next(iter(tests.values())) if len(tests) == 1 else \
            ast.BoolOp(ast.And(), list(tests.values()))
        return setup + [ast.If(cond, fast, original)]


def fuse_guards(fn: ast.FunctionDef) -> None:
    """Rewrite the body of one generated function in place."""
    fn.body = _Fuser().block(fn.body) or [ast.Pass()]


def optimize_source(src: str) -> str:
    """Apply the rewrites to every top-level function of a generated module."""
    mod = ast.parse(src)
    for node in mod.body:
        if isinstance(node, ast.FunctionDef):
            fuse_guards(node)
    return ast.unparse(ast.fix_missing_locations(mod))
