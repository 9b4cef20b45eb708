"""The Rust test kit and the official MCP SDK servers as child processes, for pytest (stdlib only).

- `Kit`: `ssegate-testkit serve` (testkit/src/bin/ssegate-testkit.rs): the test kit's loopback MCP
  server in a `ServerMode`, optionally behind its fault proxy, driven by one-line commands on the
  child's stdin (`cut N`, `cuts`, `stats`, `expected SIZE SEED`, `quit`), each answered by one JSON
  line on its stdout. With `auth=True` an OAuth authorization server and an OAuth-protected
  endpoint in front of the server start too (the proxy, if any, in front of that), driven by the
  `auth-*` commands (`auth_stats()`, `authorize(url)`, `auth_expire()`, ...).
- `SdkServer`: a server of the repository's `interop/` (the official TypeScript and Python SDKs),
  started exactly as testkit/src/interop.rs starts it: the same command line plus
  `--host 127.0.0.1 --port 0`, ready once it prints `listening http://ADDR/mcp`.

The fixtures of conftest.py (`testkit`, `sdk_server`) wrap these and stop every process at teardown.

Environment:

- `SSEGATE_TESTKIT`: the `ssegate-testkit` binary to run (never rebuilt). Otherwise the debug build
  in `$CARGO_TARGET_DIR` or `<repo>/target` is used, and built with
  `cargo build -p ssegate-testkit --bin ssegate-testkit` when it is missing or older than the Rust
  sources (once per session).
- `SSEGATE_INTEROP`: the `interop/` directory (default: the repository's).
- `CI` (set at all, as in testkit/src/interop.rs): an SDK server that is not installed fails the
  test instead of skipping it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
import weakref
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
BINARY_NAME = "ssegate-testkit" + (".exe" if os.name == "nt" else "")
BUILD_COMMAND = ["cargo", "build", "-p", "ssegate-testkit", "--bin", "ssegate-testkit"]

# How long a command may take to be answered (`expected` of a large result in a debug build takes
# seconds), a process to start, and to stop after `quit`.
COMMAND_TIMEOUT = 120.0
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


class KitError(RuntimeError):
    """A command answered `{"error": ...}`, or a child process misbehaved (no answer, died)."""


class SdkMissing(RuntimeError):
    """An SDK server that is not installed: `why`, and what installs it (`interop/setup NAME`)."""

    def __init__(self, label: str, why: str, setup: str) -> None:
        self.label = label
        self.why = why
        self.setup = setup
        super().__init__(f"the {label} server cannot run: {why}; run `{setup}`")


def in_ci() -> bool:
    """Whether `CI` is set (to anything), as testkit/src/interop.rs decides."""
    return os.environ.get("CI") is not None


# Every child process started and not yet stopped: stopped at interpreter exit too, should a
# fixture's teardown never run (an interrupted session).
_live: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for child in list(_live):
        with contextlib.suppress(Exception):
            child.stop()


class _Lines:
    """The lines a child writes on stdout, read by a thread (so a read can time out)."""

    def __init__(self, stream) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        try:
            for raw in stream:
                self._queue.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass
        finally:
            self._queue.put(None)

    def next(self, timeout: float) -> str | None:
        """The next line, `None` at the end of the stream; raises `queue.Empty` after `timeout`."""
        return self._queue.get(timeout=timeout)


# ---- the binary ----------------------------------------------------------------------------------


def _target_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(Path(os.environ["CARGO_TARGET_DIR"]))
    dirs.append(REPO / "target")
    return dirs


def binary_candidates() -> list[Path]:
    """Where a debug build of `ssegate-testkit` is looked for, in order."""
    return [d / "debug" / BINARY_NAME for d in _target_dirs()]


def _sources() -> list[Path]:
    """What the binary is built from (the library and the test kit)."""
    files = [
        REPO / "Cargo.toml",
        REPO / "Cargo.lock",
        REPO / "build.rs",
        REPO / "testkit" / "Cargo.toml",
    ]
    for tree in (REPO / "src", REPO / "testkit" / "src"):
        files.extend(tree.rglob("*.rs"))
    return [f for f in files if f.is_file()]


def newer_source(binary: Path) -> Path | None:
    """A source file modified after `binary` was built, if any (the binary is stale)."""
    built = binary.stat().st_mtime
    return next((s for s in _sources() if s.stat().st_mtime > built), None)


def build_binary() -> Path:
    """Builds the binary with cargo (debug profile; the caller's cargo environment) and returns it."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise KitError(
            f"no usable ssegate-testkit binary (looked for {', '.join(map(str, binary_candidates()))}) "
            f"and cargo is not on PATH: build it with `{' '.join(BUILD_COMMAND)}` in {REPO}, "
            "or set SSEGATE_TESTKIT to a built binary"
        )
    command = [cargo, *BUILD_COMMAND[1:], "--message-format=json-render-diagnostics"]
    done = subprocess.run(command, cwd=REPO, capture_output=True)
    executable = None
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if (
            message.get("reason") == "compiler-artifact"
            and message.get("executable")
            and message["target"]["name"] == "ssegate-testkit"
        ):
            executable = Path(message["executable"])
    if done.returncode != 0 or executable is None:
        tail = done.stderr.decode("utf-8", "replace")[-4000:]
        raise KitError(
            f"`{' '.join(BUILD_COMMAND)}` failed in {REPO} (exit {done.returncode}):\n{tail}\n"
            "fix the build, or set SSEGATE_TESTKIT to a built binary"
        )
    return executable


def find_binary() -> Path:
    """The `ssegate-testkit` binary: `$SSEGATE_TESTKIT` as is, else a debug build, built when it is
    missing or stale. Raises `KitError` with what to do when there is none."""
    pinned = os.environ.get("SSEGATE_TESTKIT")
    if pinned:
        path = Path(pinned)
        if not path.is_file():
            raise KitError(f"SSEGATE_TESTKIT={pinned} is not a file")
        return path
    existing = [p for p in binary_candidates() if p.is_file()]
    if existing and newer_source(existing[0]) is None:
        return existing[0]
    return build_binary()


# ---- the kit -------------------------------------------------------------------------------------


def flag_args(flags: dict[str, Any]) -> list[str]:
    """`progress=5, retry_ms=10, tools_list_sse=True` -> `--progress 5 --retry-ms 10 --tools-list-sse`
    (`False` and `None` leave a flag out; a list or tuple repeats the option, e.g.
    `auth_client=["a", "b:secret"]` -> `--auth-client a --auth-client b:secret`)."""
    args: list[str] = []
    for key, value in flags.items():
        name = "--" + key.replace("_", "-")
        if value is True:
            args.append(name)
        elif value is False or value is None:
            continue
        elif isinstance(value, list | tuple):
            for item in value:
                args.extend([name, str(item)])
        else:
            args.extend([name, str(value)])
    return args


def read_checked(path: str | os.PathLike, sha256: str, length: int | None = None) -> str:
    """The UTF-8 text of `path`, checked against its announced SHA-256 (and byte length)."""
    data = Path(path).read_bytes()
    if length is not None and len(data) != length:
        raise KitError(f"{path}: {len(data)} bytes, announced {length}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise KitError(f"{path}: sha256 {digest}, announced {sha256}")
    return data.decode("utf-8")


class _Child:
    """What a kit and an SDK server share: a child process, stopped on `with` exit."""

    process: subprocess.Popen[bytes]

    def stop(self) -> int:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None


_C = TypeVar("_C", bound=_Child)


class Kit(_Child):
    """`ssegate-testkit serve --mode MODE [--proxy] [flags]`, running until `stop()`.

    `url` is what a client uses (the proxy's with `proxy=True`), `server_url` the server's,
    `proxy_url` the proxy's or `None`. `flags` become command-line options (`flag_args`): any of
    `ssegate-testkit serve --help`, e.g. `progress=5`, `retry_ms=10`, `max_result_size=1 << 20`,
    `task_work_ms=20`, `accept_delay_ms=50`, `tools_list_sse=True`; `auth=True` (or any `auth_*`
    flag) adds the authorization server and the protected endpoint (`auth`: their URLs, `None`
    without), which the `auth_*` methods drive.
    """

    def __init__(self, binary: str | os.PathLike, mode: str = "buffered", proxy: bool = False, **flags: Any) -> None:
        self.mode = mode
        self.args = [str(binary), "serve", "--mode", mode, *(["--proxy"] if proxy else []), *flag_args(flags)]
        self._cache: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()
        self.process = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        _live.add(self)
        self._lines = _Lines(self.process.stdout)
        try:
            hello = self._read(START_TIMEOUT, "its first line")
        except KitError:
            self.stop()
            raise
        self.url: str = hello["url"]
        self.server_url: str = hello["server"]
        self.proxy_url: str | None = hello["proxy"]
        # With `auth=True` (or any `auth_*` flag): `issuer`, `metadata`, `protected` (the protected
        # endpoint, also the resource identifier; `url` is it, or the proxy's in front of it),
        # `resource_metadata`, `redirect_uris`.
        self.auth: dict[str, Any] | None = hello.get("auth")

    def __repr__(self) -> str:
        return f"Kit({self.mode!r}, url={getattr(self, 'url', None)!r}, pid={self.pid})"

    def _read(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self._lines.next(timeout)
        except queue.Empty:
            raise KitError(f"{' '.join(self.args)}: no answer ({what}) within {timeout:.0f} s") from None
        if line is None:
            code = self.process.wait(timeout=STOP_TIMEOUT)
            raise KitError(f"{' '.join(self.args)}: exited ({code}) before {what} (its stderr says why)")
        try:
            value = json.loads(line)
        except ValueError:
            raise KitError(f"{' '.join(self.args)}: not a JSON line ({what}): {line!r}") from None
        if not isinstance(value, dict):
            raise KitError(f"{' '.join(self.args)}: not a JSON object ({what}): {line!r}")
        return value

    def command(self, line: str, timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        """Sends one command line and returns its answer; `{"error": ...}` raises `KitError`."""
        with self._lock:
            if not self.running or self.process.stdin is None or self.process.stdin.closed:
                raise KitError(f"{self!r} is not running")
            try:
                self.process.stdin.write(line.encode() + b"\n")
                self.process.stdin.flush()
            except OSError as e:
                raise KitError(f"{self!r}: cannot send {line!r}: {e}") from None
            answer = self._read(timeout, repr(line))
        if "error" in answer:
            raise KitError(f"{line!r}: {answer['error']}")
        return answer

    def cut(self, n: int) -> None:
        """Arms one cut: the first connection the proxy accepts from now on is reset right after
        its `n`th byte server-to-client, counted from the connection's start (status lines,
        headers, chunk framing and body of every response on it); later connections pass whole."""
        self.command(f"cut {int(n)}")

    def uncut(self) -> None:
        """Disarms the cut (`cut off`)."""
        self.command("cut off")

    def cuts(self) -> int:
        """Connections the proxy has cut so far."""
        return int(self.command("cuts")["cuts"])

    def stats(self) -> dict[str, int]:
        """The server's counters: `calls` (tool runs), `requests`, `sessions_opened`, `resumes`,
        `replays`, `misses`, `restarts`, `empty_replies`, ... (`ServerStats`)."""
        return self.command("stats")

    def proxy_stats(self) -> dict[str, Any]:
        """The proxy's counters: `connections`, `bytes_up`, `bytes_down`, `cuts`, `last_cut`, `armed`."""
        return self.command("proxy-stats")

    def expected_text(self, size: int, seed: int) -> str:
        """The text `big_result(size=size, seed=seed)` returns (`size` bytes of JSON-escaped
        prose on the wire, decoded), computed by the server's own function; cached."""
        key = (int(size), int(seed))
        if key not in self._cache:
            answer = self.command(f"expected {key[0]} {key[1]}")
            self._cache[key] = read_checked(answer["path"], answer["sha256"], answer.get("bytes"))
        return self._cache[key]

    # The authorization server and the protected endpoint (`auth=True`).

    def auth_stats(self) -> dict[str, dict[str, int]]:
        """`{"auth": {...}, "protected": {...}}`: the authorization server's counters
        (`registrations`, `authorizations`, `authorizations_refused`, `code_grants`,
        `refresh_grants`, `token_errors`, `tokens_accepted`, `tokens_rejected`, ...) and the
        protected endpoint's (`requests`, `missing_token`, `invalid_token`, `insufficient_scope`,
        `admitted`, ...)."""
        return self.command("auth-stats")

    def auth_requests(self) -> dict[str, list[Any]]:
        """The parameters of every request the authorization server received: `authorization`,
        `token` (no secrets; `client_auth`) and `registration` (the JSON bodies)."""
        return self.command("auth-requests")

    def authorize(self, url: str) -> str:
        """The headless browser: GETs the authorization URL and returns the redirect it answered
        (the redirect URI with `code`, `state` and `iss`, or `error`). Raises `KitError` when
        there was no redirect."""
        if any(c.isspace() for c in url):
            raise KitError(f"an authorization URL with white space cannot be sent: {url!r}")
        return str(self.command(f"authorize {url}")["redirect"])

    def auth_approve(self, on: bool) -> None:
        """Approve (True, the default) or deny (`error=access_denied`) authorizations."""
        self.command(f"auth-approve {'on' if on else 'off'}")

    def auth_refresh(self, on: bool) -> None:
        """Accept (True) or refuse with `invalid_grant` (False) every refresh from now on."""
        self.command(f"auth-refresh {'on' if on else 'off'}")

    def auth_expire(self) -> int:
        """Expires every access token issued so far (server side); how many."""
        return int(self.command("auth-expire")["expired"])

    def auth_revoke(self) -> int:
        """Revokes every access and refresh token; how many."""
        return int(self.command("auth-revoke")["revoked"])

    def auth_ttl(self, ms: int) -> None:
        """The lifetime of access tokens issued from now on (`expires_in` is its whole seconds, at
        least 1)."""
        self.command(f"auth-ttl {int(ms)}")

    def auth_token(self, *scopes: str) -> dict[str, Any]:
        """A token issued without a flow (scope `mcp` when none given): `access_token`,
        `refresh_token`, `expires_in`, `scope`."""
        return self.command(" ".join(["auth-token", *scopes]))

    def stop(self) -> int:
        """`quit`, then waits for the exit (killing it after 15 s); idempotent. The exit status."""
        process = self.process
        if process.poll() is None:
            with self._lock:
                try:
                    if process.stdin and not process.stdin.closed:
                        process.stdin.write(b"quit\n")
                        process.stdin.flush()
                        process.stdin.close()
                except OSError:
                    pass
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        elif process.stdin and not process.stdin.closed:
            with contextlib.suppress(OSError):
                process.stdin.close()
        _live.discard(self)
        return process.returncode


# ---- the SDK servers -----------------------------------------------------------------------------

SETUP_NAMES = {"ts": "ts", "py": "py", "ts2026": "ts2026", "everything": "everything", "fastmcp": "fastmcp"}
"""The SDK servers `sdk_server` starts, and what `interop/setup` takes to install each."""

SKIPPED_SERVERS: list[str] = []
"""SDK servers the `sdk_server` fixture skipped as not installed (for the end-of-session banner)."""

_LABELS = {"ts": "Ts", "py": "Py", "ts2026": "Ts2026", "everything": "Everything", "fastmcp": "FastMcp"}


def interop_dir() -> Path:
    """`$SSEGATE_INTEROP`, else the repository's `interop/`."""
    return Path(os.environ.get("SSEGATE_INTEROP") or REPO / "interop")


def sdk_command(sdk: str, args: tuple[str, ...] | list[str] = ()) -> tuple[list[str], Path]:
    """The command line and working directory testkit/src/interop.rs uses for `sdk`'s server, or
    `SdkMissing` when it is not installed."""
    if sdk not in SETUP_NAMES:
        raise ValueError(f"unknown SDK server {sdk!r} (expected one of {', '.join(SETUP_NAMES)})")
    label = f"{_LABELS[sdk]} {' '.join(args)}".strip()
    setup = f"interop/setup {SETUP_NAMES[sdk]}"
    interop = interop_dir()
    if not (interop / "setup").is_file():
        raise SdkMissing(label, f"no interop/ directory at {interop}", setup)
    if sdk in ("ts", "ts2026", "everything"):
        directory, package, script = {
            "ts": ("ts", "@modelcontextprotocol/sdk", "server.mjs"),
            "ts2026": ("ts2026", "@modelcontextprotocol/server", "server.mjs"),
            "everything": ("everything", "@modelcontextprotocol/server-everything", "server.cjs"),
        }[sdk]
        cwd = interop / directory
        manifest = cwd / "node_modules" / package / "package.json"
        if not manifest.is_file():
            raise SdkMissing(label, f"{manifest} is missing", setup)
        command = ["node", str(cwd / script)]
    else:
        cwd = interop / ("py" if sdk == "py" else "fastmcp")
        python = cwd / ".venv" / "bin" / "python"
        if not python.is_file():
            raise SdkMissing(label, f"{python} is missing", setup)
        command = [str(python), str(cwd / "server.py")]
    return [*command, "--host", "127.0.0.1", "--port", "0", *args], cwd


class SdkServer(_Child):
    """An official SDK's server of `interop/` on a free loopback port, until `stop()`.

    `url` is its MCP endpoint (`http://127.0.0.1:PORT/mcp`), `addr` its `host:port`, `label` the
    SDK and flags (`Ts --stateless`). Raises `SdkMissing` when the server is not installed,
    `KitError` when it does not say it listens within 60 s.
    """

    def __init__(self, sdk: str, *args: str, timeout: float = START_TIMEOUT) -> None:
        command, cwd = sdk_command(sdk, args)
        self.sdk = sdk
        self.label = f"{_LABELS[sdk]} {' '.join(args)}".strip()
        self.command = command
        try:
            self.process = subprocess.Popen(
                command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=None
            )
        except OSError as e:
            setup = f"interop/setup {SETUP_NAMES[sdk]}"
            raise SdkMissing(self.label, f"cannot start {command}: {e}", setup) from None
        _live.add(self)
        lines = _Lines(self.process.stdout)  # drained to the end, so the child never blocks
        deadline = time.monotonic() + timeout
        addr = None
        while addr is None:
            try:
                line = lines.next(max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                why = f"{self.label}: never said it was listening (within {timeout:.0f} s)"
                raise KitError(why) from None
            if line is None:
                code = self.stop()
                raise KitError(f"{self.label}: exited ({code}) before it was listening (its stderr says why)")
            if line.startswith("listening http://"):
                addr = line[len("listening http://") :].removesuffix("/mcp")
        self.addr: str = addr
        self.url = f"http://{addr}/mcp"

    def __repr__(self) -> str:
        return f"SdkServer({self.label!r}, url={getattr(self, 'url', None)!r}, pid={self.pid})"

    def stop(self) -> int:
        """Kills it and waits (as the Rust `Server`'s drop does); idempotent. The exit status."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        _live.discard(self)
        return self.process.returncode
