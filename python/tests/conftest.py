"""Fixtures that start the Rust test kit's loopback MCP servers and fault proxy, and the official SDK
servers of `interop/`, as child processes (see testkit.py); every process a test starts is stopped
at its teardown.

    def test_resumed(testkit):
        kit = testkit(mode="buffered", proxy=True)   # ssegate-testkit serve --mode buffered --proxy
        kit.cut(300_000)                              # the next response stream is reset there
        ...  # call big_result(size=1 << 20, seed=9) at kit.url
        assert text == kit.expected_text(1 << 20, 9)
        assert kit.cuts() == 1 and kit.stats()["calls"] == 1

    def test_sdk(sdk_server):
        server = sdk_server("ts")                     # or "py" (also "ts2026", "everything", "fastmcp")
        ...  # server.url

Nothing here imports `ssegate`, so these fixtures work without the package built.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# testkit.py sits next to this file; make it importable whatever pytest's import mode.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import testkit as _kit  # noqa: E402

_binary: Path | None = None


@pytest.fixture(scope="session")
def testkit_binary() -> Path:
    """The `ssegate-testkit` binary (`$SSEGATE_TESTKIT`, else the debug build, built with cargo
    when missing or stale, once per session)."""
    global _binary
    if _binary is None:
        try:
            _binary = _kit.find_binary()
        except _kit.KitError as e:
            pytest.fail(f"ssegate-testkit: {e}", pytrace=False)
    return _binary


@pytest.fixture
def testkit(testkit_binary: Path):
    """A factory: `testkit(mode="buffered", proxy=False, **flags) -> Kit`, each kit started as
    `ssegate-testkit serve --mode MODE [--proxy] [--flag value ...]` (`progress=5` is
    `--progress 5`, `tools_list_sse=True` is `--tools-list-sse`) and stopped at teardown."""
    kits: list[_kit.Kit] = []

    def start(mode: str = "buffered", proxy: bool = False, **flags) -> _kit.Kit:
        kit = _kit.Kit(testkit_binary, mode=mode, proxy=proxy, **flags)
        kits.append(kit)
        return kit

    yield start
    for kit in kits:
        kit.stop()


@pytest.fixture
def sdk_server():
    """A factory: `sdk_server("ts" | "py", *args) -> SdkServer` (also "ts2026", "everything",
    "fastmcp"), started as testkit/src/interop.rs starts it, killed at teardown. A server that is
    not installed skips the test loudly, or fails it under `CI`, naming the `interop/setup` to run."""
    servers: list[_kit.SdkServer] = []

    def start(sdk: str, *args: str) -> _kit.SdkServer:
        try:
            server = _kit.SdkServer(sdk, *args)
        except _kit.SdkMissing as missing:
            e = missing
        else:
            servers.append(server)
            return server
        # Outside the `except`, so the report shows no chained traceback.
        if _kit.in_ci():
            pytest.fail(
                f"interop: the {e.label} server cannot run under CI ({e.why}); run `{e.setup}`",
                pytrace=False,
            )
        _kit.SKIPPED_SERVERS.append(f"{e.label}: {e.why}; run `{e.setup}`")
        pytest.skip(
            f"!!!!! SKIPPED: the {e.label} server is not installed ({e.why}); "
            f"run `{e.setup}` (CI=1 makes this a failure)"
        )

    yield start
    for server in servers:
        server.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    skipped = _kit.SKIPPED_SERVERS
    if not skipped:
        return
    terminalreporter.section("official SDK servers NOT installed: tests SKIPPED", yellow=True, bold=True)
    for line in dict.fromkeys(skipped):
        terminalreporter.line(f"!!!!! {line}", yellow=True, bold=True)
    terminalreporter.line("!!!!! (under CI=1 these are failures)", yellow=True, bold=True)
