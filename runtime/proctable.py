"""Who is in a process group, and which descendants left it: read from Linux's /proc (elsewhere,
only whether the group still exists). `process` uses it to stop an agent with everything it
started."""

from __future__ import annotations

import os
from typing import NamedTuple


class Stat(NamedTuple):
    state: bytes  # R, S, D, Z (zombie), ...
    ppid: int
    pgrp: int
    start: int  # start time in clock ticks since boot: tells a reused pid apart
    cpu: int = 0  # CPU time in clock ticks: its own and its reaped children's (user + system)


def proc_stat(pid: int | str) -> Stat | None:
    """A Linux process's /proc/PID/stat, or None if it is gone (or there is no /proc)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime priority nice threads itrealvalue starttime ...": comm may hold
    # spaces and parentheses, so fields are counted from its closing parenthesis.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    cpu = sum(int(ticks) for ticks in fields[11:15])  # utime stime cutime cstime
    return Stat(fields[0], int(fields[1]), int(fields[2]), int(fields[19]), cpu)


def is_live(stat: Stat | None) -> bool:
    return stat is not None and stat.state not in (b"Z", b"X")


def process_table() -> dict[int, Stat] | None:
    """Every process's stat (Linux), or None where there is no /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, Stat] = {}
    for name in names:
        if name.isdigit():
            stat = proc_stat(name)
            if stat is not None:
                table[int(name)] = stat
    return table


def group_cpu_seconds(pgid: int) -> float | None:
    """The CPU time the live processes of group `pgid` have used, with their reaped children
    (Linux); None where there is no /proc."""
    table = process_table()
    if table is None:
        return None
    ticks = sum(stat.cpu for stat in table.values() if stat.pgrp == pgid)
    return ticks / _TICKS


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (POSIX; zombies excluded on Linux).

    Where there is no /proc, a process group that still exists yields `[pgid]`."""
    table = process_table()
    if table is not None:
        return [pid for pid, stat in table.items() if stat.pgrp == pgid and is_live(stat)]
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        return [pgid]
    return [pgid]


def strays(root: int, pgid: int) -> dict[int, int]:
    """The live descendants of `root` that left process group `pgid` (`setsid`, a detached
    child), as pid -> start time (Linux; empty elsewhere). Found through parent links, so
    only while the processes between them and `root` still run."""
    table = process_table()
    if table is None:
        return {}
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: dict[int, int] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        stat = table[pid]
        if stat.pgrp != pgid and is_live(stat):
            found[pid] = stat.start
        todo.extend(children.get(pid, ()))
    return found


TAG_VARIABLE = "ACP_PROCESS_TAG"
"""The environment variable `process` marks a command with: every descendant inherits it, so
those that left the group and lost their parent (`setsid` and a double fork, a daemon) are
still found (a process that clears its environment is not)."""


def tagged(tag: str) -> dict[int, int]:
    """The live processes whose environment holds `TAG_VARIABLE=tag`, as pid -> start time
    (Linux, the caller's own user's processes; empty elsewhere)."""
    table = process_table()
    if table is None:
        return {}
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found: dict[int, int] = {}
    for pid, stat in table.items():
        if not is_live(stat):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue  # gone, or another user's
        if needle in environ.split(b"\0"):
            found[pid] = stat.start
    return found


def command_line(pid: int) -> str:
    """A process's command line, for a report (empty when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read(4096)
    except OSError:
        return ""
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
