"""A small BMv2 JSON interpreter, written from the JSON format (bmv2 docs/JSON_format.md) and
v1model's packet life cycle, as an independent reference for the switch's generated code.

It shares nothing with netsum/switch/: no expression compiler, no code generation, no layout.  It
walks the JSON per packet, keeps headers as dicts of Python ints, evaluates expressions
recursively with unbounded integers and truncates on writes, as bmv2 does.  It covers the
subset netsum.p4 and the switch's randomised test programs use: regular extracts, `set`,
select on fields with masks, exact and keyless tables, conditionals, assign, register
read/write, indirect counters, mark_to_drop, random, multicast with egress_rid, csum16
checksum update, the deparser.  Anything else raises NotImplementedError, so a test can never
pass by skipping what it does not know.

Control-plane state comes in as data: `Reference.from_device` copies table entries, default
actions and multicast groups out of a configured `netsum.switch.device.Device` through its
control-plane API (what a P4Runtime client would read back), not through the packet path.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

DROP_PORT = 511


def _unwrap(n: Any) -> Any:
    while isinstance(n, dict) and n.get("type") == "expression":
        n = n["value"]
    return n


@dataclass
class State:
    hdr: dict[str, dict[str, int]]
    valid: dict[str, bool]
    data: bytes
    off: int = 0


@dataclass
class Reference:
    j: dict[str, Any]
    entries: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]] = \
        field(default_factory=dict)
    defaults: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self) -> None:
        j = self.j
        self.types = {t["name"]: [(f[0], f[1], bool(f[2]) if len(f) > 2 else False)
                                  for f in t["fields"]] for t in j["header_types"]}
        self.headers = {h["name"]: h for h in j["headers"]}
        self.actions = {a["id"]: a for a in j["actions"]}
        self.actions_by_name = {a["name"]: a for a in j["actions"]}
        self.registers = {r["name"]: [0] * r["size"] for r in j.get("register_arrays") or []}
        self.reg_width = {r["name"]: r["bitwidth"] for r in j.get("register_arrays") or []}
        self.counters = {c["name"]: ([0] * c["size"], [0] * c["size"])
                         for c in j.get("counter_arrays") or []}
        self.errors = {name: code for name, code in j.get("errors") or []}
        self.pipes = {p["name"]: p for p in j["pipelines"]}
        self.calcs = {c["name"]: c for c in j.get("calculations") or []}
        self.rng = random.Random(self.seed)
        self.register_oob = 0

    @classmethod
    def from_device(cls, j: dict[str, Any], dev: Any, seed: int | None = None) -> Reference:
        from netsum.switch.entries import Exact   # the control plane's value type, read as data
        ref = cls(j, seed=seed)
        pl = dev.pipeline
        for name, t in pl.tables.items():
            ent: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {}
            for e in t.entries():
                if not all(isinstance(m, Exact) for m in e.key):
                    raise NotImplementedError(f"table {name}: only exact entries")
                ent[tuple(m.value for m in e.key)] = (e.action.action, tuple(e.action.params))
            ref.entries[name] = ent
            d = t.default
            ref.defaults[name] = (d.action, tuple(d.params))
        for mgid, reps in pl.pre.mc_groups().items():
            ref.groups[mgid] = [(r.port, r.rid) for r in reps]
        return ref

    # -- fields --------------------------------------------------------------------------
    def width(self, h: str, f: str) -> tuple[int, bool]:
        for name, w, signed in self.types[self.headers[h]["header_type"]]:
            if name == f:
                return w, signed
        raise KeyError(f"{h}.{f}")

    def store(self, st: State, ref: list[str], value: int) -> None:
        h, f = ref
        if f == "$valid$":
            st.valid[h] = bool(value)
            return
        w, signed = self.width(h, f)
        v = value & ((1 << w) - 1)
        if signed and v >> (w - 1):
            v -= 1 << w
        st.hdr[h][f] = v

    def load(self, st: State, ref: list[str]) -> int:
        h, f = ref
        if f == "$valid$":
            return int(st.valid[h])
        return st.hdr[h][f]

    # -- expressions ---------------------------------------------------------------------
    def ev(self, st: State, n: Any, P: tuple[int, ...]) -> int:
        n = _unwrap(n)
        if "op" not in n:
            t, v = n["type"], n["value"]
            if t == "field":
                return self.load(st, v)
            if t == "hexstr":
                return int(v, 16)
            if t in ("runtime_data", "local"):
                return P[v]
            if t == "bool":
                return int(bool(v))
            if t == "header":
                return int(st.valid[v])
            raise NotImplementedError(f"operand {t}")
        op = n["op"]
        if op == "valid":
            return int(st.valid[_unwrap(n["right"])["value"]])
        if op in ("not", "~", "b2d", "d2b") or (op == "-" and n.get("left") is None):
            r = self.ev(st, n["right"], P)
            return {"not": lambda: int(not r), "~": lambda: ~r, "b2d": lambda: int(bool(r)),
                    "d2b": lambda: int(bool(r)), "-": lambda: -r}[op]()
        if op == "?":
            return self.ev(st, n["left"] if self.ev(st, n["cond"], P) else n["right"], P)
        if op == "and":
            return int(bool(self.ev(st, n["left"], P)) and bool(self.ev(st, n["right"], P)))
        if op == "or":
            return int(bool(self.ev(st, n["left"], P)) or bool(self.ev(st, n["right"], P)))
        a = self.ev(st, n["left"], P)
        if op == "two_comp_mod":
            w = int(_unwrap(n["right"])["value"], 16)
            a &= (1 << w) - 1
            return a - (1 << w) if a >> (w - 1) else a
        b = self.ev(st, n["right"], P)
        table = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
                 "==": int(a == b), "!=": int(a != b), "<": int(a < b), ">": int(a > b),
                 "<=": int(a <= b), ">=": int(a >= b)}
        if op in table:
            return table[op]
        if op == "<<":
            return a << b
        if op == ">>":
            return a >> b
        raise NotImplementedError(f"op {op}")

    # -- actions -------------------------------------------------------------------------
    def run_action(self, st: State, action: dict[str, Any], P: tuple[int, ...]) -> None:
        prims = action["primitives"]
        i = 0
        while i < len(prims):
            p = prims[i]
            op, a = p["op"], p.get("parameters") or []
            if op == "_jump_if_zero":
                if not self.ev(st, a[0], P):
                    i = int(_unwrap(a[1])["value"], 16)
                    continue
            elif op == "_jump":
                i = int(_unwrap(a[0])["value"], 16)
                continue
            else:
                self.prim(st, op, a, P)
            i += 1

    def prim(self, st: State, op: str, a: list[Any], P: tuple[int, ...]) -> None:
        std = ["standard_metadata"]
        if op in ("assign", "modify_field"):
            self.store(st, _unwrap(a[0])["value"], self.ev(st, a[1], P))
        elif op == "register_read":
            reg = self.registers[_unwrap(a[1])["value"]]
            i = self.ev(st, a[2], P)
            if 0 <= i < len(reg):
                self.store(st, _unwrap(a[0])["value"], reg[i])
            else:
                self.register_oob += 1
        elif op == "register_write":
            name = _unwrap(a[0])["value"]
            reg = self.registers[name]
            i = self.ev(st, a[1], P)
            if 0 <= i < len(reg):
                reg[i] = self.ev(st, a[2], P) & ((1 << self.reg_width[name]) - 1)
            else:
                self.register_oob += 1
        elif op == "count":
            pk, by = self.counters[_unwrap(a[0])["value"]]
            i = self.ev(st, a[1], P)
            if 0 <= i < len(pk):
                pk[i] += 1
                by[i] += st.hdr["standard_metadata"]["packet_length"]
        elif op in ("mark_to_drop", "drop"):
            self.store(st, std + ["egress_spec"], DROP_PORT)
            self.store(st, std + ["mcast_grp"], 0)
        elif op == "modify_field_rng_uniform":
            lo, hi = self.ev(st, a[1], P), self.ev(st, a[2], P)
            self.store(st, _unwrap(a[0])["value"], self.rng.randint(lo, hi) if lo <= hi else lo)
        elif op == "no_op":
            pass
        elif op in ("remove_header", "add_header"):
            # setInvalid / setValid: the header's validity bit (its fields keep their values)
            st.valid[_unwrap(a[0])["value"]] = op == "add_header"
        else:
            raise NotImplementedError(f"primitive {op}")

    # -- parser, controls, deparser ------------------------------------------------------
    def fresh(self, data: bytes, port: int) -> State:
        hdr = {name: {f: 0 for f, _w, _s in self.types[h["header_type"]]}
               for name, h in self.headers.items()}
        valid = {name: bool(h.get("metadata")) for name, h in self.headers.items()}
        st = State(hdr, valid, data)
        sm = hdr["standard_metadata"]
        sm["ingress_port"], sm["packet_length"] = port, len(data)
        return st

    def parse(self, st: State) -> None:
        p = next(x for x in self.j["parsers"] if x["name"] == "parser")
        states = {s["name"]: s for s in p["parse_states"]}
        name = p["init_state"]
        while name is not None:
            s = states[name]
            for op in s["parser_ops"]:
                if op["op"] == "extract":
                    h = op["parameters"][0]["value"]
                    if not self.extract(st, h):
                        st.hdr["standard_metadata"]["parser_error"] = self.errors["PacketTooShort"]
                        return
                elif op["op"] == "set":
                    a = op["parameters"]
                    self.store(st, _unwrap(a[0])["value"], self.ev(st, a[1], ()))
                else:
                    raise NotImplementedError(f"parser op {op['op']}")
            key, shift = 0, 0
            for k in reversed(s.get("transition_key") or []):
                if k["type"] == "lookahead":
                    # [bit offset from the parser's position, width]; nothing is consumed
                    at, w = k["value"]
                    first, last = st.off * 8 + at, st.off * 8 + at + w
                    if last > len(st.data) * 8:
                        st.hdr["standard_metadata"]["parser_error"] = \
                            self.errors["PacketTooShort"]
                        return
                    chunk = int.from_bytes(st.data[first // 8:(last + 7) // 8], "big")
                    value = chunk >> ((-last) % 8) & ((1 << w) - 1)
                elif k["type"] == "field":
                    w, _signed = self.width(*k["value"])
                    value = self.load(st, k["value"]) & ((1 << w) - 1)
                else:
                    raise NotImplementedError("transition key " + k["type"])
                key |= value << shift
                shift += (w + 7) // 8 * 8
            nxt: Any = "$nomatch" if s["transitions"] else None     # no transitions: accept
            for t in s["transitions"]:
                if t.get("type") == "default" or t.get("value") == "default":
                    nxt = t["next_state"]
                    break
                v = int(t["value"], 16)
                m = int(t["mask"], 16) if t.get("mask") else -1
                if key & m == v & m:
                    nxt = t["next_state"]
                    break
            if nxt == "$nomatch":
                st.hdr["standard_metadata"]["parser_error"] = self.errors["NoMatch"]
                return
            name = nxt

    def extract(self, st: State, h: str) -> bool:
        flds = self.types[self.headers[h]["header_type"]]
        nbits = sum(w for _f, w, _s in flds)
        end = st.off + nbits // 8
        if end > len(st.data):
            return False
        v = int.from_bytes(st.data[st.off:end], "big")
        shift = nbits
        for f, w, signed in flds:
            shift -= w
            x = (v >> shift) & ((1 << w) - 1)
            st.hdr[h][f] = x - (1 << w) if signed and x >> (w - 1) else x
        st.valid[h] = True
        st.off = end
        return True

    def control(self, st: State, pipe: str) -> None:
        p = self.pipes[pipe]
        tables = {t["name"]: t for t in p["tables"]}
        conds = {c["name"]: c for c in p["conditionals"]}
        node = p["init_table"]
        while node is not None:
            if node in conds:
                c = conds[node]
                node = c["true_next"] if self.ev(st, c["expression"], ()) else c["false_next"]
                continue
            t = tables[node]
            key = tuple(self.load(st, k["target"]) for k in t["key"])
            if any(k["match_type"] != "exact" for k in t["key"]):
                raise NotImplementedError("match type")
            hit = self.entries.get(node, {}).get(key) if t["key"] else None
            aname, params = hit if hit else self.defaults[node]
            self.run_action(st, self.actions_by_name[aname], params)
            nt = t["next_tables"]
            if "__HIT__" in nt or "__MISS__" in nt:
                node = nt["__HIT__" if hit else "__MISS__"]
            else:
                node = nt.get(aname, t["base_default_next"])

    def checksums(self, st: State) -> None:
        for c in self.j.get("checksums") or []:
            if c.get("if_cond") is not None and not self.ev(st, c["if_cond"], ()):
                continue
            calc = self.calcs[c["calculation"]]
            if calc["algo"] != "csum16":
                raise NotImplementedError(calc["algo"])
            bits, v = 0, 0
            for el in calc["input"]:
                w, _s = self.width(*el["value"])
                v = (v << w) | (self.load(st, el["value"]) & ((1 << w) - 1))
                bits += w
            if bits % 16:
                v <<= 16 - bits % 16
                bits += 16 - bits % 16
            total = sum((v >> s) & 0xFFFF for s in range(0, bits, 16))
            while total >> 16:
                total = (total & 0xFFFF) + (total >> 16)
            self.store(st, c["target"], ~total & 0xFFFF)

    def deparse(self, st: State) -> bytes:
        out = b""
        for h in next(d for d in self.j["deparsers"] if d["name"] == "deparser")["order"]:
            if not st.valid[h] or self.headers[h].get("metadata"):
                continue
            flds = self.types[self.headers[h]["header_type"]]
            v, bits = 0, 0
            for f, w, _s in flds:
                v = (v << w) | (st.hdr[h][f] & ((1 << w) - 1))
                bits += w
            out += v.to_bytes(bits // 8, "big")
        return out + st.data[st.off:]

    # -- the life cycle ------------------------------------------------------------------
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        st = self.fresh(data, port)
        self.parse(st)
        self.control(st, "ingress")
        sm = st.hdr["standard_metadata"]
        copies: list[tuple[int, int, int]] = []          # (port, rid, instance_type)
        if sm.get("mcast_grp"):
            copies = [(p, rid, 5) for p, rid in self.groups.get(sm["mcast_grp"], [])]
        elif sm["egress_spec"] != DROP_PORT:
            copies = [(sm["egress_spec"], 0, 0)]
        out = []
        for eport, rid, itype in copies:
            c = State({h: dict(f) for h, f in st.hdr.items()}, dict(st.valid), st.data, st.off)
            cm = c.hdr["standard_metadata"]
            cm["egress_port"], cm["egress_spec"], cm["instance_type"] = eport, 0, itype
            if "egress_rid" in cm:
                cm["egress_rid"] = rid
            self.control(c, "egress")
            if cm["egress_spec"] == DROP_PORT:
                continue
            self.checksums(c)
            out.append((eport, self.deparse(c)))
        return out
