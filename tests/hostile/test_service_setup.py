"""How the service is set up: where it listens, where secrets come from, where they may go.

Each promise is kept against a real ``tickwheel`` process or the CLI's own entry point, and real
HTTP servers on 127.0.0.1 stand in for a hostile API that redirects the client elsewhere.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli.cli_support import stop_process
from typer.testing import CliRunner

from tickwheel.cli import app
from tickwheel.errors import InvalidArgument
from tickwheel.service.settings import ServiceSettings, is_loopback
from tickwheel.stores.redaction import redact

pytestmark = pytest.mark.timeout(120)

START_TIMEOUT_S = 30.0
TOKEN = "tok-from-file-7f3a"
SECRET = "sig-from-file-91c2"


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any TICKWHEEL_* variable, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    return {**base, **(extra or {})}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tickwheel ARGS`` to its end (30 s at most)."""
    return subprocess.run(
        [sys.executable, "-m", "tickwheel", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
        env=_env(env),
    )


class Running:
    """A ``python -m tickwheel ARGS`` process that stays up; `first_line` is its startup line."""

    def __init__(self, log: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = log
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tickwheel", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=_env(env),
            )
        self.first_line = self.read_line()

    def read_line(self, timeout_s: float = START_TIMEOUT_S) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            self.stop()
            pytest.fail(f"no line from {self.process.args}:\n{self.log.read_text()}")
        return line.decode()

    def url(self, pattern: str = r"serving (http://\S+)") -> str:
        found = re.search(pattern, self.first_line)
        assert found, self.first_line
        return found[1]

    def stop(self) -> int:
        """SIGTERM it and return its exit status."""
        return stop_process(self.process)


@contextlib.contextmanager
def running(log: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Running]:
    started = Running(log, *args, env=env)
    try:
        yield started
    finally:
        started.stop()


# --- binding: a reachable address needs a token -------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("192.168.1.1", False),
        ("::ffff:10.0.0.5", False),
        ("localhost.example.com", False),
        ("tickwheel.internal", False),  # a name may resolve anywhere
    ],
)
def test_loopback_is_127_8_and_1_and_localhost(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_check_exposure_wants_a_token_or_insecure_off_loopback() -> None:
    with pytest.raises(InvalidArgument, match=r"refusing to serve on 0\.0\.0\.0") as raised:
        ServiceSettings(host="0.0.0.0").check_exposure()
    assert raised.value.argument == "host"
    ServiceSettings(host="0.0.0.0", token="t").check_exposure()
    ServiceSettings(host="0.0.0.0", insecure=True).check_exposure()
    ServiceSettings(host="::1").check_exposure()
    from_env = ServiceSettings.from_env({"TICKWHEEL_HOST": "0.0.0.0", "TICKWHEEL_INSECURE": "1"})
    assert from_env.insecure
    from_env.check_exposure()


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--host", "0.0.0.0"], {}),
        (["--host", "::"], {}),
        ([], {"TICKWHEEL_HOST": "0.0.0.0"}),
        (["--host", "0.0.0.0"], {"TICKWHEEL_INSECURE": "0", "TICKWHEEL_TOKEN": ""}),
    ],
)
def test_serve_refuses_a_reachable_address_without_a_token(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    database = tmp_path / "t.db"
    started = time.monotonic()
    done = _run("serve", *args, "--port", "0", "--store", f"sqlite:///{database}", env=env)
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started < 20
    assert done.stdout == ""  # no "serving ..." line: it never listened
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: host: refusing to serve on ")
    assert "--insecure" in line
    assert not database.exists()  # refused before the store was opened


def test_serve_insecure_starts_on_a_reachable_address(tmp_path: Path) -> None:
    args = ("serve", "--host", "0.0.0.0", "--port", "0", "--insecure", "--store", "memory://")
    with running(tmp_path / "serve.log", *args, "--no-worker") as serve:
        url = serve.url()
        assert url.startswith("http://0.0.0.0:")
        port = url.rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            assert answer.status == 200
    assert serve.process.returncode == 0, serve.log.read_text()


# --- secrets from files ---------------------------------------------------------------------------


def _secret_file(directory: Path, name: str, content: str) -> Path:
    path = directory / name
    path.write_text(content)
    path.chmod(0o600)
    return path


def test_serve_and_client_read_the_token_from_files(tmp_path: Path) -> None:
    token_file = _secret_file(tmp_path, "token", f"{TOKEN}\n")
    args = ("serve", "--port", "0", "--store", "memory://", "--no-worker")
    with running(tmp_path / "serve.log", *args, "--token-file", str(token_file)) as serve:
        cmdline = Path(f"/proc/{serve.process.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline
        api = serve.url()
        runner = CliRunner()

        def stats(*args: str, env: dict[str, str] | None = None) -> Any:
            return runner.invoke(app, ["stats", "--api", api, *args], env=env)

        assert stats().exit_code == 1  # no token: 401
        assert stats("--token-file", str(token_file)).exit_code == 0
        assert stats(env={"TICKWHEEL_TOKEN_FILE": str(token_file)}).exit_code == 0
        # a flag wins over a variable, whichever of the two ways each gives the token
        by_flag = stats("--token", "wrong", env={"TICKWHEEL_TOKEN_FILE": str(token_file)})
        assert "[HTTP 401 unauthorized]" in by_flag.stderr
        assert (
            stats("--token-file", str(token_file), env={"TICKWHEEL_TOKEN": "wrong"}).exit_code == 0
        )
    assert serve.process.returncode == 0, serve.log.read_text()


def test_serve_token_file_beats_the_token_variable(tmp_path: Path) -> None:
    token_file = _secret_file(tmp_path, "token", f"{TOKEN}\r\n")
    args = ("serve", "--port", "0", "--store", "memory://", "--no-worker")
    env = {"TICKWHEEL_TOKEN": "from-the-environment"}
    with running(tmp_path / "serve.log", *args, "--token-file", str(token_file), env=env) as serve:
        result = CliRunner().invoke(app, ["stats", "--api", serve.url(), "--token", TOKEN])
        assert result.exit_code == 0, result.output


def test_signed_callbacks_with_secrets_from_files(tmp_path: Path) -> None:
    secret_file = _secret_file(tmp_path, "secret", f"{SECRET}\n")
    with running(
        tmp_path / "receiver.log", "receiver", "--port", "0", "--secret-file", str(secret_file)
    ) as receiver:
        target = receiver.url(r"receiving on (http://\S+)")
        with running(
            tmp_path / "serve.log",
            "serve",
            "--port",
            "0",
            "--store",
            "memory://",
            "--allow-private-targets",
            env={"TICKWHEEL_SIGNING_SECRET_FILE": str(secret_file)},
        ) as serve:
            added = CliRunner().invoke(
                app,
                ["add", "--in", "0s", "--url", f"{target}/hook", "--id", "s", "--api", serve.url()],
            )
            assert added.exit_code == 0, added.output
            line = receiver.read_line(15)
            assert re.fullmatch(r"POST /hook timer=s attempt=1 late_ms=\S+ signature=ok\n", line)
        assert SECRET not in serve.log.read_text()


# (command, the option holding the secret, the option naming its file)
SECRET_OPTIONS = [
    (["serve", "--store", "memory://", "--port", "0"], "--token", "--token-file"),
    (["serve", "--store", "memory://", "--port", "0"], "--signing-secret", "--signing-secret-file"),
    (["worker", "--store", "memory://"], "--signing-secret", "--signing-secret-file"),
    (["stats", "--api", "http://127.0.0.1:9"], "--token", "--token-file"),
    (["dead", "replay", "x", "--api", "http://127.0.0.1:9"], "--token", "--token-file"),
    (["receiver", "--port", "0"], "--secret", "--secret-file"),
]


@pytest.mark.parametrize(("command", "option", "file_option"), SECRET_OPTIONS)
@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ("missing", "cannot read"),
        ("directory", "cannot read"),
        ("empty", "is empty"),
        ("newline only", "is empty"),
        ("huge", "is over 65536 bytes"),
        ("both", "not both"),
    ],
)
def test_a_secret_file_that_cannot_be_used_exits_2(
    tmp_path: Path, command: list[str], option: str, file_option: str, problem: str, message: str
) -> None:
    paths = {
        "missing": tmp_path / "nope",
        "directory": tmp_path,
        "empty": _secret_file(tmp_path, "empty", ""),
        "newline only": _secret_file(tmp_path, "newline", "\n"),
        "huge": Path("/dev/zero"),
        "both": _secret_file(tmp_path, "good", f"{SECRET}\n"),
    }
    args = [*command, file_option, str(paths[problem])]
    if problem == "both":
        args += [option, SECRET]
    result = CliRunner().invoke(app, args, env=_env())
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    assert message in line
    assert file_option in line
    assert SECRET not in result.output


def test_a_secret_and_its_file_in_the_environment_exit_2(tmp_path: Path) -> None:
    token_file = _secret_file(tmp_path, "token", f"{TOKEN}\n")
    env = _env({"TICKWHEEL_TOKEN": "other-value", "TICKWHEEL_TOKEN_FILE": str(token_file)})
    runner = CliRunner()
    for args in (["stats", "--api", "http://127.0.0.1:9"], ["serve", "--store", "memory://"]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 2, result.output
        assert "give TICKWHEEL_TOKEN or TICKWHEEL_TOKEN_FILE, not both" in result.stderr
        assert TOKEN not in result.output
        assert "other-value" not in result.output


def test_settings_read_secret_files_from_the_environment(tmp_path: Path) -> None:
    token_file = _secret_file(tmp_path, "token", f"{TOKEN}\n")
    secret_file = _secret_file(tmp_path, "secret", f"{SECRET}\r\n")
    settings = ServiceSettings.from_env(
        {
            "TICKWHEEL_TOKEN_FILE": str(token_file),
            "TICKWHEEL_SIGNING_SECRET_FILE": str(secret_file),
        }
    )
    assert (settings.token, settings.signing_secret) == (TOKEN, SECRET)
    assert TOKEN not in repr(settings)
    # an override wins and the file is not even read
    missing = {"TICKWHEEL_TOKEN_FILE": str(tmp_path / "nope")}
    assert ServiceSettings.from_env(missing, token="flag").token == "flag"
    with pytest.raises(InvalidArgument) as raised:
        ServiceSettings.from_env(missing)
    assert raised.value.argument == "TICKWHEEL_TOKEN_FILE"
    two_lines = _secret_file(tmp_path, "two", f"{TOKEN}\n\n")
    with pytest.raises(InvalidArgument, match="whitespace") as raised:
        ServiceSettings.from_env({"TICKWHEEL_TOKEN_FILE": str(two_lines)})
    assert TOKEN not in str(raised.value)


# --- redirects: the token stays with the API's origin ---------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request 200 with stats-shaped JSON, recording its headers."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"counts": {}, "earliest_due": None, "id": "x", "due": "-"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


class _Redirector(http.server.BaseHTTPRequestHandler):
    """Answers every request with `status` and a Location on `target`, the same path."""

    status: int
    target: str

    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(self.status)
        self.send_header("location", self.target + self.path)
        self.send_header("content-length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _http_server(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize(
    "command", [["stats"], ["add", "--in", "1h", "--url", "http://example.com/x"]]
)
def test_the_client_follows_no_redirect_to_another_origin(status: int, command: list[str]) -> None:
    seen: list[dict[str, str]] = []
    recorder = type("Recorder", (_Recorder,), {"seen": seen})
    with _http_server(recorder) as elsewhere:
        redirector = type("Redirector", (_Redirector,), {"status": status, "target": elsewhere})
        with _http_server(redirector) as api:
            result = CliRunner().invoke(app, [*command, "--api", api, "--token", TOKEN], env=_env())
    assert [headers for headers in seen if TOKEN in headers.get("Authorization", "")] == []
    assert seen == []  # nothing at all reached the other origin
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert f"the API redirects to {elsewhere}/v1/" in line
    assert line.endswith(f"[HTTP {status} redirect]")
    assert TOKEN not in result.output


# --- other ways out for a secret, and numbers without bounds ------------------------------------


def test_a_token_no_header_can_carry_is_refused_without_echoing_it() -> None:
    # http.client's own error quotes the header, token and all, in a traceback
    done = _run("stats", "--api", "http://127.0.0.1:9", "--token", "abc\nLEAKED")
    assert done.returncode == 2, done.stderr
    assert "LEAKED" not in done.stderr
    assert "Traceback" not in done.stderr
    assert "the token must be printable ASCII without whitespace" in done.stderr


def test_credentials_in_the_api_url_are_refused_without_echoing_them() -> None:
    result = CliRunner().invoke(app, ["ls", "--api", "http://ada:hunter2@127.0.0.1:9"], env=_env())
    assert result.exit_code == 2, result.output
    assert "hunter2" not in result.output
    assert "must not hold credentials" in result.stderr


def test_store_url_passwords_in_the_query_are_masked() -> None:
    assert redact("redis://cache:6379/0?password=hunter2&db=1") == (
        "redis://cache:6379/0?password=***&db=1"
    )
    assert redact("redis://ada:pw@cache/0?sentinel_password=x2") == (
        "redis://ada:***@cache/0?sentinel_password=***"
    )
    assert redact("redis+cluster://h:7000?prefix=tw") == "redis+cluster://h:7000?prefix=tw"
    shown = repr(ServiceSettings(store_url="redis://cache/0?password=hunter2"))
    assert "hunter2" not in shown


@pytest.mark.parametrize("command", ["stats", "serve", "worker", "receiver"])
def test_help_never_shows_a_secret_from_the_environment(tmp_path: Path, command: str) -> None:
    env = {
        "TICKWHEEL_TOKEN": "zz-token-zz",
        "TICKWHEEL_SIGNING_SECRET": "zz-secret-zz",
        "TICKWHEEL_TOKEN_FILE": str(tmp_path / "zz-path-zz"),
    }
    result = CliRunner().invoke(app, [command, "--help"], env=_env(env))
    assert result.exit_code == 0
    assert "zz-" not in result.output


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["receiver", "--port", "70000"], {}, "--port"),
        (["receiver", "--port", "-1"], {}, "--port"),
        (["worker", "--store", "memory://", "--concurrency", "100000"], {}, "--concurrency"),
        (["worker", "--store", "memory://", "--grace", "1e9"], {}, "--grace"),
        (["serve", "--store", "memory://", "--port", "0", "--grace", "1e9"], {}, "--grace"),
        (
            ["serve", "--store", "memory://", "--port", "0", "--api-workers", "65"],
            {},
            "--api-workers",
        ),
        (["serve", "--store", "memory://", "--port", "0", "--api-workers", "2"], {}, "not memory"),
        (
            ["serve", "--store", "memory://", "--port", "0"],
            {"TICKWHEEL_API_WORKERS": "0"},
            "api_workers",
        ),
        (
            ["serve", "--store", "memory://", "--port", "0"],
            {"TICKWHEEL_MAX_BODY_BYTES": str(2**40)},
            "max_body_bytes",
        ),
        (["add", "--in", "9" * 400, "--url", "http://x/"], {}, "too long a duration"),
        (["add", "--at", "9" * 400, "--url", "http://x/"], {}, "too far a time"),
    ],
)
def test_numbers_out_of_bounds_exit_2(args: list[str], env: dict[str, str], message: str) -> None:
    done = _run(*args, env=env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
