"""GenerateP4Info: the control-plane model → ``p4.config.v1.P4Info`` (and its text form).

Ids come from :mod:`ids`; aliases are the shortest dotted suffix of a name that no other
P4Info object shares; hidden tables and actions never reach the model.
"""
from __future__ import annotations

from collections import Counter

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from netsum.match import MatchKind

from . import ast as A
from .diagnostics import Diagnostics
from .ids import Prefix, assign_ids
from .model import ControlPlane
from .pkginfo import add_pkg_info
from .structured_annotations import add_annotations

__all__ = ["build_p4info", "p4info_text", "aliases"]

_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
#: P4 match kind (as the JSON spells it) -> p4info's MatchType: netsum.match.MatchKind names both.
_MATCH = {k.label: p4info_pb2.MatchField.MatchType.Value(k.name)
          for k in MatchKind if k is not MatchKind.UNSPECIFIED}


def aliases(names: list[str]) -> dict[str, str]:
    """Each name's alias: its shortest dotted suffix (last part, last two parts, ...) that is a
    dotted suffix of no other name."""
    uniq = sorted(set(names))
    # How many names end with each dotted suffix (m == s or m ends with "." + s): counted once
    # per name, so the search below is linear, not names x names.
    ends: Counter[str] = Counter()
    for m in uniq:
        parts = m.split(".")
        ends.update({".".join(parts[-k:]) for k in range(1, len(parts) + 1)})
    out: dict[str, str] = {}
    for n in uniq:
        parts = n.split(".")
        alias = n
        for k in range(1, len(parts) + 1):
            suffix = ".".join(parts[-k:])
            if ends[suffix] == 1:
                alias = suffix
                break
        out[n] = alias
    return out


def _preamble(pre: p4info_pb2.Preamble, id_: int, name: str, alias: str,
              annotations: tuple[str, ...]) -> None:
    pre.id = id_
    pre.name = name
    pre.alias = alias
    add_annotations(pre, annotations)


def build_p4info(cp: ControlPlane, diags: Diagnostics,
                 main: A.Instantiation | None = None) -> p4info_pb2.P4Info:
    # p4c's order: declaration order after inlining (BlockScope.rank), not use order.
    cp.tables.sort(key=lambda t: t.order)
    cp.counters.sort(key=lambda c: c.order)
    cp.meters.sort(key=lambda m: m.order)
    cp.registers.sort(key=lambda r: r.order)
    info = p4info_pb2.P4Info()
    add_pkg_info(info, main, diags)
    taken: set[int] = set()
    tid = assign_ids(Prefix.TABLE, [(t.name, t.explicit_id) for t in cp.tables], diags, taken)
    aid = assign_ids(Prefix.ACTION, [(a.name, a.explicit_id) for a in cp.actions], diags, taken)
    cid = assign_ids(Prefix.COUNTER, [(c.name, c.explicit_id) for c in cp.counters
                                      if c.direct_table is None], diags, taken)
    dcid = assign_ids(Prefix.DIRECT_COUNTER, [(c.name, c.explicit_id) for c in cp.counters
                                              if c.direct_table is not None], diags, taken)
    mid = assign_ids(Prefix.METER, [(m.name, m.explicit_id) for m in cp.meters
                                    if m.direct_table is None], diags, taken)
    dmid = assign_ids(Prefix.DIRECT_METER, [(m.name, m.explicit_id) for m in cp.meters
                                            if m.direct_table is not None], diags, taken)
    rid = assign_ids(Prefix.REGISTER, [(r.name, r.explicit_id) for r in cp.registers], diags,
                     taken)
    did = assign_ids(Prefix.DIGEST, [(d.name, None) for d in cp.digests], diags, taken)
    apid = assign_ids(Prefix.ACTION_PROFILE, [(p.name, p.explicit_id)
                                              for p in cp.action_profiles], diags, taken)
    vid = assign_ids(Prefix.VALUE_SET, [(v.name, v.explicit_id) for v in cp.value_sets], diags,
                     taken)
    hid = assign_ids(Prefix.CONTROLLER_HEADER,
                     [(h.type_name, None) for h in cp.controller_headers], diags, taken)
    alias = aliases([t.name for t in cp.tables] + [a.name for a in cp.actions]
                    + [v.name for v in cp.value_sets] + [p.name for p in cp.action_profiles]
                    + [c.name for c in cp.counters] + [m.name for m in cp.meters]
                    + [r.name for r in cp.registers] + [h.name for h in cp.controller_headers]
                    + [d.name for d in cp.digests])
    direct_ids = {**dcid, **dmid}
    for t in cp.tables:
        pt = info.tables.add()
        _preamble(pt.preamble, tid[t.name], t.name, alias[t.name], t.annotations)
        for i, k in enumerate(t.keys, 1):
            mf = pt.match_fields.add()
            mf.id = i
            mf.name = k.name
            mf.bitwidth = k.bitwidth
            mf.match_type = _MATCH[k.match_type]
            add_annotations(mf, k.annotations)
            if k.type_name:
                mf.type_name.name = k.type_name
        for ref in t.actions:
            ar = pt.action_refs.add()
            ar.id = aid[ref.name]
            if ref.scope:
                ar.scope = p4info_pb2.ActionRef.Scope.Value(ref.scope)
            add_annotations(ar, ref.annotations)
        if t.default_action:
            if t.default_const:
                pt.const_default_action_id = aid[t.default_action]
            pt.initial_default_action.action_id = aid[t.default_action]
            act = next(a for a in cp.actions if a.name == t.default_action)
            for (pname, width), value in zip(act.params, t.default_args):
                arg = pt.initial_default_action.arguments.add()
                arg.param_id = act.params.index((pname, width)) + 1
                arg.value = value.to_bytes(max((width + 7) // 8, 1), "big")
        for res in t.direct_resources:
            pt.direct_resource_ids.append(direct_ids[res])
        if t.implementation:
            pt.implementation_id = apid[t.implementation]
        pt.size = t.size
        if t.support_timeout:
            # p4c: `support_timeout = true` is the only ageing a v1model table has, and the
            # target notifies the controller (P4Info has no other behaviour for bmv2).
            pt.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
        if t.is_const:
            pt.is_const_table = True
        if t.has_entries:
            pt.has_initial_entries = True
    for a in cp.actions:
        pa = info.actions.add()
        _preamble(pa.preamble, aid[a.name], a.name, alias[a.name], a.annotations)
        for i, (pname, width) in enumerate(a.params, 1):
            p = pa.params.add()
            p.id = i
            p.name = pname
            if width:              # a `string`-translated parameter has no bitwidth
                p.bitwidth = width
            if i <= len(a.param_types) and a.param_types[i - 1]:
                p.type_name.name = a.param_types[i - 1]
    units = {"PACKETS": p4info_pb2.CounterSpec.PACKETS, "BYTES": p4info_pb2.CounterSpec.BYTES,
             "BOTH": p4info_pb2.CounterSpec.BOTH}
    for c in cp.counters:
        if c.direct_table is None:
            pc = info.counters.add()
            _preamble(pc.preamble, cid[c.name], c.name, alias[c.name], c.annotations)
            pc.spec.unit = units[c.unit]
            pc.size = c.size
    for c in cp.counters:
        if c.direct_table is not None:
            pd = info.direct_counters.add()
            _preamble(pd.preamble, dcid[c.name], c.name, alias[c.name], c.annotations)
            pd.spec.unit = units[c.unit]
            pd.direct_table_id = tid.get(c.direct_table, 0)
    munits = {"PACKETS": p4info_pb2.MeterSpec.PACKETS, "BYTES": p4info_pb2.MeterSpec.BYTES}
    for m in cp.meters:
        if m.direct_table is None:
            pm = info.meters.add()
            _preamble(pm.preamble, mid[m.name], m.name, alias[m.name], m.annotations)
            pm.spec.unit = munits[m.unit]
            pm.size = m.size
    for m in cp.meters:
        if m.direct_table is not None:
            pdm = info.direct_meters.add()
            _preamble(pdm.preamble, dmid[m.name], m.name, alias[m.name], m.annotations)
            pdm.spec.unit = munits[m.unit]
            pdm.direct_table_id = tid.get(m.direct_table, 0)
    for h in cp.controller_headers:
        ph = info.controller_packet_metadata.add()
        _preamble(ph.preamble, hid[h.type_name], h.name, alias[h.name], h.annotations)
        for i, (fname, width) in enumerate(h.fields, 1):
            md = ph.metadata.add()
            md.id = i
            md.name = fname
            md.bitwidth = width
            if i <= len(h.field_types) and h.field_types[i - 1]:
                md.type_name.name = h.field_types[i - 1]
    for r in cp.registers:
        pr = info.registers.add()
        _preamble(pr.preamble, rid[r.name], r.name, alias[r.name], r.annotations)
        if r.enum:
            pr.type_spec.serializable_enum.name = r.enum
        elif r.signed:
            pr.type_spec.bitstring.int.bitwidth = r.bitwidth
        else:
            pr.type_spec.bitstring.bit.bitwidth = r.bitwidth
        pr.size = r.size
    for ap in cp.action_profiles:
        pp = info.action_profiles.add()
        _preamble(pp.preamble, apid[ap.name], ap.name, alias[ap.name], ap.annotations)
        pp.table_ids.extend(tid[t] for t in ap.tables if t in tid)
        pp.with_selector = ap.with_selector
        pp.size = ap.size
        pp.max_group_size = ap.max_group_size
        if ap.semantics == "sum_of_weights":
            pp.sum_of_weights.SetInParent()
        elif ap.semantics == "sum_of_members":
            pp.sum_of_members.SetInParent()
            if ap.max_member_weight:
                pp.sum_of_members.max_member_weight = ap.max_member_weight
    for v in cp.value_sets:
        pv = info.value_sets.add()
        _preamble(pv.preamble, vid[v.name], v.name, alias[v.name], v.annotations)
        for i, (fname, width, kind) in enumerate(v.matches, 1):
            mf = pv.match.add()
            mf.id = i
            if fname:
                mf.name = fname
            mf.bitwidth = width
            mf.match_type = _MATCH.get(kind, p4info_pb2.MatchField.EXACT)
        pv.size = v.size
    for d in cp.digests:
        pdg = info.digests.add()
        _preamble(pdg.preamble, did[d.name], d.name, alias[d.name], ())
        if d.tuple:  # p4c: a tuple type spec; type_info present, empty
            info.type_info.SetInParent()
            pdg.type_spec.tuple.SetInParent()
        else:
            pdg.type_spec.struct.name = d.name
            st = info.type_info.structs[d.name]
        for fname, width, spec in d.fields:
            if d.tuple:
                mem = pdg.type_spec.tuple.members.add()
            else:
                smem = st.members.add()
                smem.name = fname
                mem = smem.type_spec
            kind, _, tname = spec.partition(":")
            if kind == "bool":
                mem.bool.SetInParent()
            elif kind == "error":
                mem.error.SetInParent()
            elif kind == "enum":
                mem.enum.name = tname
            elif kind == "serializable_enum":
                mem.serializable_enum.name = tname
            elif kind == "new_type":
                mem.new_type.name = tname
            elif kind == "int":
                mem.bitstring.int.bitwidth = width
            else:
                mem.bitstring.bit.bitwidth = width
    for name, nt in cp.new_types.items():
        spec = info.type_info.new_types[name]
        if nt.uri:
            spec.translated_type.uri = nt.uri
            if nt.sdn_width:
                spec.translated_type.sdn_bitwidth = nt.sdn_width
            else:
                spec.translated_type.sdn_string.SetInParent()
        elif nt.signed:
            spec.original_type.bitstring.int.bitwidth = nt.width
        else:
            spec.original_type.bitstring.bit.bitwidth = nt.width
        spec.annotations.extend(nt.annotations)
    for ename, members in cp.plain_enums.items():
        pe = info.type_info.enums[ename]
        for mname in members:
            pe.members.add().name = mname
    if cp.errors:
        info.type_info.error.members.extend(cp.errors)
    for name, em in cp.enums.items():
        se = info.type_info.serializable_enums[name]
        se.underlying_type.bitwidth = em.bitwidth
        for mname, value in em.members:
            mem = se.members.add()
            mem.name = mname
            mem.value = (value & ((1 << em.bitwidth) - 1)).to_bytes((em.bitwidth + 7) // 8,
                                                                      "big")
    if _touches_type_info(cp):
        info.type_info.SetInParent()
    return info


def _touches_type_info(cp: ControlPlane) -> bool:
    """p4c writes a (possibly empty) ``type_info`` as soon as it serializes something that
    could carry a user-defined type: a table (its match fields), an action parameter, a
    controller header, an extern instance, or an extern function called from a control
    (control-plane/p4RuntimeSerializer.cpp calls mutable_type_info() for each of those)."""
    return bool(cp.tables or cp.counters or cp.meters or cp.registers or cp.digests
                or cp.action_profiles
                or cp.controller_headers or cp.extern_functions
                or any(a.params for a in cp.actions))


def p4info_text(info: p4info_pb2.P4Info) -> str:
    return _HEADER + text_format.MessageToString(info)
