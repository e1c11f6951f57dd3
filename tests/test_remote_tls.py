"""`connect_remote(..., verify=...)` over `wss://` (uvicorn with TLS) and `https://` (hypercorn,
HTTP/2 by ALPN) against a private CA made here with the `openssl` CLI (issue 28 §6): a CA file,
`SSL_CERT_FILE`, `SSL_CERT_DIR`, an `ssl.SSLContext`, and `verify=False`; the default trust
refuses the private CA on both profiles, and a bad CA path is a clear error. The peer is the
official SDK's server (tests/sdk_remote_server.py) on 127.0.0.1, and, with a token, the
example agent served over TLS itself (`echo_agent.py --tls-cert --tls-key`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import client as gen_client
import pytest
from client import remote_options, types

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sdk_remote_server  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:coroutine 'TCPServer._idle_timeout' was never awaited"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make a CA"),
]
TIMEOUT = 30.0


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private CA and a server certificate it signed for 127.0.0.1 and localhost."""
    d = tmp_path_factory.mktemp("pki")
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=acp-codegen test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d,
    )  # fmt: skip
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
        cwd=d,
    )
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d,
    )  # fmt: skip
    hashed = d / "certs"  # an SSL_CERT_DIR: the CA under its subject hash, as c_rehash names it
    hashed.mkdir()
    digest = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", "ca.pem"], cwd=d, capture_output=True, text=True, check=True
    )
    shutil.copy(d / "ca.pem", hashed / f"{digest.stdout.strip()}.0")
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key", "dir": hashed}


@contextlib.asynccontextmanager
async def tls_server(server: str, pki: dict[str, Path]) -> AsyncIterator[tuple[Any, int]]:
    """The SDK server over TLS on 127.0.0.1: uvicorn (WebSocket) or hypercorn (HTTP/2 by ALPN)."""
    sock = sdk_remote_server.bound_socket(0)
    port = sock.getsockname()[1]
    app = sdk_remote_server.make_app()
    stop = asyncio.Event()
    if server == "uvicorn":
        import uvicorn

        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", ws="websockets-sansio",
            ssl_certfile=str(pki["cert"]), ssl_keyfile=str(pki["key"]),
        )  # fmt: skip
        runner = uvicorn.Server(config)
        runner.capture_signals = contextlib.nullcontext  # type: ignore[method-assign, assignment]
        task = asyncio.ensure_future(runner.serve(sockets=[sock]))
        while not runner.started and not task.done():
            await asyncio.sleep(0.01)
    else:
        import hypercorn.asyncio
        from hypercorn.config import Config

        hconfig = Config()
        hconfig.bind = [f"fd://{os.dup(sock.fileno())}"]
        hconfig.certfile, hconfig.keyfile = str(pki["cert"]), str(pki["key"])
        hconfig.loglevel = "WARNING"
        hconfig.graceful_timeout = 0.5
        task = asyncio.ensure_future(hypercorn.asyncio.serve(app, hconfig, shutdown_trigger=stop.wait))
        await asyncio.sleep(0.2)
    try:
        yield app, port
    finally:
        if server == "uvicorn":
            runner.should_exit = runner.force_exit = True
        stop.set()
        done, _ = await asyncio.wait({task}, timeout=5.0)
        if not done:
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        sock.close()


class Quiet(gen_client.Client):
    async def session_update(self, params: types.SessionNotification) -> None:
        pass

    async def session_request_permission(
        self, params: types.RequestPermissionRequest
    ) -> types.RequestPermissionResponse:
        raise NotImplementedError


PROFILES = [("uvicorn", "wss"), ("hypercorn", "https")]


async def _initialize(url: str, verify: Any) -> int:
    async with gen_client.connect_remote(Quiet(), url, verify=verify, open_timeout=5.0) as agent:
        answer = await agent.proxy.initialize(types.InitializeRequest(protocol_version=1), timeout=10.0)
        return answer.protocol_version


def _run_against(server: str, scheme: str, pki: dict[str, Path], verify: Any) -> tuple[int, Any]:
    async def scenario() -> tuple[int, Any]:
        async with tls_server(server, pki) as (app, port):
            return await _initialize(f"{scheme}://127.0.0.1:{port}/acp", verify), app

    async def bounded() -> tuple[int, Any]:
        return await asyncio.wait_for(scenario(), TIMEOUT)

    return asyncio.run(bounded())


@contextlib.contextmanager
def env(**values: str | None) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.mark.parametrize(("server", "scheme"), PROFILES)
def test_a_private_ca_file_is_trusted(pki: dict[str, Path], server: str, scheme: str) -> None:
    version, app = _run_against(server, scheme, pki, str(pki["ca"]))
    assert version == 1
    if scheme == "https":
        assert {r["http_version"] for r in app.requests} == {"2"}  # HTTP/2 by ALPN over TLS


@pytest.mark.parametrize(("server", "scheme"), PROFILES)
@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_ssl_cert_file_and_dir_are_honoured(pki: dict[str, Path], server: str, scheme: str, variable: str) -> None:
    value = str(pki["ca"] if variable == "SSL_CERT_FILE" else pki["dir"])
    with env(**{"SSL_CERT_FILE": None, "SSL_CERT_DIR": None, variable: value}):
        assert _run_against(server, scheme, pki, True)[0] == 1


@pytest.mark.parametrize(("server", "scheme"), PROFILES)
def test_an_ssl_context_and_verify_false_connect(pki: dict[str, Path], server: str, scheme: str) -> None:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    assert _run_against(server, scheme, pki, context)[0] == 1
    assert _run_against(server, scheme, pki, False)[0] == 1


@pytest.mark.parametrize(("server", "scheme"), PROFILES)
def test_the_default_trust_refuses_a_private_ca(pki: dict[str, Path], server: str, scheme: str) -> None:
    with env(SSL_CERT_FILE=None, SSL_CERT_DIR=None), pytest.raises(Exception) as caught:
        _run_against(server, scheme, pki, True)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value) or "certificate verify failed" in str(caught.value)


def test_a_ca_path_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(remote_options.RemoteUnavailable, match="cannot load the TLS trust from CA file"):
        remote_options.tls_context(str(tmp_path / "missing.pem"))
    with pytest.raises(TypeError, match="verify= takes a bool, a CA file path or an ssl.SSLContext"):
        remote_options.tls_context(3)  # type: ignore[arg-type]


ECHO_CLIENT = Path(__file__).resolve().parent.parent / "examples" / "echo_client.py"


@pytest.mark.slow
@pytest.mark.parametrize(("server", "scheme"), PROFILES)
def test_echo_client_sends_the_first_token_and_trusts_the_given_ca(
    pki: dict[str, Path], tmp_path: Path, server: str, scheme: str
) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(
        "# rotation: the first is sent (the agent's format: TOKEN or NAME TOKEN)\n\nalice s3cret-one\ns3cret-two\n"
    )

    async def scenario() -> tuple[int, str, Any]:
        async with tls_server(server, pki) as (app, port):
            url = f"{scheme}://127.0.0.1:{port}/acp"
            args = [str(ECHO_CLIENT), "--url", url, "--token-file", str(tokens), "--verify", str(pki["ca"])]
            proc = await asyncio.create_subprocess_exec(
                sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            return proc.returncode or 0, out.decode(), app

    code, out, app = asyncio.run(scenario())
    assert "passed, 0 failed" in out.strip().splitlines()[-1], out
    assert code == 0
    assert app.requests and {r["authorization"] for r in app.requests} == {"Bearer s3cret-one"}


def test_echo_client_without_a_token_in_the_file_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "tokens.txt"
    empty.write_text("# none yet\n\n")
    done = subprocess.run(
        [sys.executable, str(ECHO_CLIENT), "--url", "ws://127.0.0.1:9/acp", "--token-file", str(empty)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "holds no token" in done.stderr and "Traceback" not in done.stderr


def test_echo_client_refuses_a_token_line_of_three_fields(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.txt"
    bad.write_text("alice s3cret one\n")
    done = subprocess.run(
        [sys.executable, str(ECHO_CLIENT), "--url", "ws://127.0.0.1:9/acp", "--token-file", str(bad)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "tokens.txt:1: expected `TOKEN` or `NAME TOKEN`" in done.stderr
    assert "Traceback" not in done.stderr


ECHO_AGENT = ECHO_CLIENT.parent / "echo_agent.py"


@pytest.mark.slow
def test_echo_agent_serves_tls_with_tokens_to_a_client_that_trusts_the_private_ca(
    pki: dict[str, Path], tmp_path: Path
) -> None:
    """`echo_agent.py --listen --tls-cert --tls-key --token-file`: wss:// and https://; the echo
    client with `--verify CA` passes its whole scenario on both, and without it is refused by the
    default trust (a clear failure, no traceback)."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alice s3cret-one\n")
    agent = subprocess.Popen(
        [sys.executable, str(ECHO_AGENT), "--listen", "127.0.0.1:0", "--token-file", str(tokens),
         "--tls-cert", str(pki["cert"]), "--tls-key", str(pki["key"])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert agent.stdout is not None
        words = agent.stdout.readline().split()
        assert words[:1] == ["listening"] and words[1].startswith("wss://127.0.0.1:"), words
        assert words[2].startswith("https://127.0.0.1:"), words
        for url in words[1:]:
            client = [sys.executable, str(ECHO_CLIENT), "--url", url, "--token-file", str(tokens)]
            done = subprocess.run([*client, "--verify", str(pki["ca"])], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0 and "passed, 0 failed" in done.stdout, (url, done.stdout, done.stderr[-2000:])
            refused = subprocess.run(client, capture_output=True, text=True, timeout=60)
            assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stdout + refused.stderr, url
            assert "Traceback" not in refused.stderr, refused.stderr[-2000:]
    finally:
        agent.terminate()
        assert agent.wait(10) == 0
    assert "Traceback" not in (agent.stderr.read() if agent.stderr else "")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--tls-cert", "{cert}"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "{missing}", "--tls-key", "{key}"], "cannot load them"),
        (["--tls-cert", "{key}", "--tls-key", "{key}"], "cannot load them"),  # a key is no certificate
    ],
)
def test_echo_agent_tls_files_that_cannot_serve_are_a_clear_error(
    pki: dict[str, Path], tmp_path: Path, flags: list[str], says: str
) -> None:
    names = {"cert": pki["cert"], "key": pki["key"], "missing": tmp_path / "nope.pem"}
    args = [flag.format(**names) for flag in flags]
    done = subprocess.run(
        [sys.executable, str(ECHO_AGENT), "--listen", "127.0.0.1:0", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
