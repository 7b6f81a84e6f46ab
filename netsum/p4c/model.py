"""The control-plane model: what P4Info describes, collected while the JSON is generated.

Frozen records in program order; ``p4info.py`` turns them into the protobuf (ids, aliases).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["KeyModel", "ActionRefModel", "TableModel", "ActionModel", "CounterModel",
           "MeterModel", "RegisterModel", "EnumModel", "ValueSetModel",
           "ActionProfileModel", "ControllerHeaderModel", "DigestModel", "ControlPlane"]


@dataclass(frozen=True, slots=True)
class KeyModel:
    name: str
    bitwidth: int
    match_type: str  # exact, lpm, ternary, range, optional
    annotations: tuple[str, ...] = ()
    type_name: str = ""  # a `type` the field is declared with (P4Info type_name)


@dataclass(frozen=True, slots=True)
class ActionRefModel:
    name: str
    scope: str  # "" | "TABLE_ONLY" | "DEFAULT_ONLY"
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TableModel:
    name: str
    keys: tuple[KeyModel, ...]
    actions: tuple[ActionRefModel, ...]
    default_action: str
    default_args: tuple[int, ...]
    default_const: bool
    size: int
    is_const: bool
    has_entries: bool
    direct_resources: tuple[str, ...]
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    order: tuple[int, ...] = ()  # p4c's P4Info order (BlockScope.rank)
    implementation: str = ""  # its action profile / selector, by name
    support_timeout: bool = False  # P4Info idle_timeout_behavior NOTIFY_CONTROL


@dataclass(frozen=True, slots=True)
class ActionModel:
    name: str
    params: tuple[tuple[str, int], ...]
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    param_types: tuple[str, ...] = ()  # per parameter: its `type` name or ""


@dataclass(frozen=True, slots=True)
class CounterModel:
    name: str
    unit: str  # PACKETS, BYTES, BOTH
    size: int
    direct_table: str | None
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    order: tuple[int, ...] = ()  # p4c's P4Info order (BlockScope.rank)


@dataclass(frozen=True, slots=True)
class MeterModel:
    name: str
    unit: str  # PACKETS, BYTES
    size: int
    direct_table: str | None
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    order: tuple[int, ...] = ()  # p4c's P4Info order (BlockScope.rank)


@dataclass(frozen=True, slots=True)
class RegisterModel:
    name: str
    bitwidth: int
    signed: bool
    size: int
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    order: tuple[int, ...] = ()  # p4c's P4Info order (BlockScope.rank)
    enum: str = ""               # a serializable enum element type, by name


@dataclass(frozen=True, slots=True)
class ActionProfileModel:
    name: str
    tables: tuple[str, ...]      # tables whose implementation it is
    with_selector: bool
    size: int
    max_group_size: int          # 0: not given
    semantics: str               # "", "sum_of_weights" or "sum_of_members"
    max_member_weight: int
    annotations: tuple[str, ...]
    explicit_id: int | None = None


@dataclass(frozen=True, slots=True)
class ValueSetModel:
    name: str
    matches: tuple[tuple[str, int, str], ...]  # (field name or "", bitwidth, match kind)
    size: int
    annotations: tuple[str, ...]
    explicit_id: int | None = None
    order: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EnumModel:
    """A serializable enum P4Info describes in type_info (name, width, members in order)."""

    name: str
    bitwidth: int
    members: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ControllerHeaderModel:
    name: str       # the annotation string, e.g. "packet_out"
    type_name: str  # hashed for the id
    fields: tuple[tuple[str, int], ...]
    annotations: tuple[str, ...]
    field_types: tuple[str, ...] = ()  # per field: its `type` name or ""


@dataclass(frozen=True, slots=True)
class DigestModel:
    name: str  # the data struct's type name (p4c names the digest after it)
    # (member name, bit width, P4Info type spec: "bit", "int", "bool", "error", "enum:NAME",
    # "serializable_enum:NAME" or "new_type:NAME")
    fields: tuple[tuple[str, int, str], ...]
    tuple: bool = False  # a list of values without a struct type: a tuple type spec


@dataclass
class ControlPlane:
    tables: list[TableModel] = field(default_factory=list)
    actions: list[ActionModel] = field(default_factory=list)
    counters: list[CounterModel] = field(default_factory=list)
    meters: list[MeterModel] = field(default_factory=list)
    registers: list[RegisterModel] = field(default_factory=list)
    controller_headers: list[ControllerHeaderModel] = field(default_factory=list)
    digests: list[DigestModel] = field(default_factory=list)
    extern_functions: bool = False  # some control calls an extern function
    enums: dict[str, EnumModel] = field(default_factory=dict)
    value_sets: list[ValueSetModel] = field(default_factory=list)
    action_profiles: list[ActionProfileModel] = field(default_factory=list)
    plain_enums: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type_info.enums
    errors: tuple[str, ...] = ()  # type_info.error, when some P4Info type uses error
    #: type_info.new_types (netsum.p4c.newtypes.NewTypeModel by name)
    new_types: dict[str, Any] = field(default_factory=dict)

    def add_enum(self, t: object) -> None:
        """Record a serializable enum P4Info must describe (EnumT with an underlying type)."""
        name = getattr(t, "name", "")
        under = getattr(t, "underlying", None)
        if under is not None and name not in self.enums:
            self.enums[name] = EnumModel(name, under.width,
                                         tuple(zip(t.members, t.values)))  # type: ignore

    def add_action(self, a: ActionModel) -> None:
        if all(x.name != a.name for x in self.actions):
            self.actions.append(a)
