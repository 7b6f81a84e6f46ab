"""`netsum-ctl`: the controller's command line with netsum's own aggregation program as the
pipeline it pushes when no --p4info is given (built from p4/netsum.p4 for --k when stale).

The controller package knows no P4 source and does not import the build (a lower layer must
not reach up into this one); this entry point hands the build in.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from netsum.controller import cli
from netsum.controller.errors import ControllerError

__all__ = ["main", "build_netsum"]


def build_netsum(k: int) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of p4/netsum.p4 for K=k, built if stale."""
    from netsum.build import BuildError, ensure_built

    try:
        return ensure_built(k=k)
    except BuildError as exc:
        raise ControllerError(f"building p4/netsum.p4 failed: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, build=build_netsum)


if __name__ == "__main__":
    sys.exit(main())
