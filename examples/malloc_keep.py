"""Keeping freed memory for the next large message, on glibc (`--listen`'s `--malloc-keep`;
docs/security.md, "Server settings").

glibc serves every allocation over its mmap threshold (128 KiB, raised as large blocks are freed,
at most 32 MiB) with a fresh mmap and unmaps it when freed, and it returns the heap's free top to
the system past its trim threshold. A WebSocket message is copied several times on its way in
(websockets' buffer, the unmasked payload, uvicorn's text, the app's bytes, the parsed value), so
each 7 MiB message faulted its pages in again: about 7,000 minor page faults and 20 ms of system
CPU per message (of 30-34 ms in all), against 2,000 and 5 ms with the memory kept (15-19 ms).

`keep_freed_memory(keep)` serves allocations up to 32 MiB (glibc's largest threshold, over the
8 MiB message limit) from the heap and keeps up to `keep` bytes of its freed top. The cost is
RSS: what the budgets let in (the receive budget and `max_inflight_bytes`) stays resident after a
burst, up to `keep` more than the live data, instead of going back to the system.
"""

from __future__ import annotations

import ctypes
import platform
from typing import Final

MMAP_THRESHOLD: Final = 32 * 1024 * 1024  # the largest glibc accepts (HEAP_MAX_SIZE / 2 on 64 bits)
_M_TRIM_THRESHOLD: Final = -1  # mallopt's parameters (malloc.h)
_M_MMAP_THRESHOLD: Final = -3


def keep_freed_memory(keep: int) -> bool:
    """Serve allocations up to MMAP_THRESHOLD from the heap and keep `keep` bytes of its free
    top (0: glibc's defaults, untouched). False where it cannot (not glibc, or mallopt refused)."""
    if keep < 0:
        raise ValueError(f"keep takes bytes >= 0, got {keep!r}")
    if keep == 0 or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; an int parameter, so `keep` is capped at 2 GiB - 1.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, min(keep, 2**31 - 1)))
