"""Can Mininet run here?  The one check shared by the experiment script and the tests.

Kept apart from mnswitch.py because that module subclasses Mininet's `Switch` at import time:
the question "is Mininet importable?" has to be answerable without importing it first.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

__all__ = ["environment_problem"]

#: Commands Mininet and mnswitch.py run on the hosts and switch ports.
_TOOLS = (("mnexec", "Mininet's mnexec (apt-get install mininet)"),
          ("ip", "iproute2"),
          ("ethtool", "ethtool (host offloads must be turned off)"))


def environment_problem() -> str | None:
    """None when Mininet experiments can run; otherwise one line saying why not."""
    if os.geteuid() != 0:
        return "Mininet needs root (network namespaces, veth pairs, raw sockets)"
    try:
        spec = importlib.util.find_spec("mininet")
    except (ImportError, ValueError):
        spec = None
    # A namespace spec (origin None) is this repository's own mininet/ folder seen from the
    # checkout's root, not the real package.
    found = spec is not None and spec.origin is not None
    if not found:
        return ("the mininet Python package is not importable (apt-get install mininet, then "
                "make it visible to this Python; scripts/setup.sh does both)")
    for tool, what in _TOOLS:
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH: needs {what}"
    return None
