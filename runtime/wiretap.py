"""The wire tap: what sees every raw line a connection reads and writes, in order, and the
file log (`ACP_WIRE_LOG=<path>`) built on it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Final, Literal

WIRE_LOG_ENV: Final = "ACP_WIRE_LOG"

Direction = Literal["in", "out"]
Tap = Callable[[Direction, bytes], None]
"""A wire tap: called with "in" or "out" and each raw line (without its newline), in order."""


class WireLog:
    """A tap appending each line to a file as one JSON object per line:
    `{"ts": <unix time>, "dir": "in" | "out", "pid": <this process>, "line": <the raw text>}`.

    The file is opened for appending (created with mode 0600: it holds everything said,
    tokens included), so the two ends of a connection may share it; `pid` tells them apart.
    Bytes that are not UTF-8 are shown as U+FFFD."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._pid = os.getpid()

    def __call__(self, direction: Direction, line: bytes) -> None:
        if self._fd is None:
            return
        record = {
            "ts": round(time.time(), 6),
            "dir": direction,
            "pid": self._pid,
            "line": line.decode("utf-8", "replace"),
        }
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        while data:  # one write() in practice: appends from several processes stay whole
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
