"""`ssegate.mcp.GuardedTransport`'s errors are ssegate's wire contract (`ssegate.contract`, the same
answers as the Rust client's, the rmcp adapter's and `ssegate bridge`'s), and every request's
answer has a deadline (`timeout`).

The deadline is checked against a server that dribbles its answers a few bytes at a time (`Dribbler`,
below: the test kit's loopback server answers at loopback speed) and against the test kit's fault
proxy holding a resume's connection. Every test that could hang without the deadline runs under
`anyio.fail_after`, so a missing deadline is reported as a failure, not a hang.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ssegate import contract
from ssegate.mcp import (
    OUTCOME_UNKNOWN,
    REFUSED,
    SERVER_PROTOCOL,
    UNAVAILABLE,
    GuardedTransport,
    OutcomeUnknown,
    Refused,
    ServerProtocol,
    Unavailable,
    typed_errors,
)

pytestmark = pytest.mark.anyio

MIB = 1 << 20
GUARD = 30.0
"""How long a test may take before it is failed rather than left to hang (`anyio.fail_after`)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    group = getattr(exc, "exceptions", None)
    if group is None:
        yield exc
        return
    for inner in group:
        yield from _leaves(inner)


def mcp_error(exc: BaseException) -> MCPError:
    """The `MCPError` in `exc` (an exception leaving `async with Client(...)` may come wrapped in an
    exception group)."""
    found = [e for e in _leaves(exc) if isinstance(e, MCPError)]
    assert found, f"no MCPError in {exc!r}"
    return found[0]


def check_contract(
    error: MCPError, code: contract.Code, kind: contract.Kind, outcome: contract.Outcome, method: str
) -> dict[str, Any]:
    """`error` is the contract's: the code, its message, and `data` with kind, outcome, method and
    a reason."""
    assert error.code == code, error
    assert error.message == code.message, error
    data = error.data
    assert isinstance(data, dict), error
    assert data[contract.DATA_KIND] == kind.value, data
    assert data[contract.DATA_OUTCOME] == outcome.value, data
    assert data[contract.DATA_METHOD] == method, data
    assert isinstance(data[contract.DATA_REASON], str) and data[contract.DATA_REASON], data
    return data


# ---- a server that dribbles its answers ------------------------------------------------------------


class Dribbler:
    """A loopback MCP Streamable HTTP server (raw HTTP/1.1 on its own asyncio loop, in a thread) that
    answers `initialize` (2025-11-25, a session), notifications (202), `GET` (405) and `DELETE`
    honestly, and the methods in `dribble` a few bytes at a time (`step` bytes per `every` seconds,
    about 60 B/s: a 100 KB answer would take half an hour): `tools/call` as an event stream (the
    priming event at once, then the response event), `tools/list` as `application/json` with its
    `content-length`. The methods in `torn` are answered at once, `application/json`, with a body
    that is a JSON prefix (its `content-length` says that is all). Other methods get a JSON-RPC
    `-32601`.

    `ended` holds the `time.monotonic()` at which each dribbled connection ended (the client
    closed it).
    """

    def __init__(self, dribble: set[str], *, torn: set[str], step: int = 3, every: float = 0.05) -> None:
        self.dribble = dribble
        self.torn = torn
        self.step = step
        self.every = every
        self.ended: list[float] = []
        self.started: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the dribbling server did not start")
        self.url = f"http://127.0.0.1:{self._port}/mcp"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0))
        self._port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @staticmethod
    def _head(status: str, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        return "\r\n".join(lines).encode("latin-1")

    @classmethod
    def _json(cls, value: Any, extra: dict[str, str] | None = None) -> bytes:
        body = json.dumps(value).encode()
        headers = {"content-type": "application/json", "content-length": str(len(body)), **(extra or {})}
        return cls._head("200 OK", headers) + body

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                verb = lines[0].split(" ", 1)[0]
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if verb != "POST":
                    status = "405 Method Not Allowed" if verb == "GET" else "200 OK"
                    writer.write(self._head(status, {"content-length": "0"}))
                    await writer.drain()
                    continue
                message = json.loads(body)
                if "id" not in message or "method" not in message:
                    writer.write(self._head("202 Accepted", {"content-length": "0"}))
                    await writer.drain()
                    continue
                method, rpc_id = message["method"], message["id"]
                if method in self.dribble:
                    await self._dribble(reader, writer, method, rpc_id)
                    return
                if method in self.torn:
                    torn = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": []}})[:-4].encode()
                    writer.write(
                        self._head("200 OK", {"content-type": "application/json", "content-length": str(len(torn))})
                        + torn
                    )
                elif method == "initialize":
                    result = {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "dribbler", "version": "1"},
                    }
                    answer = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
                    writer.write(self._json(answer, {"mcp-session-id": "dribbler-1"}))
                else:
                    error = {"code": -32601, "message": f"no {method} here"}
                    writer.write(self._json({"jsonrpc": "2.0", "id": rpc_id, "error": error}))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _dribble(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, rpc_id: Any
    ) -> None:
        text = "x" * 100_000
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": text}]}
            event = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})
            head = self._head(
                "200 OK", {"content-type": "text/event-stream", "cache-control": "no-cache", "connection": "close"}
            )
            head += b"id: 0\ndata:\n\n"
            rest = f"id: 1\ndata: {event}\n\n".encode()
        else:
            tools = [{"name": "t", "description": text, "inputSchema": {"type": "object"}}]
            body = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": tools}}).encode()
            head = self._head(
                "200 OK", {"content-type": "application/json", "content-length": str(len(body)), "connection": "close"}
            )
            rest = body
        self.started.append(time.monotonic())
        closed = asyncio.ensure_future(reader.read(1))  # b"" (or an error) once the client closes
        try:
            writer.write(head)
            await writer.drain()
            for at in range(0, len(rest), self.step):
                if closed.done():
                    break
                writer.write(rest[at : at + self.step])
                await writer.drain()
                await asyncio.sleep(self.every)
            else:
                return
            self.ended.append(time.monotonic())
        except ConnectionError:
            self.ended.append(time.monotonic())
        finally:
            closed.cancel()


@pytest.fixture
def dribbler() -> Iterator[Any]:
    servers: list[Dribbler] = []

    def start(*dribble: str, torn: set[str] | None = None) -> Dribbler:
        server = Dribbler(set(dribble), torn=torn or set())
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# ---- the deadline ----------------------------------------------------------------------------------


def test_the_default_deadline_is_the_contracts() -> None:
    default = inspect.signature(GuardedTransport).parameters["timeout"].default
    assert default == contract.DEFAULT_CALL_TIMEOUT == 600.0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_deadline_is_positive_or_none(bad: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        GuardedTransport("http://127.0.0.1:9/mcp", timeout=bad)


async def test_a_dribbled_tool_call_ends_at_its_deadline_as_outcome_unknown(dribbler) -> None:
    """A `tools/call` answered a few bytes at a time: with `timeout=2`, the call ends after 2 s
    with the contract's timeout error (-32050: the tool may have run), and the connection is
    dropped."""
    server = dribbler("tools/call")
    with anyio.fail_after(GUARD):
        async with Client(GuardedTransport(server.url, timeout=2)) as client:
            start = time.monotonic()
            with pytest.raises(OutcomeUnknown) as raised, typed_errors():
                await client.call_tool("t", {})
            elapsed = time.monotonic() - start
    assert 2.0 <= elapsed < 15.0, elapsed
    check_contract(
        raised.value,
        contract.Code.OUTCOME_UNKNOWN,
        contract.Kind.TIMEOUT,
        contract.Outcome.UNKNOWN,
        contract.TOOLS_CALL,
    )
    assert raised.value.code == OUTCOME_UNKNOWN
    # The dribbled connection was closed by the client at the deadline (not left to the server).
    assert len(server.started) == 1
    deadline = start + 2.0
    for _ in range(50):
        if server.ended:
            break
        time.sleep(0.1)
    assert server.ended and deadline - 0.5 <= server.ended[0] < deadline + 5.0, (server.ended, deadline)


async def test_a_dribbled_answer_to_another_method_ends_at_its_deadline_as_unavailable(dribbler) -> None:
    """The same for `tools/list` answered `application/json` a few bytes at a time: -32051."""
    server = dribbler("tools/list")
    with anyio.fail_after(GUARD):
        async with Client(GuardedTransport(server.url, timeout=2)) as client:
            start = time.monotonic()
            with pytest.raises(Unavailable) as raised, typed_errors():
                await client.list_tools()
            elapsed = time.monotonic() - start
    assert 2.0 <= elapsed < 15.0, elapsed
    check_contract(
        raised.value, contract.Code.UNAVAILABLE, contract.Kind.TIMEOUT, contract.Outcome.UNKNOWN, "tools/list"
    )


async def test_the_deadline_covers_a_resume(testkit) -> None:
    """Resumes are inside the deadline: the result's stream is cut and the proxy holds the resume's
    connection for a minute; with `timeout=3` the call ends at 3 s, typed, the tool run once."""
    kit = testkit(mode="buffered", proxy=True, accept_delay_ms=60_000)
    kit.cut(300_000)
    with anyio.fail_after(GUARD):
        async with Client(GuardedTransport(kit.url, timeout=3, terminate_on_close=False)) as client:
            start = time.monotonic()
            with pytest.raises(OutcomeUnknown) as raised, typed_errors():
                await client.call_tool("big_result", {"size": 1 * MIB, "seed": 9})
            elapsed = time.monotonic() - start
    assert 3.0 <= elapsed < 15.0, elapsed
    check_contract(
        raised.value,
        contract.Code.OUTCOME_UNKNOWN,
        contract.Kind.TIMEOUT,
        contract.Outcome.UNKNOWN,
        contract.TOOLS_CALL,
    )
    assert kit.cuts() == 1
    assert kit.stats()["calls"] == 1


async def test_no_deadline_with_none(testkit) -> None:
    """`timeout=None`: no deadline, the answer arrives as usual."""
    kit = testkit(mode="buffered")
    with anyio.fail_after(GUARD):
        async with Client(GuardedTransport(kit.url, timeout=None)) as client:
            result = await client.call_tool("big_result", {"size": 100_000, "seed": 1})
    assert result.content[0].text == kit.expected_text(100_000, 1)


# ---- the contract's other answers ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_server_that_cannot_be_reached_is_unavailable_and_not_run() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    with anyio.fail_after(GUARD), pytest.raises(BaseException) as raised:
        async with Client(GuardedTransport(url)):
            pass
    error = mcp_error(raised.value)
    data = error.data
    assert isinstance(data, dict), error
    check_contract(
        error,
        contract.Code.UNAVAILABLE,
        contract.Kind.UNREACHABLE,
        contract.Outcome.NOT_RUN,
        data.get(contract.DATA_METHOD, ""),
    )
    assert error.code == UNAVAILABLE
    with pytest.raises(Unavailable), typed_errors():
        raise error


async def test_a_refused_tool_call_is_outcome_unknown_with_the_refusal(testkit) -> None:
    """A `tools/call` whose stream the engine refused (the cut result's resume brings nothing: the
    `empty` server's replay miss): -32050, kind `refused`, the engine's refusal in `data.refusal`."""
    kit = testkit(mode="empty", proxy=True)
    kit.cut(300_000)
    with anyio.fail_after(60):
        async with Client(GuardedTransport(kit.url)) as client:
            with pytest.raises(OutcomeUnknown) as raised, typed_errors():
                await client.call_tool("big_result", {"size": 1 * MIB, "seed": 9})
    data = check_contract(
        raised.value,
        contract.Code.OUTCOME_UNKNOWN,
        contract.Kind.REFUSED,
        contract.Outcome.UNKNOWN,
        contract.TOOLS_CALL,
    )
    assert data.get(contract.DATA_REFUSAL) == "replay-missed", data
    assert data[contract.DATA_REFUSAL] in contract.REFUSAL_KINDS
    assert kit.stats()["calls"] == 1


async def test_a_refused_answer_to_another_method_is_refused(testkit) -> None:
    """A `tools/list` answered as an event stream, cut, on a server that cannot replay it (`restart`
    re-runs only calls; it answers this resume 409): the engine refuses the stream; -32053, kind
    `refused`, with the refusal. Each request on a new connection, so the armed cut hits the
    `tools/list` answer's."""
    kit = testkit(mode="restart", proxy=True, tools_list_sse=True)
    no_keepalive = httpx2.Limits(max_keepalive_connections=0)
    with anyio.fail_after(60):
        async with (
            httpx2.AsyncClient(limits=no_keepalive, timeout=30) as http,
            Client(GuardedTransport(kit.url, httpx_client=http)) as client,
        ):
            kit.cut(_TOOLS_LIST_CUT)
            with pytest.raises(Refused) as raised, typed_errors():
                await client.list_tools()
    data = check_contract(
        raised.value, contract.Code.REFUSED, contract.Kind.REFUSED, contract.Outcome.UNKNOWN, "tools/list"
    )
    assert data.get(contract.DATA_REFUSAL) == "replay-unavailable", data
    assert kit.cuts() == 1


_TOOLS_LIST_CUT = 400
"""A byte of the `tools/list` answer's connection after its head and priming event, inside its
result event (the test kit's tools/list answer is a few KB)."""


@pytest.mark.parametrize(
    ("method", "code", "error"),
    [
        ("tools/list", contract.Code.SERVER_PROTOCOL, ServerProtocol),
        (contract.TOOLS_CALL, contract.Code.OUTCOME_UNKNOWN, OutcomeUnknown),
    ],
)
async def test_a_torn_json_answer_is_server_protocol_or_outcome_unknown(
    dribbler, method: str, code: contract.Code, error: type[MCPError]
) -> None:
    """An `application/json` answer that is not one complete JSON value (whole, by its length):
    kind `protocol`; -32052 for `tools/list`, -32050 for a `tools/call` (the tool may have run)."""
    server = dribbler(torn={method})
    with anyio.fail_after(GUARD):
        async with Client(GuardedTransport(server.url)) as client:
            with pytest.raises(error) as raised, typed_errors():
                if method == contract.TOOLS_CALL:
                    await client.call_tool("t", {})
                else:
                    await client.list_tools()
    check_contract(raised.value, code, contract.Kind.PROTOCOL, contract.Outcome.UNKNOWN, method)


def test_the_public_codes_are_the_contracts() -> None:
    assert list(contract.Code) == [OUTCOME_UNKNOWN, UNAVAILABLE, SERVER_PROTOCOL, REFUSED]
    assert [int(c) for c in contract.Code] == [-32050, -32051, -32052, -32053]
    for code, error in [
        (OUTCOME_UNKNOWN, OutcomeUnknown),
        (UNAVAILABLE, Unavailable),
        (SERVER_PROTOCOL, ServerProtocol),
        (REFUSED, Refused),
    ]:
        with pytest.raises(error), typed_errors():
            raise MCPError(int(code), code.message, {})
    # Another code stays a plain MCPError.
    with pytest.raises(MCPError) as raised, typed_errors():
        raise MCPError(-32601, "no such method")
    assert type(raised.value) is MCPError
