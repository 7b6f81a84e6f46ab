"""Tools built on top of netsum's pieces, not part of the emulator itself: `stf`, the
conformance runner that plays p4c's STF tests on netsum-switch (`netsum-stf`).
"""
