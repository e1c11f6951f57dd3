"""Holding off the cyclic garbage collector while a large array is decoded.

A decoded object is a GC-tracked container that survives: on a message with 100,000 array
items the collector's passes over the growing heap were ~60% of `from_dict`'s time, finding
nothing to free (the objects are all reachable). The generated decoders hold the collector
for an array of `HOLD_FROM` items or more and release it when the array is done, on success
or on an error alike; a small array pays one `len` check.

The hold is process-wide (as `gc.disable` is) and nests across frames and threads: the first
hold disables the collector only if it was enabled, the last release re-enables it only then.
A program that calls `gc.disable()` itself while a hold is taken gets the collector back when
the hold ends: the one case this cannot tell apart.
"""

from __future__ import annotations

import gc
import threading
from typing import Final

HOLD_FROM: Final = 4096
"""Array length from which decoding holds the collector (a few of its young passes' worth)."""

_lock: Final = threading.Lock()
_state: Final = [0, False]  # [holds taken, whether the first hold disabled the collector]


def gc_hold() -> None:
    """Take a hold: the collector stays off until every hold is released."""
    with _lock:
        if _state[0] == 0:
            _state[1] = gc.isenabled()
            if _state[1]:
                gc.disable()
        _state[0] += 1


def gc_release() -> None:
    """Release a hold taken by `gc_hold`; the last one restores the collector as it was."""
    with _lock:
        _state[0] -= 1
        if _state[0] == 0 and _state[1]:
            _state[1] = False
            gc.enable()


def gc_holds() -> int:
    """How many holds are taken now (0 when decoding no large array; for tests)."""
    return _state[0]
