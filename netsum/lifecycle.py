"""`Started`: the context-manager life cycle of the orchestration objects that start several
things at once (the rig, the Mininet testbeds, the STF tool's switch).

`with X(...) as x:` calls `x.start()`; if starting fails part-way, `x.close()` undoes what
had started before the error propagates, so a half-started rig never leaks processes,
namespaces or sockets.  Leaving the block calls `x.close()`, which must be safe to call on a
partly started or already closed object.
"""
from __future__ import annotations

from typing import Self

__all__ = ["Started"]


class Started:
    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
