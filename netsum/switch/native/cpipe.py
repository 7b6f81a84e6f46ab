"""Controls, tables and the v1model life cycle -> C, and the whole program's C source.

A control is one C function: every table and conditional is a label, `goto` is the pipeline
loop.  A table label builds the key, looks it up in the context's copy of the entries
(`lookup`, runtime.c), runs the action of the hit or of the default and goes to the next
node the reference would (per action, or `__HIT__`/`__MISS__`).  The life cycle follows
netsum/switch/v1model.py for what the generator accepts: parse, verify checksums, ingress, digest,
multicast (PRE) / drop / unicast, egress per copy, update checksums, deparse, payload,
truncate.  Clones, resubmit, recirculate, meters and direct counters decline the program.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from netsum.match import MatchKind
from netsum.switch.lanes import LanePlan
from netsum.switch.layout import Layout
from netsum.switch.native.cexpr import Decline, MAX_NATIVE_WIDTH, hexval
from netsum.switch.native.cgen import CalcInfo, Gen, RegInfo
from netsum.switch.native.cparse import calculation_c, deparser_c, parser_c
from netsum.switch.native.croll import roll
from netsum.switch.native.cvec import VEC_PRELUDE, VecLayout
from netsum.switch.primregistry import StdFields
from netsum.switch.program import Action, Checksum, Control, Deparser, Parser, TableDef

__all__ = ["TableInfo", "Program", "generate"]

REPLICATION = 5          # instance_type of a multicast copy (switch.v1model)
_UNSUPPORTED = ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress", "resubmit",
                "recirculate", "execute_meter", "assign_VL", "assign_union_stack",
                "extract_VL")


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    index: int
    kind: int                       # 0 keyless, 1 exact, 2 lpm, 3 generic (runtime.c)
    nk: int
    np: int
    actions: tuple[str, ...]        # the table's action list (entry words hold the position)

    @property
    def stride(self) -> int:
        return (4 * self.nk if self.kind == 3 else self.nk) + 1 + self.np


@dataclass(frozen=True, slots=True)
class Program:
    source: str                     # the whole C module but its name
    regs: dict[str, RegInfo]
    ctrs: dict[str, int]
    tables: dict[str, TableInfo]
    #: register families a lane loop addresses as one row of consecutive columns
    lane_regs: tuple[tuple[str, ...], ...] = ()


def _kind(match_types: list[MatchKind | None]) -> int:
    """The C lookup of a table whose key fields have these kinds (None: P4_14's `valid`,
    looked up as the generic kind): 0 keyless, 1 exact, 2 exact + one lpm, 3 generic."""
    if not match_types:
        return 0
    if all(m is MatchKind.EXACT for m in match_types):
        return 1
    if match_types.count(MatchKind.LPM) == 1 and \
            all(m in (MatchKind.EXACT, MatchKind.LPM) for m in match_types):
        return 2
    return 3


def _ops(node: Any) -> set[str]:
    """Every `op` named in a JSON subtree (primitives, parser operations, expressions)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if isinstance(n.get("op"), str):
                out.add(n["op"])
            stack += n.values()
        elif isinstance(n, (list, tuple)):
            stack += n
    return out


def _precheck(j: dict[str, Any], actions: tuple[Action, ...], parser: Parser,
              controls: dict[str, Control]) -> None:
    """Constructs declined as a whole, named before anything is generated."""
    used = _ops([a.primitives for a in actions]) | _ops([st.ops for st in parser.states])
    for op in _UNSUPPORTED:
        if op in used:
            raise Decline(f"uses '{op}', which the native backend does not run")
    if j.get("header_union_stacks"):
        raise Decline("header union stacks")
    for ctl in controls.values():
        for t in ctl.tables:
            if t.with_counters or t.direct_meters:
                raise Decline(f"table '{t.name}' has direct counters or meters")
            if t.support_timeout:
                # Ageing records each hit on the Python record (Table.sweep reads it).
                raise Decline(f"table '{t.name}' supports idle timeouts")
            if t.type != "simple":
                raise Decline(f"table '{t.name}' uses an action profile")


class _Controls:
    def __init__(self, g: Gen, actions: tuple[Action, ...], aid_fn: dict[int, str],
                 params: dict[int, int]) -> None:
        self.g = g
        self.aid_fn = aid_fn            # action id -> C function
        self.params = params            # action id -> parameter count
        self.names = {a.name: a.id for a in reversed(actions)}   # the first of a name
        self.tables: dict[str, TableInfo] = {}

    def table_info(self, t: TableDef) -> TableInfo:
        names = list(dict.fromkeys(t.action_names))
        ids = dict(t.actions)
        np = max([self.params.get(ids[n], 0) for n in names] + [0])
        kinds = [MatchKind.from_label(k.match_type) for k in t.key]
        info = TableInfo(t.name, len(self.tables), _kind(kinds), len(t.key), np, tuple(names))
        self.tables[t.name] = info
        return info

    def key_terms(self, t: TableDef) -> list[str]:
        out = []
        cx = self.g.comp(t.path)
        for kf in t.key:
            if kf.match_type == "valid":
                out.append(f"F[{cx.header(kf.target).valid}]")
                continue
            s, w, _sg = cx.field(kf.target)
            mask = (1 << w) - 1
            if kf.mask is not None:
                mask &= hexval(kf.mask, t.path)
            out.append(f"(F[{s}] & {mask}ULL)")
        return out

    def control(self, ctl: Control) -> str:
        nodes: dict[str, str] = {}
        for t in ctl.tables:
            nodes[t.name] = f"N{len(nodes)}"
        for cnd in ctl.conditionals:
            nodes[cnd.name] = f"N{len(nodes)}"

        def goto(target: Any) -> str:
            return "return ST_OK;" if target is None else f"goto {nodes[target]};"
        body: list[str] = []
        for t in ctl.tables:
            info = self.table_info(t)
            nt = t.next_tables
            base = t.base_default_next
            hm = "__HIT__" in nt or "__MISS__" in nt
            ids = dict(t.actions)

            def run(pos: int, params: str, hit: bool) -> str:
                aname = info.actions[pos]
                fn = self.aid_fn[ids[aname]]
                nxt = (nt.get("__HIT__", base) if hit else nt.get("__MISS__", base)) if hm \
                    else nt.get(aname, base)
                return (f"case {pos}: {{ int _s = {fn}(c, p, {params}); if (_s) return _s; "
                        f"if (p->exited) return ST_OK; {goto(nxt)} }}")
            body.append(f"{nodes[t.name]}: {{")
            tab = f"c->tab[{info.index}]"
            if info.kind:
                terms = self.key_terms(t)
                body.append(f"    u64 _k[{info.nk}] = {{{', '.join(terms)}}};")
                body.append(f"    const u64 *_e = lookup(&{tab}, _k);")
                body.append("    if (_e) switch ((int)_e[0]) {")
                body += [f"        {run(i, '_e + 1', True)}" for i in range(len(info.actions))]
                body.append("        default: return ST_OK;")
                body.append("    }")
            miss = nt.get("__MISS__", base) if hm else nt.get("", base)
            body.append(f"    switch ({tab}.def_act) {{")
            body += [f"        {run(i, f'{tab}.def_params', False)}"
                     for i in range(len(info.actions))]
            body.append(f"        default: {goto(miss)}")
            body += ["    }", "}"]
        for cnd in ctl.conditionals:
            cond = self.g.comp(f"{cnd.path}.expression").cond(cnd.expression)
            body.append(f"{nodes[cnd.name]}: if {cond} {goto(cnd.true_next)} "
                        f"else {goto(cnd.false_next)}")
        init = ctl.init_table
        name = ctl.name
        return (f"static int ctl_{name}(Ctx *c, Pkt *p) {{\n    u64 *F = p->F; (void)F;\n"
                f"    {goto(init)}\n" + "".join(f"{s}\n" for s in body) + "}\n")


def _checksums(g: Gen, checksums: tuple[Checksum, ...]) -> tuple[list[str], list[str]]:
    verify: list[str] = []
    update: list[str] = []
    for c in checksums:
        path = c.path
        calc: CalcInfo | None = g.calcs.get(c.calculation)
        if calc is None:
            raise Decline(f"{path}: unknown calculation")
        cx = g.comp(path)
        s, w, _sg = cx.field(c.target_ref)
        cond = cx.cond(c.if_cond) if c.if_cond is not None else "1"
        if c.verify:
            if calc.lo is None:
                raise Decline(f"{path}: verify of a calculation wider than 64 bits")
            err = g.std.checksum_error
            act = f"F[{err}] = 1;" if err is not None else ""
            verify.append(f"if ({cond}) {{ u64 _h; int _s = {calc.fn}(c, p, &_h); "
                          f"if (_s) return _s; if (_h != F[{s}]) {{ {act} }} }}")
        if c.update:
            update.append(f"if ({cond}) {{ u64 _h; int _s = {calc.fn}(c, p, &_h); "
                          f"if (_s) return _s; F[{s}] = _h & {(1 << w) - 1}ULL; }}")
    return verify, update


def _digest_c(g: Gen) -> str:
    """Builds the learn list's values (as Python ints of the reference's F) and calls the
    Device's digest callback."""
    cases = []
    for lid, slots in sorted(g.layout.learn_lists.items()):
        signed = {s.index for h in g.layout.headers.values() for _n, s in h.fields if s.signed}
        items = [f"PyLong_FromLongLong((long long)p->F[{s}])" if s in signed else
                 f"PyLong_FromUnsignedLongLong(p->F[{s}])" for s in slots]
        sets = "".join(f"PyTuple_SET_ITEM(t, {k}, {v}); " for k, v in enumerate(items))
        cases.append(f"case {lid}: t = PyTuple_New({len(slots)}); if (!t) return ST_PYERR; "
                     f"{sets}break;")
    return ("static int send_digest(Ctx *c, Pkt *p) {\n    PyObject *t = NULL;\n"
            f"    switch (p->digest) {{ {' '.join(cases)} default: return ST_OK; }}\n"
            "    if (c->digest == Py_None) { Py_DECREF(t); return ST_OK; }\n"
            "    PyObject *r = PyObject_CallFunction(c->digest, \"iN\", p->digest, t);\n"
            "    if (!r) return ST_PYERR;\n    Py_DECREF(r);\n    return ST_OK;\n}\n")


def _segments(n: int, skip: set[int]) -> list[tuple[int, int]]:
    """[a, b) runs of 0..n-1 outside `skip`."""
    out: list[tuple[int, int]] = []
    for i in range(n):
        if i in skip:
            continue
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _life_cycle(std: StdFields, verify: list[str], update: list[str], ts: bool,
                vec: VecLayout, layout: Layout, egress_writes_v: bool) -> str:
    s = std
    # A vector range of a header the parser did not extract reads as zeros (F's template).
    vzero = "".join(f"    if (!F[{layout.headers[h].valid}]) memset(p.V + {off}, 0, "
                    f"{vr.count * vr.width // 8});\n" for h, (vr, off) in vec.at.items())
    # F's slots of the fields held in V are read only by scalar code that unpacks them first:
    # packets and their copies skip them (at K=1024 they are 8 of F's 9 KB).
    segs = _segments(len(layout.template), vec.range_slots(layout))
    init_f = " ".join(f"memcpy(p.F + {a}, TEMPLATE + {a}, {b - a} * sizeof(u64));"
                      for a, b in segs)
    copy_f = " ".join(f"memcpy(q.F + {a}, p.F + {a}, {b - a} * sizeof(u64));" for a, b in segs)
    vcopy = "memcpy(q.Vbuf, p.V, VBYTES); q.V = q.Vbuf;" if egress_writes_v else "q.V = p.V;"

    def opt(slot: int | None, stmt: str) -> str:
        return stmt.format(slot) if slot is not None and ts else ""
    rid = f"F[{s.egress_rid}] = rid;" if s.egress_rid is not None else "(void)rid;"
    mg = f"F[{s.mcast_grp}]" if s.mcast_grp is not None else "0"
    vsrc = "".join(f"    {v}\n" for v in verify)
    usrc = "".join(f"    {v}\n" for v in update)
    cerr = (f"    if (F[{s.checksum_error}]) c->stats[S_CHECKSUM_ERRORS]++;\n"
            if verify and s.checksum_error is not None else "")
    return f"""
static int verify_checksums(Ctx *c, Pkt *p) {{
    u64 *F = p->F; (void)F; (void)c;
{vsrc}    return ST_OK;
}}
static int update_checksums(Ctx *c, Pkt *p) {{
    u64 *F = p->F; (void)F; (void)c;
{usrc}    return ST_OK;
}}
static int egress(Ctx *c, Pkt *p, u64 port, u64 rid, u64 now, PyObject *out) {{
    u64 *F = p->F; (void)now;
    F[{s.egress_port}] = port; F[{s.egress_spec}] = 0; {rid}
    {opt(s.egress_global_timestamp, "F[{}] = now;")}
    p->exited = 0;
    int st = ctl_egress(c, p);
    if (st) return st;
    if (F[{s.egress_spec}] == c->drop_port) {{ c->stats[S_DROPPED]++; return ST_OK; }}
    st = update_checksums(c, p);
    if (st) return st;
    Py_ssize_t n = deparse(p, c->obuf);
    if (p->off < p->len) {{ memcpy(c->obuf + n, p->data + p->off, (size_t)(p->len - p->off)); n += p->len - p->off; }}
    if (p->truncate && (u64)n > p->truncate) n = (Py_ssize_t)p->truncate;
    if (c->sink) return c->sink->emit(c->sink, port, c->obuf, n) ? ST_PYERR : ST_OK;
    PyObject *fr = PyBytes_FromStringAndSize((const char *)c->obuf, n);
    if (!fr) return ST_PYERR;
    PyObject *t = Py_BuildValue("(KN)", (unsigned long long)port, fr);
    if (!t) return ST_PYERR;
    int e = PyList_Append(out, t);
    Py_DECREF(t);
    return e ? ST_PYERR : ST_OK;
}}
static int process_pkt(Ctx *c, u64 port, const u8 *data, Py_ssize_t len, u64 now, PyObject *out) {{
    Pkt p;
    {init_f}
    p.V = p.Vbuf;
    p.data = data; p.len = len; p.off = 0; p.exited = 0; p.truncate = 0; p.digest = 0;
    u64 *F = p.F;
    F[{s.ingress_port}] = port; F[{s.packet_length}] = (u64)len; F[{s.instance_type}] = 0;
    {opt(s.ingress_global_timestamp, "F[{}] = now;")}
    parse(c, &p);
{vzero}    int st = verify_checksums(c, &p);
    if (st) return st;
{cerr}    st = ctl_ingress(c, &p);
    if (st) return st;
    if (p.digest) {{ c->stats[S_DIGESTS]++; st = send_digest(c, &p); if (st) return st; }}
    u64 mg = {mg};
    if (mg) {{
        Group *g = mg <= MAX_MGID ? c->groups[mg] : NULL;
        if (!g || !g->n) {{ c->stats[S_DROPPED]++; return ST_OK; }}
        for (int i = 0; i < g->n; i++) {{
            Pkt q;
            {copy_f}
            {vcopy}
            q.data = p.data; q.len = p.len; q.off = p.off; q.exited = 0; q.truncate = 0; q.digest = 0;
            q.F[{s.instance_type}] = {REPLICATION};
            st = egress(c, &q, (u64)g->pr[2 * i], (u64)g->pr[2 * i + 1], now, out);
            if (st) return st;
        }}
        return ST_OK;
    }}
    u64 spec = F[{s.egress_spec}];
    if (spec == c->drop_port) {{ c->stats[S_DROPPED]++; return ST_OK; }}
    p.exited = 0;
    return egress(c, &p, spec, 0, now, out);
}}
"""


def _egress_writes_v(controls: dict[str, Control], actions: tuple[Action, ...],
                    lanes: LanePlan | None) -> bool:
    """May an egress action write a vector range?  Only lane runs write them."""
    if lanes is None or not lanes.runs:
        return False
    ids = {aid for t in controls["egress"].tables for _n, aid in t.actions}
    return any(a.index in lanes.runs for a in actions if a.id in ids)


def generate(j: dict[str, Any], layout: Layout, std: StdFields, regs: dict[str, RegInfo],
             ctrs: dict[str, tuple[int, int]], uses_timestamps: bool,
             checksums: tuple[Checksum, ...], actions: tuple[Action, ...],
             parser: Parser, deparser: Deparser, controls: dict[str, Control],
             lanes: LanePlan | None = None) -> Program:
    """The C source of the program (module name left to the builder), or `Decline`.
    `lanes`: the pipeline's LanePlan (netsum/switch/lanes.py), whose runs become loops."""
    _precheck(j, actions, parser, controls)
    for h in layout.headers.values():
        for _n, s in h.fields:
            if s.width > MAX_NATIVE_WIDTH:
                raise Decline(f"header '{h.name}' field of {s.width} bits (native: at most 64)")
        if h.varbit >= 0:
            raise Decline(f"header '{h.name}' has a variable-length field")
    for name, r in regs.items():
        if r.width > MAX_NATIVE_WIDTH:
            raise Decline(f"register '{name}' is {r.width} bits wide")
    vec = VecLayout(lanes)
    g = Gen(layout, std, regs, ctrs, lanes=lanes, vec=vec)
    scratch = 0
    for k, calc in enumerate(j.get("calculations") or []):
        info, need = calculation_c(g, calc, f"calculations[{k}] ('{calc.get('name')}')", k)
        g.calcs[calc["name"]] = info
        scratch = max(scratch, need)
    aid_fn: dict[int, str] = {}
    params: dict[int, int] = {}
    for a in actions:
        fn = f"A{a.index}"
        g.action(fn, a)
        aid_fn[a.id] = fn
        params[a.id] = len(a.params)
    pc = parser_c(g, parser)
    dc, hdr_max = deparser_c(g, deparser)
    ctl = _Controls(g, actions, aid_fn, params)
    control_c = [ctl.control(controls[n]) for n in ("ingress", "egress")]
    verify, update = _checksums(g, checksums)
    maxp = max(list(params.values()) + [1])
    tabs = ctl.tables.values()
    init = "".join(f"    c->tab[{t.index}].kind = {t.kind}; c->tab[{t.index}].nk = {t.nk}; "
                   f"c->tab[{t.index}].np = {t.np}; c->tab[{t.index}].stride = {t.stride}; "
                   f"c->tab[{t.index}].def_act = -1;\n" for t in tabs)
    # A vector slot of the register lanes (netsum/switch/lanes.py) holds an array; C never reads it.
    tmpl = ", ".join(f"{v if type(v) is int else 0}ULL" for v in layout.template)
    head = (f"#define NSLOTS {len(layout.template)}\n#define NREGS {len(regs)}\n"
            f"#define NCTRS {len(ctrs)}\n#define NTABLES {len(ctl.tables)}\n"
            f"#define MAXP {maxp}\n#define HDR_MAX {max(hdr_max, scratch) + 64}\n"
            f"#define VBYTES {vec.nbytes}\n")
    rt = resources.files("netsum.switch.native")
    src = "".join([
        head, "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n",
        rt.joinpath("nsio.h").read_text(), rt.joinpath("runtime.c").read_text(), VEC_PRELUDE,
        f"static const u64 TEMPLATE[NSLOTS] = {{{tmpl}}};\n",
        "\n".join(g.globals), "\n",
        "static int ctl_ingress(Ctx *c, Pkt *p);\nstatic int ctl_egress(Ctx *c, Pkt *p);\n",
        roll("".join(g.fns)), roll(pc), roll(dc), roll("".join(control_c)), _digest_c(g),
        _life_cycle(std, verify, update, uses_timestamps, vec, layout,
                    _egress_writes_v(controls, actions, lanes)),
        f"static void init_tables(Ctx *c) {{\n{init}    (void)c;\n}}\n",
        rt.joinpath("glue.c").read_text()])
    return Program(src, regs, {n: i for n, (i, _s) in ctrs.items()}, dict(ctl.tables),
                   tuple(g.lane_regs))
