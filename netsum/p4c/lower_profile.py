"""Table implementations: v1model's ``action_profile`` and ``action_selector``.

A table with ``implementation = P`` becomes a BMv2 ``indirect`` table (``indirect_ws`` with a
selector) naming the profile; its action data lives in the profile's members and groups, which
the control plane writes (P4Runtime ActionProfileMember/Group).  As p4c 1.2.5.16 does:

- the profile is an instance (``action_profile(32w128) ap;`` in a control or at file scope,
  named like any extern instance) or an anonymous one written in the property, which needs a
  ``@name`` on the property (P4Runtime has no name for it otherwise; p4c rejects it too) and is
  then named by that annotation as written, without the control's prefix;
- ``selector`` keys are not match fields: they are the selector's hash input, in key order;
- the JSON lists a profile in the pipeline of the first table using it (in that table's
  order) and an indirect table has no ``default_entry``; P4Info lists every profile instance,
  used or not, ordered by name, with the ids of the tables using it;
- ``@max_group_size``, ``@selector_size_semantics`` and ``@max_member_weight`` are fields of
  a selector's P4Info entry, not preamble annotations (on a plain profile they mean nothing).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import ast as A
from .blocks import annotation_arg
from .diagnostics import Diagnostics, Pos
from .exprjson import Json
from .lower_extern import HASH_ALGOS
from .model import ActionProfileModel
from .resolve import ConstValue, Globals, const_eval
from .scopes import Env, ExternInstance, SymKind
from .types import EnumT

__all__ = ["PROFILE_EXTERNS", "Profiles"]

PROFILE_EXTERNS = ("action_profile", "action_selector")
#: Annotations P4Info turns into fields of the profile (never preamble annotations).
PROFILE_ANNOTATIONS = frozenset({"max_group_size", "selector_size_semantics",
                                 "max_member_weight"})


@dataclass
class _Profile:
    name: str
    selector: bool
    size: int
    algo: str
    annotations: tuple[A.Annotation, ...]
    explicit_id: int | None
    tables: list[str] = field(default_factory=list)
    inputs: list[Json] | None = None     # selector input fields (set by the first table)
    listed: bool = False                 # already in some pipeline's JSON


@dataclass
class Profiles:
    diags: Diagnostics
    g: Globals
    by_name: dict[str, _Profile] = field(default_factory=dict)
    pipeline: list[Json] = field(default_factory=list)  # the current pipeline's JSON list

    def take_pipeline(self) -> list[Json]:
        out, self.pipeline = self.pipeline, []
        return out

    def bind(self, table: str, prop: A.TableProperty, env: Env,
             selector_inputs: list[Json]) -> _Profile | None:
        """The profile ``prop`` (a table's ``implementation``) names or creates, with ``table``
        recorded as a user; None (reported) when it is not one."""
        prof = self._resolve(table, prop, env)
        if prof is None:
            return None
        if prof.selector and not selector_inputs:
            self.diags.error(prop.pos, f"table '{table}' uses action selector '{prof.name}' "
                                       "but has no 'selector' key")
            return None
        if not prof.selector and selector_inputs:
            self.diags.warning(prop.pos, f"table '{table}' has 'selector' keys but its "
                                         f"implementation '{prof.name}' is an action_profile; "
                                         "they are ignored")
        if prof.selector:
            if prof.inputs is None:
                prof.inputs = list(selector_inputs)
            elif prof.inputs != selector_inputs:
                self.diags.error(prop.pos, f"unsupported construct: action selector "
                                           f"'{prof.name}' shared by tables with different "
                                           "selector keys")
                return None
        prof.tables.append(table)
        if not prof.listed:
            prof.listed = True
            j: Json = {"name": prof.name, "id": len(self.pipeline), "max_size": prof.size}
            if prof.selector:
                j["selector"] = {"algo": prof.algo, "input": prof.inputs}
            self.pipeline.append(j)
        return prof

    def _resolve(self, table: str, prop: A.TableProperty, env: Env) -> _Profile | None:
        v = prop.value
        if isinstance(v, A.Name):
            sym = env.lookup(v.name)
            inst = sym.value if sym is not None and sym.kind is SymKind.EXTERN else \
                self.g.extern_objects.get(v.name) if sym is None else None
            if not isinstance(inst, ExternInstance) or inst.extern not in PROFILE_EXTERNS:
                self.diags.error(v.pos, f"table '{table}': implementation must be an "
                                        "action_profile or action_selector, "
                                        f"not '{v.name}'")
                return None
            return self.instance(inst)
        if isinstance(v, A.Call) and isinstance(v.func, A.Name) and \
                v.func.name in PROFILE_EXTERNS:
            named = annotation_arg(prop.annotations, "name")
            if not isinstance(named, A.StrLit):
                self.diags.error(prop.pos, f"table '{table}' has an anonymous "
                                           "'implementation' with no @name annotation, which "
                                           "P4Runtime cannot name")
                return None
            name = named.value.lstrip(".")
            if name in self.by_name:
                self.diags.error(prop.pos, f"action profile '{name}' is declared twice")
                return None
            args = [const_eval(a.value, self.g, self.diags) if a.value is not None else None
                    for a in v.args]
            prof = self._make(name, v.func.name, args, prop.annotations, v.pos)
            if prof is not None:
                self.by_name[name] = prof
            return prof
        self.diags.error(prop.pos, f"table '{table}': implementation must be an "
                                   "action_profile or action_selector")
        return None

    def instance(self, inst: ExternInstance) -> _Profile | None:
        """The profile of a declared instance (made on first use)."""
        prof = self.by_name.get(inst.name)
        if prof is None:
            prof = self._make(inst.name, inst.extern, list(inst.args), inst.decl.annotations,
                              inst.decl.pos)
            if prof is not None:
                self.by_name[inst.name] = prof
        return prof

    def _make(self, name: str, extern: str, args: list[ConstValue | None],
              annos: tuple[A.Annotation, ...], pos: Pos) -> _Profile | None:
        selector = extern == "action_selector"
        want = 3 if selector else 1
        if len(args) != want or any(a is None for a in args):
            if len(args) != want:
                self.diags.error(pos, f"{extern} takes {want} constructor argument(s), "
                                      f"got {len(args)}")
            return None
        size_cv = args[1] if selector else args[0]
        assert size_cv is not None
        size = size_cv.value
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size < 2 ** 32:
            self.diags.error(pos, f"{extern} size must be a positive bit<32> value")
            return None
        algo = ""
        if selector:
            a0 = args[0]
            assert a0 is not None
            if not (isinstance(a0.type, EnumT) and a0.type.name == "HashAlgorithm"):
                self.diags.error(pos, "the action_selector's algorithm must be a "
                                      "HashAlgorithm constant")
                return None
            algo = a0.type.members[int(a0.value)]
            if algo not in HASH_ALGOS:
                self.diags.error(pos, f"unsupported construct: hash algorithm '{algo}'")
                return None
        eid = annotation_arg(annos, "id")
        return _Profile(name, selector, size, algo, annos,
                        eid.value if isinstance(eid, A.IntLit) else None)

    def models(self, strings: Callable[[tuple[A.Annotation, ...]], tuple[str, ...]]
               ) -> list[ActionProfileModel]:
        """P4Info's action profiles, ordered by name as p4c lists them (``strings`` renders
        preamble annotations)."""
        out: list[ActionProfileModel] = []
        for name in sorted(self.by_name):
            p = self.by_name[name]
            kept = tuple(a for a in p.annotations if a.name not in PROFILE_ANNOTATIONS)
            group = semantics = ""
            weight = 0
            if p.selector:
                mg = annotation_arg(p.annotations, "max_group_size")
                group = str(mg.value) if isinstance(mg, A.IntLit) else ""
                ss = annotation_arg(p.annotations, "selector_size_semantics")
                semantics = ss.value if isinstance(ss, A.StrLit) else ""
                mw = annotation_arg(p.annotations, "max_member_weight")
                if semantics == "sum_of_members" and isinstance(mw, A.IntLit):
                    weight = mw.value
            out.append(ActionProfileModel(
                name, tuple(p.tables), p.selector, p.size, int(group or 0), semantics, weight,
                strings(kept), p.explicit_id))
        return out
