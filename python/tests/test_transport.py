"""`ssegate.mcp.GuardedTransport` under `mcp.Client`, against the test kit's loopback MCP server and
its fault proxy (cuts mid-result) and against the official SDKs' servers.

Results are compared with what the server sent (the loopback server's `big_result` text is a pure
function of size and seed; the SDK servers' content is a position pattern), and the loopback server
counts the tool's runs, so a torn, glued or re-run result cannot pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ssegate.mcp import OUTCOME_UNKNOWN, GuardedTransport, OutcomeUnknown, typed_errors

pytestmark = pytest.mark.anyio

MIB = 1 << 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pattern(size: int) -> str:
    """The SDK interop servers' content: 16-byte blocks, each its own offset in 15 hex digits and `|`."""
    return "".join(f"{offset:015x}|" for offset in range(0, size + 16, 16))[:size]


def text_of(result) -> str:
    assert not result.is_error, result
    return result.content[0].text


async def call_big(url: str, size: int, seed: int) -> str:
    """One call on a new client; the transport's errors raised typed. (An exception that leaves
    `async with Client(...)` comes out wrapped in an exception group: it is caught inside.)"""
    error: MCPError | None = None
    async with Client(GuardedTransport(url)) as client:
        try:
            with typed_errors():
                result = await client.call_tool("big_result", {"size": size, "seed": seed})
        except MCPError as e:
            error = e
    if error is not None:
        raise error
    return text_of(result)


@pytest.mark.parametrize("mode", ["buffered", "stateless"])
async def test_a_4_mib_result_arrives_whole(testkit, mode: str) -> None:
    kit = testkit(mode=mode)
    text = await call_big(kit.url, 4 * MIB, 3)
    assert text == kit.expected_text(4 * MIB, 3)
    assert kit.stats()["calls"] == 1


async def test_tools_are_listed(testkit) -> None:
    kit = testkit(mode="strict")
    async with Client(GuardedTransport(kit.url)) as client:
        tools = await client.list_tools()
    assert "big_result" in {t.name for t in tools.tools}


async def test_a_cut_result_is_resumed_in_place_and_runs_once(testkit) -> None:
    kit = testkit(mode="buffered", proxy=True)
    kit.cut(300_000)
    text = await call_big(kit.url, 1 * MIB, 9)
    assert text == kit.expected_text(1 * MIB, 9)
    assert kit.cuts() == 1
    assert kit.stats()["calls"] == 1


@pytest.mark.parametrize("mode", ["strict", "restart", "stateless"])
async def test_a_cut_that_cannot_be_resumed_is_outcome_unknown_and_never_torn(testkit, mode: str) -> None:
    kit = testkit(mode=mode, proxy=True)
    kit.cut(300_000)
    with pytest.raises(OutcomeUnknown) as raised:
        await call_big(kit.url, 1 * MIB, 9)
    assert raised.value.code == OUTCOME_UNKNOWN
    assert raised.value.data["outcome"] == "unknown"
    assert kit.cuts() == 1
    stats = kit.stats()
    # A restarting server runs the call again itself on the resume (`restarts`); the client's own
    # calls are the rest.
    assert stats["calls"] - stats["restarts"] == 1, f"the transport never sends a call again: {stats}"


async def test_every_cut_gives_the_whole_result_or_the_typed_error(testkit) -> None:
    """Cuts across a result on servers that replay correctly, restart, replay the pinned event or
    answer empty: each call ends intact or typed, never torn."""
    size, seed = 200_000, 5
    for mode in ["buffered", "boundary", "restart", "empty", "resend"]:
        kit = testkit(mode=mode, proxy=True)
        expected = kit.expected_text(size, seed)
        for offset in range(1_000, size, 37_000):
            kit.cut(offset)
            try:
                text = await call_big(kit.url, size, seed)
            except OutcomeUnknown:
                continue
            except MCPError as e:
                pytest.fail(f"{mode} cut at {offset}: untyped error {e.code} {e}")
            assert text == expected, f"{mode} cut at {offset}: torn"


@pytest.mark.parametrize("sdk", ["ts", "py"])
async def test_sdk_servers_give_4_mib_2_mib_and_tiny_results_intact(sdk_server, sdk: str) -> None:
    server = sdk_server(sdk)
    async with Client(GuardedTransport(server.url)) as client:
        tools = await client.list_tools()
        assert "big_result" in {t.name for t in tools.tools}
        for size in (4 * MIB, 2 * MIB, 17, 1):
            result = await client.call_tool("big_result", {"size": size})
            assert text_of(result) == pattern(size), f"{sdk} {size}"


async def test_the_sdks_own_transport_does_not_deliver_the_4_mib_result(sdk_server) -> None:
    """Why the transport exists, checked on the same server: the SDK's own Streamable HTTP client
    (`Client(url)`, its 1 MiB SSE event cap) fails the 4 MiB call that arrives whole above from the
    TypeScript SDK's server (a 2025-era SSE answer), while the small one works."""
    server = sdk_server("ts")
    async with Client(server.url) as client:
        assert text_of(await client.call_tool("big_result", {"size": 17})) == pattern(17)
        with anyio.fail_after(60), pytest.raises(MCPError) as raised:
            await client.call_tool("big_result", {"size": 4 * MIB})
    assert "SSE" in raised.value.message or "1048576" in raised.value.message, raised.value


def test_peak_memory_of_a_16_mib_result_is_bounded_and_below_the_sdks_own(testkit) -> None:
    """docs/PYTHON.md's bound, in child processes (`_peak.py`, peak resident memory): a 16 MiB
    result through `GuardedTransport` peaks within 12 times its size above the process's baseline, and
    below what the SDK's own transport (its event cap off) peaks at for the same result: the
    engine holds a message once while it arrives, one copy goes to pydantic, the rest is the SDK's."""
    size = 16 * MIB
    kit = testkit(mode="buffered", max_result_size=4 * size, result_size=2 * size)
    peaks = {}
    for transport in ("guarded", "sdk"):
        out = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("_peak.py")), kit.url, str(size), "2", transport],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report["text"] > size * 9 // 10, report
        peaks[transport] = (report["peak_kib"] - report["before_kib"]) * 1024
    assert peaks["guarded"] <= 12 * size, f"{peaks['guarded'] / MIB:.0f} MiB over the baseline"
    assert peaks["guarded"] < peaks["sdk"], {k: f"{v / MIB:.0f} MiB" for k, v in peaks.items()}


async def test_client_session_over_the_transports_streams(testkit) -> None:
    """The lower-level API: `ClientSession` over the streams the transport yields, `initialize()`
    by hand, a 2 MiB result whole."""
    from mcp import ClientSession

    kit = testkit(mode="buffered")
    async with (
        GuardedTransport(kit.url) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        await session.initialize()
        result = await session.call_tool("big_result", {"size": 2 * MIB, "seed": 4})
    assert text_of(result) == kit.expected_text(2 * MIB, 4)
    assert kit.stats()["calls"] == 1


async def test_a_request_resumed_from_a_kept_token_takes_the_replay_and_runs_once(testkit) -> None:
    """`resumption_token`: the replay from the first token answers the request that opened the
    stream, under its id; the transport gives that answer to the resumed request (as the SDK's own
    transport does), and the server does not run the tool again."""
    from mcp import ClientSession
    from mcp.shared.message import ClientMessageMetadata
    from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

    kit = testkit(mode="buffered")
    request = CallToolRequest(params=CallToolRequestParams(name="big_result", arguments={"size": 200_000, "seed": 8}))
    tokens: list[str] = []

    async def kept(token: str) -> None:
        tokens.append(token)

    async with (
        GuardedTransport(kit.url) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        await session.initialize()
        first = await session.send_request(
            request, CallToolResult, metadata=ClientMessageMetadata(on_resumption_token_update=kept)
        )
        assert len(tokens) >= 2, tokens
        with anyio.fail_after(30):
            resumed = await session.send_request(
                request, CallToolResult, metadata=ClientMessageMetadata(resumption_token=tokens[0])
            )
    expected = kit.expected_text(200_000, 8)
    assert text_of(first) == expected
    assert text_of(resumed) == expected
    stats = kit.stats()
    assert stats["calls"] == 1, f"the resumed request was not run again: {stats}"
    assert stats["replays"] == 1


async def test_progress_notifications_reach_the_callback_before_the_result(testkit) -> None:
    """Messages on a response stream other than the response (progress) are delivered too, in
    order, across a cut resumed in place."""
    kit = testkit(mode="buffered", proxy=True, progress=5)
    kit.cut(200_000)
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(GuardedTransport(kit.url)) as client:
        result = await client.call_tool("big_result", {"size": 1 * MIB, "seed": 2}, progress_callback=on_progress)
    assert text_of(result) == kit.expected_text(1 * MIB, 2)
    assert kit.cuts() == 1
    assert len(seen) == 5 and seen == sorted(seen), seen
