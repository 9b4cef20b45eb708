"""The fixtures of conftest.py themselves (`testkit`, `sdk_server`), with the stdlib only: a kit
starts and answers its commands, its server speaks MCP over raw HTTP, its proxy cuts where it says,
every process is stopped at teardown, and the SDK servers start (or skip loudly / fail under CI).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import testkit as kitlib

HERE = Path(__file__).resolve().parent
ACCEPT = "application/json, text/event-stream"


# ---- raw HTTP ------------------------------------------------------------------------------------


def post(url: str, message: dict, headers: dict[str, str] | None = None):
    """One POST of a JSON-RPC message on a fresh connection: (status, headers, body bytes)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(
            "POST",
            parts.path,
            body=json.dumps(message).encode(),
            headers={"Content-Type": "application/json", "Accept": ACCEPT, **(headers or {})},
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def messages(headers: dict[str, str], body: bytes) -> list[dict]:
    """The JSON-RPC messages of an answer: its JSON body, or its SSE events' data."""
    if headers.get("content-type", "").startswith("application/json"):
        return [json.loads(body)]
    assert headers.get("content-type", "").startswith("text/event-stream"), headers
    out = []
    for event in body.decode().replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:"))
        if data:
            out.append(json.loads(data))
    return out


def initialize(url: str, version: str = "2025-11-25") -> tuple[dict, dict[str, str]]:
    """`initialize` (then `notifications/initialized` when a session was opened): the result and
    the headers later requests carry."""
    status, headers, body = post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "test_testkit", "version": "0"},
            },
        },
    )
    assert status == 200, (status, body[:300])
    [answer] = [m for m in messages(headers, body) if m.get("id") == 0]
    result = answer["result"]
    session = {"MCP-Protocol-Version": result["protocolVersion"]}
    if "mcp-session-id" in headers:
        session["Mcp-Session-Id"] = headers["mcp-session-id"]
        status, _, _ = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert status == 202
    return result, session


def call(request_id: int, tool: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def refused(url: str) -> bool:
    """Whether nothing listens at `url`'s address any more."""
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except OSError:
        return True
    return False


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie not reaped yet counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# ---- the kit -------------------------------------------------------------------------------------


def test_a_kit_starts_and_serves_mcp_over_raw_http(testkit) -> None:
    kit = testkit(mode="buffered", progress=2, retry_ms=10)
    assert kit.running
    assert kit.url == kit.server_url and kit.proxy_url is None
    assert kit.url.startswith("http://127.0.0.1:") and kit.url.endswith("/mcp")
    stats = kit.stats()
    assert stats["calls"] == 0 and stats["requests"] == 0
    assert {"connections", "sessions_opened", "resumes", "replays", "misses", "restarts"} <= stats.keys()

    result, session = initialize(kit.url)
    assert result["protocolVersion"] == "2025-11-25"
    status, headers, body = post(kit.url, call(1, "big_result", {"size": 100_000, "seed": 9}), session)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    got = messages(headers, body)
    progress = [m for m in got if m.get("method") == "notifications/progress"]
    assert len(progress) == 2, "--progress 2"
    [answer] = [m for m in got if m.get("id") == 1]
    text = answer["result"]["content"][0]["text"]
    assert text == kit.expected_text(100_000, 9)
    assert len(text.encode()) < 100_000, "SIZE counts the escaped bytes"
    assert '"' in text and "\\" in text and "\n" in text

    stats = kit.stats()
    assert stats["calls"] == 1 and stats["sessions_opened"] == 1 and stats["streams"] == 1
    assert kit.cuts() == 0, "no proxy, no cuts"


def test_expected_text_is_exact_checked_and_cached(testkit, tmp_path: Path) -> None:
    kit = testkit(mode="stateless")
    text = kit.expected_text(4096, 1)
    answer = kit.command("expected 4096 1")
    assert answer["bytes"] == len(text.encode())
    assert kit.expected_text(4096, 1) is text, "cached"
    assert kit.expected_text(4096, 2) != text
    assert kit.expected_text(0, 1) == ""
    # The file is checked against its announced digest and length.
    copy = tmp_path / "copy.txt"
    copy.write_bytes(Path(answer["path"]).read_bytes())
    assert kitlib.read_checked(copy, answer["sha256"], answer["bytes"]) == text
    copy.write_bytes(copy.read_bytes().replace(b"the", b"THE", 1))
    with pytest.raises(kitlib.KitError, match="sha256"):
        kitlib.read_checked(copy, answer["sha256"])
    with pytest.raises(kitlib.KitError, match="announced"):
        kitlib.read_checked(copy, answer["sha256"], answer["bytes"] + 1)
    # A stateless (MCP 2026-07-28) server returns the same text.
    status, headers, body = post(
        kit.url,
        {
            **call(5, "big_result", {"size": 4096, "seed": 1}),
            "params": {
                "name": "big_result",
                "arguments": {"size": 4096, "seed": 1},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        },
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "big_result"},
    )
    assert status == 200, body[:300]
    [answer] = [m for m in messages(headers, body) if m.get("id") == 5]
    assert answer["result"]["content"][0]["text"] == text


def test_the_proxy_cuts_after_exactly_n_bytes_of_the_connection_once(testkit) -> None:
    kit = testkit(mode="strict", proxy=True)
    assert kit.proxy_url is not None and kit.url == kit.proxy_url != kit.server_url
    _, session = initialize(kit.server_url)  # straight to the server: the proxy sees only the calls
    request = json.dumps(call(1, "big_result", {"size": 50_000, "seed": 2})).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: x\r\nAccept: {ACCEPT}\r\nContent-Type: application/json\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in session.items())
        + f"Content-Length: {len(request)}\r\nConnection: close\r\n\r\n"
    ).encode()

    def through_proxy() -> tuple[bytes, bool]:
        """The raw bytes a request gets back through the proxy, and whether it ended in a reset."""
        parts = urlsplit(kit.proxy_url)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
            s.sendall(head + request)
            received = bytearray()
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    return bytes(received), True
                if not chunk:
                    return bytes(received), False
                received += chunk

    kit.cut(2_000)
    cut, reset = through_proxy()
    # N counts from the connection's first byte: the status line and headers included.
    assert reset and len(cut) == 2_000 and cut.startswith(b"HTTP/1.1 200 OK\r\n")
    assert kit.cuts() == 1
    proxy = kit.proxy_stats()
    assert proxy["last_cut"]["offset"] == 2_000 and proxy["armed"] == 2_000
    # One cut per `cut`: the next connection passes whole.
    whole, reset = through_proxy()
    assert not reset and len(whole) > 50_000 and whole.endswith(b"\r\n0\r\n\r\n")
    assert kit.cuts() == 1
    kit.cut(1_000)
    kit.uncut()
    _, reset = through_proxy()
    assert not reset and kit.cuts() == 1, "disarmed"
    assert kit.stats()["calls"] == 3


def test_failing_commands_raise_and_the_kit_lives_on(testkit) -> None:
    kit = testkit(mode="strict", max_result_size=1000)
    with pytest.raises(kitlib.KitError, match="--proxy"):
        kit.cut(10)
    with pytest.raises(kitlib.KitError, match="unknown command"):
        kit.command("frobnicate")
    with pytest.raises(kitlib.KitError, match="max-result-size"):
        kit.expected_text(1001, 1)
    assert kit.cuts() == 0
    assert kit.stats()["calls"] == 0
    assert kit.running


def test_flags_reach_the_server(testkit) -> None:
    kit = testkit(mode="strict", tools_list_sse=True, progress=5, seed=77, result_size=3000)
    _, session = initialize(kit.url)
    _, headers, body = post(kit.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session)
    assert headers["content-type"] == "text/event-stream", "--tools-list-sse"
    _, headers, body = post(kit.url, call(2, "big_result", {}), session)
    got = messages(headers, body)
    assert sum(m.get("method") == "notifications/progress" for m in got) == 5
    [answer] = [m for m in got if m.get("id") == 2]
    assert answer["result"]["content"][0]["text"] == kit.expected_text(3000, 77), "--seed, --result-size"
    assert kitlib.flag_args({"retry_ms": 10, "proxy": True, "off": False, "none": None}) == [
        "--retry-ms",
        "10",
        "--proxy",
    ]


def test_a_bad_flag_fails_to_start_with_a_clear_error(testkit) -> None:
    with pytest.raises(kitlib.KitError, match="exited \\(2\\)"):
        testkit(mode="nonsense")
    with pytest.raises(kitlib.KitError, match="exited \\(2\\)"):
        testkit(no_such_flag=1)


def test_stop_quits_closes_the_ports_and_is_idempotent(testkit_binary: Path) -> None:
    kit = kitlib.Kit(testkit_binary, mode="resend", proxy=True)
    kit.expected_text(100, 1)
    assert not refused(kit.server_url) and not refused(kit.proxy_url)
    assert kit.stop() == 0
    assert not kit.running and refused(kit.server_url) and refused(kit.proxy_url)
    assert kit.stop() == 0
    with pytest.raises(kitlib.KitError, match="not running"):
        kit.stats()


def test_every_process_is_stopped_at_teardown_even_of_a_failed_test(testkit_binary: Path, tmp_path: Path) -> None:
    """An inner pytest session with these fixtures: its kits and SDK servers are gone when it ends."""
    record = tmp_path / "record.jsonl"
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import importlib.util, sys
            sys.path.insert(0, {str(HERE)!r})
            spec = importlib.util.spec_from_file_location("_outer_conftest", {str(HERE / "conftest.py")!r})
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            globals().update({{k: v for k, v in vars(module).items() if not k.startswith("__")}})
            """
        )
    )
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            f"""
            import json

            def note(**what):
                with open({str(record)!r}, "a") as f:
                    f.write(json.dumps(what) + "\\n")

            def test_kits(testkit):
                for proxy in (False, True):
                    kit = testkit(mode="strict", proxy=proxy)
                    note(pid=kit.pid, urls=[kit.server_url, kit.proxy_url])

            def test_a_failure_still_stops_its_kit(testkit):
                kit = testkit(mode="empty")
                note(pid=kit.pid, urls=[kit.server_url])
                assert False, "failing on purpose"

            def test_sdk(sdk_server):
                server = sdk_server("ts")
                note(pid=server.pid, urls=[server.url])
            """
        )
    )
    env = {**os.environ, "SSEGATE_TESTKIT": str(testkit_binary)}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "1 failed" in done.stdout and "failing on purpose" in done.stdout, done.stdout + done.stderr
    notes = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(notes) >= 3, notes
    deadline = time.monotonic() + 10
    while not all(gone(n["pid"]) for n in notes) and time.monotonic() < deadline:
        time.sleep(0.05)
    for n in notes:
        assert gone(n["pid"]), f"{n} still runs after the session"
        for url in filter(None, n["urls"]):
            assert refused(url), f"{url} still listens after the session"


# ---- the SDK servers -----------------------------------------------------------------------------


@pytest.mark.parametrize("sdk", ["ts", "py"])
def test_an_sdk_server_starts_and_answers_initialize(sdk_server, sdk: str) -> None:
    server = sdk_server(sdk)
    assert server.url == f"http://{server.addr}/mcp"
    assert server.url.startswith("http://127.0.0.1:")
    assert server.running
    result, session = initialize(server.url)
    assert result["protocolVersion"] and result["serverInfo"]["name"]
    assert "Mcp-Session-Id" in session, "a stateful server by default"
    status, headers, body = post(server.url, call(1, "big_result", {"size": 100}), session)
    assert status == 200
    [answer] = [m for m in messages(headers, body) if m.get("id") == 1]
    text = answer["result"]["content"][0]["text"]
    assert text == "".join(f"{o:015x}|" for o in range(0, 116, 16))[:100]


def test_sdk_server_flags_are_passed_on(sdk_server) -> None:
    server = sdk_server("py", "--json-response")
    status, headers, _ = post(
        server.url,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
    )
    assert status == 200 and headers["content-type"].startswith("application/json"), headers
    assert server.label == "Py --json-response"


def test_an_sdk_server_stops(sdk_server) -> None:
    server = sdk_server("ts")
    assert not refused(server.url)
    server.stop()
    assert not server.running and refused(server.url)
    server.stop()


def test_a_missing_sdk_server_skips_loudly_or_fails_under_ci(sdk_server, monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "setup").write_text("#!/bin/sh\n")
    monkeypatch.setattr(kitlib, "SKIPPED_SERVERS", [])  # not in this session's banner
    monkeypatch.setenv("SSEGATE_INTEROP", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"SKIPPED.*node_modules.*interop/setup ts"):
        sdk_server("ts")
    with pytest.raises(pytest.skip.Exception, match=r"\.venv/bin/python.*interop/setup py"):
        sdk_server("py")
    assert len(kitlib.SKIPPED_SERVERS) == 2 and "interop/setup ts" in kitlib.SKIPPED_SERVERS[0]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"under CI.*interop/setup ts"):
        sdk_server("ts")
    monkeypatch.setenv("SSEGATE_INTEROP", str(tmp_path / "nowhere"))
    with pytest.raises(pytest.fail.Exception, match=r"no interop/ directory"):
        sdk_server("py")
    with pytest.raises(ValueError, match="unknown SDK server"):
        sdk_server("cobol")


def test_the_command_lines_are_interop_rs_ones() -> None:
    interop = kitlib.REPO / "interop"
    if not (interop / "ts" / "node_modules").is_dir() or not (interop / "py" / ".venv").is_dir():
        pytest.skip("interop/setup ts py not run")
    command, cwd = kitlib.sdk_command("ts", ["--stateless"])
    loopback = ["--host", "127.0.0.1", "--port", "0"]
    assert command == ["node", str(interop / "ts" / "server.mjs"), *loopback, "--stateless"]
    assert cwd == interop / "ts"
    command, cwd = kitlib.sdk_command("py")
    python = interop / "py" / ".venv" / "bin" / "python"
    assert command == [str(python), str(interop / "py" / "server.py"), *loopback]
    assert cwd == interop / "py"
