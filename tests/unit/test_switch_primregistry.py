"""The primitive registry (netsum.switch.primregistry): the emitter modules register into it and
never import each other; the code generators find every primitive through it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from netsum.switch import actions  # noqa: F401  (imports the emitter modules)
from netsum.switch.primregistry import primitive, primitive_names, required


def _modules_after(mod: str) -> set[str]:
    """netsum.switch modules loaded by importing `mod` alone, in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, {mod}; print(' '.join(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True).stdout.split()
    return {m for m in out if m.startswith("netsum.switch.")}


@pytest.mark.parametrize("mod, other", [("netsum.switch.primitives", "netsum.switch.headerops"),
                                        ("netsum.switch.headerops", "netsum.switch.primitives"),
                                        ("netsum.switch.primregistry", "netsum.switch.primitives")])
def test_emitter_modules_do_not_import_each_other(mod: str, other: str) -> None:
    loaded = _modules_after(mod)
    assert mod in loaded and other not in loaded


def test_every_primitive_of_both_modules_is_registered() -> None:
    # The names bmv2's v1model core defines, spread over both emitter modules (hand list).
    want = {"assign", "modify_field", "add", "subtract", "bit_and", "bit_or", "bit_xor",
            "shift_left", "shift_right", "add_to_field", "subtract_from_field", "drop",
            "mark_to_drop", "no_op", "register_read", "register_write", "count",
            "execute_meter", "clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress",
            "resubmit", "recirculate", "modify_field_with_hash_based_offset",
            "modify_field_rng_uniform", "generate_digest", "truncate", "log_msg", "exit",
            "assert", "assume",
            # netsum.switch.headerops
            "assign_header", "copy_header", "assign_union", "assign_header_stack",
            "assign_union_stack", "push", "pop", "add_header", "remove_header", "assign_VL"}
    assert want <= primitive_names()


def test_a_name_registers_once() -> None:
    with pytest.raises(RuntimeError, match="registered twice"):
        primitive("assign")(lambda ctx, p: [])


def test_required_names_a_missing_emitter() -> None:
    with pytest.raises(RuntimeError, match="no emitter"):
        required("no_such_primitive")
