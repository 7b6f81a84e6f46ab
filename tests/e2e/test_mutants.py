"""The checks cannot be fooled: deliberately broken copies of p4/netsum.p4 must fail the
end-to-end tests that claim exact sums -- the way the weakness was found (a switch returning
exp = 255 passed the two-level tree test and the 10 %-drop daemon test, whose bounds came from
what the switch returned).

Each mutant is p4/ copied to a temporary directory with one change to the RESULT-making
actions (`multicast_result`, and `reply_result` for duplicates), compiled by netsum-p4c, and
the end-to-end tests run in a subprocess against it (NETSUM_P4_DIR, netsum.paths): every one
of them must fail, and for a reason that is a check of the sum (not a build or set-up error).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, checkout_env
from netsum.wire import K_DEFAULT

#: The tests the issue names: a two-level tree and the daemon with 10 % drops each way.
VICTIMS = ("tests/e2e/test_allreduce_tree.py::test_allreduce_through_a_tree[multi-packet]",
           "tests/unit/test_transport_switch.py")
#: What a failure must say: one of the checks that derive from the inputs, or a worker's own.
CAUGHT = re.compile(r"exceeds bound|agrees exponent|is not zero|not the max of every worker")

_ACTIONS = ("multicast_result", "reply_result")
MUTANTS: dict[str, list[tuple[str, str]]] = {
    # the issue's: every result claims exponent 255, so every value dequantizes to ~0
    "exp=255": [("hdr.netsum.exp = meta.exp;", "hdr.netsum.exp = 8w255;")],
    # subtler: one exponent too high (halving the precision of the next block) only where some
    # worker proposed a block (EXP_ZERO stays), so the worker's own check (nonzero where no
    # block follows) cannot see it: only the exponents and bounds derived from the inputs do
    "exp+1": [("hdr.netsum.exp = meta.exp;",
               "hdr.netsum.exp = meta.exp == 0 ? meta.exp : meta.exp + 1;")],
    # a result of zeros
    "zeros": [("hdr.netsum.msg_type = MSG_RESULT;",
               "hdr.netsum.msg_type = MSG_RESULT;\n        NS_VALUES(NS_ZERO_VALUE)")],
    # one lane's sum off by one
    "lane+1": [("hdr.netsum.msg_type = MSG_RESULT;",
                "hdr.netsum.msg_type = MSG_RESULT;\n        hdr.values.v000 = hdr.values.v000 + 1;")],
}


def mutate(text: str, edits: list[tuple[str, str]]) -> str:
    """Apply each (old, new) once inside each RESULT-making action's body."""
    for action in _ACTIONS:
        start = text.index(f"action {action}() {{")
        end = text.index("\n    }\n", start)
        body = text[start:end]
        for old, new in edits:
            assert body.count(old) == 1, (action, old)
            body = body.replace(old, new)
        text = text[:start] + body + text[end:]
    # the zeroing X-macro, defined once before the actions that use it
    anchor = "    action multicast_result() {"
    return text.replace(anchor, "#define NS_ZERO_VALUE(f, r) hdr.values.f = 0;\n" + anchor, 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_fails_the_end_to_end_tests(name: str, tmp_path: Path) -> None:
    p4 = tmp_path / "p4"
    shutil.copytree(ROOT / "p4", p4, ignore=shutil.ignore_patterns("build"))
    source = p4 / "netsum.p4"
    original = source.read_text()
    source.write_text(mutate(original, MUTANTS[name]))
    assert source.read_text() != original
    env = dict(checkout_env(), NETSUM_P4_DIR=str(p4))
    # Built here first, at every K the victims run (the tree test at the default K, the
    # transport test at K=32): a mutant that does not compile would fail the victims for the
    # wrong reason.
    ks = sorted({32, K_DEFAULT})
    build = subprocess.run([sys.executable, "-c", "from netsum.build import ensure_built; "
                            f"[print(ensure_built(k)[0]) for k in {ks}]"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    built = build.stdout.split()
    assert len(built) == len(ks) and all(p.startswith(str(tmp_path)) for p in built), \
        build.stdout                                                      # the mutant's builds
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", "--timeout", "240", *VICTIMS], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    summary = re.search(r"(\d+) failed(?:, (\d+) passed)?", out)
    assert run.returncode == 1 and summary, f"mutant {name} was not caught:\n{out[-3000:]}"
    assert summary.group(2) is None, f"mutant {name}: some victims passed:\n{out[-3000:]}"
    assert CAUGHT.search(out), f"mutant {name} failed, but not on a sum check:\n{out[-3000:]}"
