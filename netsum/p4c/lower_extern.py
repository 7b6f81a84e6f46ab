"""Lower calls of v1model externs to BMv2 primitives (a mixin of ActionLowering).

Owns register_read/write, count, execute_meter, direct counter/meter handling,
modify_field_rng_uniform, modify_field_with_hash_based_offset (+ its calculation),
mark_to_drop, clone/clone3/clone_preserving_field_list, resubmit/recirculate (field lists),
truncate, assert/assume, log_msg, digest (learn lists), and the v1model rules on where each
may be called.
"""
from __future__ import annotations

from . import ast as A
from .calls import CallInfo
from .diagnostics import Pos
from .exprjson import Json, as_param, field_json, hexstr, to_data
from .ir import FieldRef, HeaderRef, StructRef, TConst, TExpr, TList, TLoc, TString
from .lower_ctx import LowerCtx, as_param_b2d, prim as _prim
from .scopes import Env, ExternInstance
from .types import Bits, Bool, EnumT, ErrorT, StructT, show

__all__ = ["ExternLowering", "HASH_ALGOS"]

HASH_ALGOS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16",
              "xor16")


class ExternLowering:
    """Extern calls; relies on ActionLowering's assign/simple_arg/_wrote/err/ctx/role."""

    ctx: LowerCtx
    role: str

    # Defined by ActionLowering, the only subclass; declared here so that this half of the
    # class is typed on its own (inheriting from ActionLowering for the checker was circular).
    def err(self, pos: Pos, msg: str) -> None:
        raise NotImplementedError

    def assign(self, lhs: TLoc, rhs: TExpr, pos: Pos, prims: list[Json]) -> None:
        raise NotImplementedError

    def simple_arg(self, te: TExpr, prims: list[Json]) -> TExpr:
        raise NotImplementedError

    def _wrote(self, dst: TExpr | None) -> None:
        raise NotImplementedError

    def _method(self, info: CallInfo, prims: list[Json]) -> None:
        inst = info.target
        assert isinstance(inst, ExternInstance)
        a = info.args
        ext, m = inst.extern, info.name
        if self.role == "parser" and ext in ("register", "counter", "meter", "direct_counter",
                                             "direct_meter"):
            self.err(info.pos, f"v1model: {ext} method '{m}' cannot be called in a parser")
            return
        if self.role in ("verify_checksum", "compute_checksum", "deparser"):
            self.err(info.pos, f"v1model: {ext} method '{m}' cannot be called in the "
                               f"{self.role.replace('_', ' ')} control")
            return
        if ext == "register" and m == "read" and len(a) == 2:
            dst, idx = a
            assert dst is not None and idx is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("register_read", [as_param(dst), _arr("register_array", inst),
                                                 as_param(idx)]))
            self._wrote(dst)
        elif ext == "register" and m == "write":
            idx, val = a
            assert idx is not None and val is not None
            idx = self.simple_arg(idx, prims)
            val = self.simple_arg(val, prims)
            prims.append(_prim("register_write", [_arr("register_array", inst), as_param(idx),
                                                  as_param(val)]))
        elif ext == "counter" and m == "count":
            idx = a[0]
            assert idx is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("count", [_arr("counter_array", inst), as_param(idx)]))
        elif ext == "meter" and m == "execute_meter":
            idx, dst = a
            assert idx is not None and dst is not None
            idx = self.simple_arg(idx, prims)
            prims.append(_prim("execute_meter", [_arr("meter_array", inst), as_param(idx),
                                                 as_param(dst)]))
            self._wrote(dst)
        elif ext == "direct_counter" and m == "count":
            pass  # BMv2 counts direct counters itself when the table hits
        elif ext == "direct_meter" and m == "read":
            dst = a[0]
            if isinstance(dst, TLoc) and isinstance(dst.ref, FieldRef):
                prev = self.ctx.direct_meter_targets.get(inst.name)
                if prev is not None and prev != dst.ref:
                    self.err(info.pos, f"direct_meter '{inst.name}' is read into two different "
                                       "fields; BMv2 supports one result field per meter")
                self.ctx.direct_meter_targets[inst.name] = dst.ref
        else:
            self.err(info.pos, f"unsupported construct: {ext}.{m} with {len(a)} argument(s)")

    def _function(self, info: CallInfo, env: Env, prims: list[Json]) -> None:
        n, a = info.name, info.args
        role = self.role
        if n in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                 "update_checksum_with_payload"):
            want = "verify_checksum" if n.startswith("verify") else "compute_checksum"
            self.err(info.pos, f"v1model: {n} can only be called in the "
                               f"{want.replace('_', ' ')} control")
            return
        if n == "verify":
            self.err(info.pos, "verify() can only be called in a parser")
            return
        if role == "parser" and n not in ("verify",):
            self.err(info.pos, f"v1model: {n}() cannot be called in a parser")
            return
        if role in ("verify_checksum", "compute_checksum", "deparser"):
            self.err(info.pos, f"v1model: {n}() cannot be called in the "
                               f"{role.replace('_', ' ')} control")
            return
        self.ctx.extern_functions = True
        if n == "mark_to_drop":
            # Its argument is standard_metadata or a copy of it (an inout parameter).
            sm = info.args[0] if info.args else None
            header = "standard_metadata"
            if isinstance(sm, TLoc) and isinstance(sm.ref, StructRef) and sm.ref.members and \
                    isinstance(sm.ref.members[0][1].ref, FieldRef):
                header = sm.ref.members[0][1].ref.header
            prims.append(_prim("mark_to_drop", [{"type": "header", "value": header}]))
        elif n == "random":
            dst, lo, hi = a
            assert dst is not None and lo is not None and hi is not None
            lo, hi = self.simple_arg(lo, prims), self.simple_arg(hi, prims)
            prims.append(_prim("modify_field_rng_uniform", [as_param(dst), as_param(lo),
                                                            as_param(hi)]))
            self._wrote(dst)
        elif n == "hash":
            self._hash(info, prims)
        elif n in ("clone", "clone_preserving_field_list"):
            ctype, session = a[0], a[1]
            assert isinstance(ctype, TConst) and session is not None
            op = "clone_ingress_pkt_to_egress" if int(ctype.value) == 0 \
                else "clone_egress_pkt_to_egress"
            if n == "clone":
                fid = self.ctx.field_list("fl", [])
            else:
                preserved = self._preserved_list(a[2], info.pos)
                if preserved is None:
                    return
                fid = preserved
            session = self.simple_arg(session, prims)
            prims.append(_prim(op, [as_param(session), hexstr(fid)]))
        elif n in ("resubmit", "recirculate", "clone3"):
            data = a[-1]
            elements = self._data_fields(data, info.pos)
            if elements is None:
                return
            fid = self.ctx.field_list("fl", elements)
            if n == "clone3":
                ctype, session = a[0], a[1]
                assert isinstance(ctype, TConst) and session is not None
                op = "clone_ingress_pkt_to_egress" if int(ctype.value) == 0 \
                    else "clone_egress_pkt_to_egress"
                session = self.simple_arg(session, prims)
                prims.append(_prim(op, [as_param(session), hexstr(fid)]))
            else:
                prims.append(_prim(n, [hexstr(fid)]))
        elif n in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            preserved = self._preserved_list(a[0], info.pos)
            if preserved is not None:
                prims.append(_prim(n.split("_")[0], [hexstr(preserved)]))
        elif n == "truncate":
            ln = a[0]
            assert ln is not None
            prims.append(_prim("truncate", [as_param(ln)]))
        elif n in ("assert", "assume"):
            c = a[0]
            assert c is not None
            prims.append(_prim(n, [as_param_b2d(c)]))
        elif n == "digest":
            self._digest(info, prims)
        elif n == "log_msg":
            msg = a[0]
            assert isinstance(msg, TString)
            values: list[Json] = []
            data = a[1] if len(a) > 1 else None
            for it in (data.items if isinstance(data, TList) else (data,) if data else ()):
                values.extend(to_data(x) for x in _scalars(it))
            prims.append(_prim("log_msg", [{"type": "string", "value": msg.value},
                                           {"type": "parameters_vector", "value": values}]))
        else:
            self.err(info.pos, f"unsupported construct: extern function '{n}'")

    def _digest(self, info: CallInfo, prims: list[Json]) -> None:
        receiver, data = info.args
        assert receiver is not None and data is not None
        st = info.type_args[0] if info.type_args else data.type
        if not isinstance(st, StructT) and isinstance(data, TList) and \
                not isinstance(data.type, StructT):
            # A list of values without a struct type (`digest(5, { f })`): p4c's P4Info names
            # it digest_<n>, n counting such calls, with a tuple type spec; the learn list
            # takes the same name so that P4Runtime finds it.
            name = self.ctx.tuple_digests.setdefault(
                (info.pos.file, info.pos.line, info.pos.col),
                f"digest_{len(self.ctx.tuple_digests)}")
            st = StructT(name, tuple((f"f{i}", it.type) for i, it in enumerate(data.items)))
        if not isinstance(st, StructT):
            self.err(info.pos, "digest data must be a struct (or a list with digest<T> naming "
                               "the struct type)")
            return
        items: list[TExpr] = []
        if isinstance(data, TList):
            items = list(data.items)
        elif isinstance(data, TLoc) and isinstance(data.ref, StructRef):
            items = [m for _, m in data.ref.members]
        for it in items:
            if not isinstance(it.type, (Bits, Bool, ErrorT, EnumT)):
                self.err(it.pos, f"unsupported construct: digest field of type {show(it.type)}")
                return
        # Values that are not fields go through temporaries (BMv2 learn lists name fields).
        elements: list[Json] = []
        for it in items:
            if isinstance(it, TLoc) and isinstance(it.ref, FieldRef):
                elements.append(field_json(it.ref))
                continue
            tmp = self.ctx.layout.temp(it.type, it.pos)
            self.assign(tmp, it, it.pos, prims)
            assert isinstance(tmp.ref, FieldRef)
            elements.append(field_json(tmp.ref))
        # One learn list per digest type and field set; P4Info has one digest per type.
        lid = next((ll["id"] for ll in self.ctx.learn_lists
                    if ll["name"] == st.name and ll["elements"] == elements), None)
        if lid is None:
            lid = self.ctx.learn_list(st.name, elements)
            self.ctx.digests[st.name] = st
        prims.append(_prim("generate_digest", [as_param(receiver), hexstr(lid)]))

    def _data_fields(self, data: TExpr | None, pos: Pos) -> list[Json] | None:
        """Fields of a list or struct argument (deprecated resubmit/recirculate/clone3)."""
        out: list[Json] = []

        def add(te: TExpr) -> bool:
            if isinstance(te, TLoc) and isinstance(te.ref, FieldRef):
                out.append(field_json(te.ref))
                return True
            if isinstance(te, TLoc) and isinstance(te.ref, StructRef):
                return all(add(m) for _, m in te.ref.members)
            if isinstance(te, TList):
                return all(add(i) for i in te.items)
            self.err(te.pos, "the preserved data must be metadata fields or structs of them")
            return False

        if data is not None and not add(data):
            return None
        return out

    def _preserved_list(self, idx: TExpr | None, pos: Pos) -> int | None:
        if not isinstance(idx, TConst):
            self.err(pos, "the field list index must be a compile-time constant")
            return None
        want = int(idx.value)
        elements: list[Json] = []
        meta = self.ctx.layout.meta_loc
        if meta is not None and isinstance(meta.ref, StructRef):
            for fname, loc in meta.ref.members:
                key = (meta.type.name, fname)  # type: ignore[attr-defined]
                annos = self.ctx.g.field_annotations.get(key, ())
                for an in annos:
                    if an.name == "field_list" and any(
                            isinstance(x, A.IntLit) and x.value == want for x in an.args):
                        if isinstance(loc.ref, FieldRef):
                            elements.append(field_json(loc.ref))
        return self.ctx.field_list(f"field_list{want}", elements)

    def _hash(self, info: CallInfo, prims: list[Json]) -> None:
        dst, algo, base, data, mx = info.args
        assert dst is not None and algo is not None and base is not None and mx is not None
        if not isinstance(algo, TConst) or not isinstance(algo.type, EnumT):
            self.err(info.pos, "the hash algorithm must be a HashAlgorithm constant")
            return
        name = algo.type.members[int(algo.value)]
        inputs = self.calc_inputs(data, info.pos, prims)
        if inputs is None:
            return
        calc = self.ctx.calculation(name, inputs)
        base, mx = self.simple_arg(base, prims), self.simple_arg(mx, prims)
        prims.append(_prim("modify_field_with_hash_based_offset",
                           [as_param(dst), as_param(base), {"type": "calculation", "value": calc},
                            as_param(mx)]))
        self._wrote(dst)

    def calc_inputs(self, data: TExpr | None, pos: Pos,
                    prims: list[Json] | None = None) -> list[Json] | None:
        """Fields a calculation reads; with ``prims``, other values go through temporaries."""
        items: tuple[TExpr, ...]
        if isinstance(data, TList):
            items = data.items
        elif data is not None:
            items = (data,)
        else:
            return []
        out: list[Json] = []
        for it in items:
            if prims is not None and isinstance(it.type, Bits) and not isinstance(it, TConst):
                # In an action p4c materializes the data list into temporaries first.
                tmp = self.ctx.layout.temp(it.type, it.pos)
                self.assign(tmp, it, it.pos, prims)
                assert isinstance(tmp.ref, FieldRef)
                out.append(field_json(tmp.ref))
            elif isinstance(it, TLoc) and isinstance(it.ref, FieldRef):
                out.append(field_json(it.ref))
            elif isinstance(it, TLoc) and isinstance(it.ref, HeaderRef):
                for fname, _ in it.ref.type.fields:
                    out.append({"type": "field", "value": [it.ref.name, fname]})
            elif isinstance(it, TConst) and isinstance(it.type, Bits):
                out.append({**hexstr(int(it.value), it.type.width), "bitwidth": it.type.width})
            else:
                self.err(it.pos, "unsupported construct: hash/checksum input must be a field, "
                                 "a header or a constant of known width")
                return None
        return out


def _arr(kind: str, inst: ExternInstance) -> Json:
    return {"type": kind, "value": inst.name}


def _scalars(te: TExpr) -> list[TExpr]:
    """A log_msg argument as the values printed: a header or struct by its fields."""
    if isinstance(te, TLoc) and isinstance(te.ref, HeaderRef):
        return [TLoc(t, te.pos, FieldRef(te.ref.name, n), f"{te.text}.{n}")
                for n, t in te.ref.type.fields]
    if isinstance(te, TLoc) and isinstance(te.ref, StructRef):
        return [x for _, m in te.ref.members for x in _scalars(m)]
    return [te]
