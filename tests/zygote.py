"""`python -m codegen.cli ARGS` and `python -c CODE ARGS` as new processes, without paying Python's
start-up and the CLI's imports for each (~0.3 s of CPU, most of a failing run).

A zygote process imports the CLI and the pipeline once; each run is a fork of it, which sets its own
working directory, environment, argv and stdin/stdout/stderr (files), then runs the module as
`__main__` (or the code) exactly as `python -m`/`-c` do: a `SystemExit`, an uncaught exception
(traceback on stderr, exit 1) and the interpreter's own shutdown all end the process as they would
there. So a test still sees what a user would see: the exit status of a real process and every
byte it wrote to its file descriptors. Where `os.fork` does not exist, a plain subprocess runs.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SERVER = r"""
import gc, json, os, runpy, sys

import codegen.cli, codegen.generate  # what every run imports, and what Typer imports while it runs:
for name in ("typer._adapters", "typer._click.decorators"):
    try:
        __import__(name)
    except ImportError:  # (another Typer: the runs import what they need)
        pass

requests, replies = os.fdopen(int(sys.argv[1]), "r"), os.fdopen(int(sys.argv[2]), "w")
gc.freeze()  # the children's garbage collector leaves the inherited objects (and their pages) alone
for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid:
        replies.write(f"{pid}\n")
        replies.flush()
        replies.write(f"{os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}\n")
        replies.flush()
        continue
    requests.close()
    replies.close()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(opened, fd)
        os.close(opened)
    if request["module"]:
        sys.argv = ["-m", *request["args"]]
        sys.path[0] = os.getcwd()
        del sys.modules[request["module"]]  # run as __main__, not found already imported
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *request["args"]]
        sys.path[0] = ""
        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    sys.exit(0)
"""


class Zygote:
    """One zygote process: `with Zygote(scratch, env) as zygote:`, once per test session. `env` is its
    environment and the runs' default one (default: this process's, less ACP_CODEGEN_DEBUG)."""

    def __init__(self, scratch: Path, env: Mapping[str, str] | None = None) -> None:
        self.scratch = scratch  # where the runs' stdout/stderr go
        self.env = {k: v for k, v in os.environ.items() if k != "ACP_CODEGEN_DEBUG"} if env is None else dict(env)
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None
        if not hasattr(os, "fork"):
            return
        self.log = (scratch / "zygote.err").open("wb")
        requests_read, self.requests = os.pipe()
        self.replies, replies_write = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(requests_read), str(replies_write)],
            pass_fds=(requests_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # as the runs' are: not a terminal (their buffering)
            stderr=self.log,
            env=self.env,
        )
        os.close(requests_read)
        os.close(replies_write)
        self.reply_buffer = b""

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            os.close(self.requests)
            os.close(self.replies)
            self.proc.wait(timeout=30)
            self.log.close()

    def _reply(self, timeout: float) -> int | None:
        while b"\n" not in self.reply_buffer:
            ready, _, _ = select.select([self.replies], [], [], timeout)
            if not ready:
                return None
            data = os.read(self.replies, 4096)
            assert data, (self.scratch / "zygote.err").read_text()  # the zygote process exited
            self.reply_buffer += data
        line, self.reply_buffer = self.reply_buffer.split(b"\n", 1)
        return int(line)

    def run(
        self,
        args: Sequence[str],
        *,
        code: str | None = None,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """`python -m codegen.cli *args` (or `python -c code *args`) in `cwd` with `env` (default: the
        zygote's); its stdin is empty, its output captured as text."""
        env = self.env if env is None else dict(env)
        command = [sys.executable, *(["-c", code] if code is not None else ["-m", "codegen.cli"]), *args]
        if self.proc is None:
            return subprocess.run(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
            )
        self.runs += 1
        stdout, stderr = self.scratch / f"{self.runs}.out", self.scratch / f"{self.runs}.err"
        request = {
            "module": None if code is not None else "codegen.cli",
            "code": code,
            "args": list(args),
            "cwd": str(cwd),
            "env": env,
            "stdout": str(stdout),
            "stderr": str(stderr),
        }
        os.write(self.requests, (json.dumps(request) + "\n").encode())
        pid = self._reply(30)
        assert pid is not None, "the zygote process does not answer"
        status = self._reply(timeout)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            self._reply(30)
            raise subprocess.TimeoutExpired(command, timeout)
        return subprocess.CompletedProcess(
            command, status, stdout.read_text(encoding="utf-8"), stderr.read_text(encoding="utf-8")
        )
