"""`GuardedTransport`: the official Python MCP SDK's Streamable HTTP transport with every response
body decoded, gated and guarded by ssegate's engine.

```python
from mcp import Client
from ssegate.mcp import GuardedTransport

async with Client(GuardedTransport("https://mcp.example.com/mcp")) as client:
    result = await client.call_tool("search", {"q": "sse"})
```

HTTP goes through the SDK's own `httpx2` client (yours, when you pass `httpx_client`), so auth,
proxies and TLS settings keep working. What changes is how an answer is read:

- An event stream is read by `ssegate.ResumableStream`: no event size cap below `max_event`
  (64 MiB by default, like the Rust client; the SDK's own transport drops events over 1 MiB), every
  message one complete JSON value, one response per request id.
- A stream cut on a 2025-era server is resumed in place (`GET` + `Last-Event-ID`) when the guard can
  prove the replay continues the cut stream. When it cannot (a restart, a gap, an empty replay...)
  or the server speaks 2026-07-28 (no resumption there), the request is answered with an error the
  application can tell apart: `OutcomeUnknown` for a `tools/call` (the server may have run the
  tool; nothing was sent again), `Refused` for anything else. The transport never sends a request
  twice.
- Bounded like the Rust client: a `JSON` answer up to `max_json_body` (64 MiB), an error answer's
  body read up to `max_error_body` (1 KiB), no redirect followed, each reconnect timed by the
  engine (`replay_timeout`, `idle_timeout`, `max_delay`).

The SDK raises a JSON-RPC error as `mcp.shared.exceptions.MCPError`; inside `typed_errors()` the two
this transport makes are raised as `OutcomeUnknown` and `Refused` (both `MCPError` subclasses).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import (
    LAST_EVENT_ID,
    RequestContext,
    StreamableHTTPTransport,
    StreamWriter,
)
from mcp.shared._context_streams import create_context_streams
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import ResumableStream, Verdict, gate

__all__ = [
    "GuardedTransport",
    "OUTCOME_UNKNOWN",
    "REFUSED",
    "OutcomeUnknown",
    "Refused",
    "typed_errors",
]

logger = logging.getLogger(__name__)

OUTCOME_UNKNOWN = -32050
"""JSON-RPC code of a `tools/call` whose answer was lost: the server may have run the tool."""

REFUSED = -32051
"""JSON-RPC code of a request whose answer was lost or refused (no side effects are known)."""

DEFAULT_MAX_EVENT = 64 << 20
DEFAULT_MAX_JSON_BODY = 64 << 20
DEFAULT_MAX_ERROR_BODY = 1 << 10


class OutcomeUnknown(MCPError):
    """A `tools/call` whose answer was lost and could not be recovered: the server may have run the
    tool, and the transport did not send it again. `data` says why (`reason`, `kind`)."""


class Refused(MCPError):
    """A request whose answer stream was refused or lost; the request has no known side effects, so
    the application may send it again."""


@contextlib.contextmanager
def typed_errors() -> Iterator[None]:
    """Raises this transport's errors as `OutcomeUnknown` and `Refused` instead of `MCPError`."""
    try:
        yield
    except MCPError as e:
        if type(e) is MCPError and e.code == OUTCOME_UNKNOWN:
            raise OutcomeUnknown(e.code, e.message, e.data) from e
        if type(e) is MCPError and e.code == REFUSED:
            raise Refused(e.code, e.message, e.data) from e
        raise


def _method(message: Any) -> str:
    return getattr(message, "method", "") or ""


def _lost(request_id: RequestId, method: str, reason: str, kind: str) -> SessionMessage:
    """The error answering a request whose answer was lost."""
    tool = method == "tools/call"
    code = OUTCOME_UNKNOWN if tool else REFUSED
    text = (
        "outcome unknown: the call's answer was lost and it was not sent again; the tool may have run"
        if tool
        else "the answer was lost: " + reason
    )
    data = {"kind": kind, "outcome": "unknown", "method": method, "reason": reason}
    error = ErrorData(code=code, message=text, data=data)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


async def _read_capped(response: httpx2.Response, cap: int) -> tuple[bytes, bool]:
    """At most `cap` bytes of the body; whether there was more (then the rest is not read)."""
    out = bytearray()
    async for chunk in response.aiter_bytes():
        room = cap - len(out)
        if len(chunk) > room:
            out += chunk[:room]
            return bytes(out), True
        out += chunk
    return bytes(out), False


class _GuardedHTTP(StreamableHTTPTransport):
    """The SDK's transport, reading every answer through ssegate's engine."""

    def __init__(
        self,
        url: str,
        *,
        max_event: int,
        max_json_body: int,
        max_error_body: int,
        replay_timeout: float,
        idle_timeout: float | None,
        max_delay: float,
    ) -> None:
        # The SDK's own event cap is off: the engine's limit (max_event) holds instead.
        super().__init__(url, max_sse_event_size=None)
        self._stream_options: dict[str, Any] = {
            "max_event": max_event,
            "replay_timeout": replay_timeout,
            "idle_timeout": idle_timeout,
            "max_delay": max_delay,
        }
        self._max_json_body = max_json_body
        self._max_error_body = max_error_body

    def _modern(self) -> bool:
        return self._protocol_version_header in MODERN_PROTOCOL_VERSIONS

    async def _handle_post_request(self, ctx: RequestContext) -> None:
        message = ctx.session_message.message
        is_request = isinstance(message, JSONRPCRequest)
        headers = self._prepare_headers()
        if ctx.metadata is not None and ctx.metadata.headers is not None:
            headers.update(ctx.metadata.headers)
        body = message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        request = ctx.client.build_request("POST", self.url, json=body, headers=headers)
        try:
            response = await ctx.client.send(request, stream=True, follow_redirects=False)
        except httpx2.TransportError as exc:
            if not is_request:
                raise
            # A connect failure sent nothing; anything later may have reached the server.
            kind = "unreachable" if isinstance(exc, httpx2.ConnectError) else "http"
            reason = f"{type(exc).__name__}: {exc}"
            if kind == "unreachable":
                error = ErrorData(code=REFUSED, message=f"the server could not be reached: {reason}",
                                  data={"kind": kind, "outcome": "not-run", "method": _method(message)})
                reply = SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
            else:
                reply = _lost(message.id, _method(message), reason, kind)
            await ctx.read_stream_writer.send(reply)
            return
        try:
            await self._answered(ctx, message, response)
        finally:
            await response.aclose()

    async def _answered(self, ctx: RequestContext, message: Any, response: httpx2.Response) -> None:
        is_request = isinstance(message, JSONRPCRequest)
        status = response.status_code
        if status == 202:
            if is_request:
                await self._resolve_abandoned_request(
                    ctx.read_stream_writer, message.id, "server answered a request with 202 Accepted",
                    code=INVALID_REQUEST,
                )
            return
        if 300 <= status < 400:
            if is_request:
                where = response.headers.get("location", "(no Location)")
                await self._resolve_abandoned_request(
                    ctx.read_stream_writer, message.id,
                    f"the server answered {status}, a redirect to {where}, which is not followed",
                    code=INVALID_REQUEST,
                )
            return
        if status >= 400:
            if not is_request:
                return
            body, _ = await _read_capped(response, self._max_error_body)
            content_type = response.headers.get("content-type", "").lower()
            if content_type.startswith("application/json"):
                try:
                    parsed = jsonrpc_message_adapter.validate_json(body, by_name=False)
                    if isinstance(parsed, JSONRPCError):
                        reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=parsed.error)
                        await ctx.read_stream_writer.send(SessionMessage(reply))
                        return
                except ValueError:
                    pass
            if status == 404:
                error = (
                    ErrorData(code=METHOD_NOT_FOUND, message="Not Found")
                    if self.session_id is None
                    else ErrorData(code=INVALID_REQUEST, message="Session terminated")
                )
            else:
                error = ErrorData(code=INTERNAL_ERROR, message=f"Server returned an error response ({status})")
            await ctx.read_stream_writer.send(
                SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
            )
            return
        if self._is_initialization_request(message):
            self._maybe_extract_session_id_from_response(response)
        if not is_request:
            return
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            await self._json_answer(ctx, message, response)
        elif content_type.startswith("text/event-stream"):
            await self._handle_sse_response(response, ctx)
        else:
            error = ErrorData(code=INVALID_REQUEST, message=f"Unexpected content type: {content_type}")
            await ctx.read_stream_writer.send(
                SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
            )

    async def _json_answer(self, ctx: RequestContext, message: Any, response: httpx2.Response) -> None:
        """A JSON answer: read up to the cap, gated whole, then parsed."""
        try:
            body, more = await _read_capped(response, self._max_json_body)
        except httpx2.TransportError as exc:
            await ctx.read_stream_writer.send(
                _lost(message.id, _method(message), f"{type(exc).__name__}: {exc}", "http")
            )
            return
        verdict = Verdict.INCOMPLETE if more else gate(body)
        if more or verdict is not Verdict.COMPLETE:
            why = (
                f"the JSON answer exceeds {self._max_json_body} bytes"
                if more
                else f"the JSON answer is {verdict}, not one complete JSON value"
            )
            error = ErrorData(code=PARSE_ERROR, message=why)
            await ctx.read_stream_writer.send(
                SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
            )
            return
        parsed = jsonrpc_message_adapter.validate_json(body, by_name=False)
        await ctx.read_stream_writer.send(SessionMessage(parsed))

    async def _handle_sse_response(self, response: httpx2.Response, ctx: RequestContext) -> None:
        message = ctx.session_message.message
        assert isinstance(message, JSONRPCRequest)
        stream = ResumableStream(resumable=not self._modern(), **self._stream_options)
        stream.expect_response(message.id)
        await _Drive(self, stream, ctx.client, ctx.read_stream_writer, ctx).run(response)

    async def handle_get_stream(self, client: httpx2.AsyncClient, read_stream_writer: StreamWriter) -> None:
        """The standalone `GET` stream, guarded and resumed like a response stream."""
        if not self.session_id or self._modern():
            return
        stream = ResumableStream(keep_open=True, **self._stream_options)
        drive = _Drive(self, stream, client, read_stream_writer, None)
        response = await drive.get(None)
        if response is None:
            return
        if not _is_event_stream(response):
            # 405: the server offers no GET stream; anything else: none is opened either.
            logger.debug("no GET stream: %s", response.status_code)
            await response.aclose()
            return
        await drive.run(response)

    async def _handle_resumption_request(self, ctx: RequestContext) -> None:
        """A request the application resumes from a token it kept (`resumption_token`): `GET` with
        `Last-Event-ID`, the stream read by the engine like any other. The engine did not see the
        stream the token came from, so the replay's first event is taken as the server sends it;
        every later cut of this stream is guarded as usual."""
        message = ctx.session_message.message
        assert isinstance(message, JSONRPCRequest)
        token = ctx.metadata.resumption_token if ctx.metadata is not None else None
        if not token:
            raise ValueError("a resumption request needs a resumption token")
        stream = ResumableStream(resumable=not self._modern(), **self._stream_options)
        stream.expect_response(message.id)
        drive = _Drive(self, stream, ctx.client, ctx.read_stream_writer, ctx)
        response = await drive.get(token.encode("latin-1"))
        if response is None:
            reply = _lost(message.id, _method(message), "the resumption GET failed", "http")
            await ctx.read_stream_writer.send(reply)
            return
        if not _is_event_stream(response):
            status = response.status_code
            await response.aclose()
            reason = f"the resumption GET was answered {status}"
            await ctx.read_stream_writer.send(_lost(message.id, _method(message), reason, "refused"))
            return
        await drive.run(response)


def _is_event_stream(response: httpx2.Response) -> bool:
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return response.status_code == 200 and content_type == "text/event-stream"


_DONE = object()
_ENDED = object()


class _Drive:
    """Drives one `ResumableStream` over a response and the resumes it asks for."""

    def __init__(
        self,
        transport: _GuardedHTTP,
        stream: ResumableStream,
        client: httpx2.AsyncClient,
        writer: StreamWriter,
        ctx: RequestContext | None,
    ) -> None:
        self.transport = transport
        self.stream = stream
        self.client = client
        self.writer = writer
        self.ctx = ctx
        message = ctx.session_message.message if ctx is not None else None
        self.request_id: RequestId | None = getattr(message, "id", None)
        self.method = _method(message)
        self.cursor: bytes | None = None
        self.pending: Any = None

    async def get(self, last_event_id: bytes | None) -> httpx2.Response | None:
        """`GET` on the session, with `Last-Event-ID` when there is one; None if it failed."""
        headers = self.transport._prepare_headers()
        headers["accept"] = "text/event-stream"
        headers.pop("content-type", None)
        if last_event_id is not None:
            headers[LAST_EVENT_ID] = last_event_id.decode("latin-1")
        request = self.client.build_request("GET", self.transport.url, headers=headers)
        try:
            return await self.client.send(request, stream=True, follow_redirects=False)
        except httpx2.TransportError as exc:
            logger.debug("GET failed: %s", exc)
            return None

    async def run(self, response: httpx2.Response) -> None:
        current: httpx2.Response | None = response
        while current is not None:
            try:
                state = await self.read(current)
            finally:
                await current.aclose()
            if state is _DONE:
                return
            current = await self.next_connection()

    async def read(self, response: httpx2.Response) -> object:
        """Reads one connection to its end, the engine's deadlines (replay, idle) timed while it is
        open: `_DONE` when the stream is done with, `_ENDED` when the connection is over."""
        send, receive = anyio.create_memory_object_stream[tuple[str, Any]](1)

        async def reader() -> None:
            async with send:
                try:
                    async for chunk in response.aiter_bytes():
                        await send.send(("chunk", chunk))
                    await send.send(("end", "eof"))
                except (httpx2.TransportError, httpx2.StreamError) as exc:
                    logger.debug("the stream was cut: %s", exc)
                    await send.send(("end", "error"))

        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(reader)
            try:
                while True:
                    deadline = self.stream.poll_timeout()
                    item = None
                    if deadline is None:
                        item = await receive.receive()
                    else:
                        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                            item = await receive.receive()
                    now = time.monotonic()
                    if item is None:
                        # A deadline passed: a replay that brought nothing is refused, an idle
                        # connection is ended by the engine (and then resumed).
                        self.stream.handle_timeout(now)
                    elif item[0] == "chunk":
                        self.stream.feed(item[1], now)
                    else:
                        self.stream.connection_ended(item[1], now)
                    state = await self.drain()
                    if state is not None:
                        return state
                    if item is not None and item[0] == "end":
                        return _ENDED
            finally:
                tg.cancel_scope.cancel()

    async def drain(self) -> object:
        """Handles what the engine has to say while a connection is open: `_DONE` once the stream
        is done with, `_ENDED` when the engine ended the connection, None to read on."""
        while (out := self.stream.poll()) is not None:
            if await self.handle(out):
                return _DONE
            if out.kind == "reconnect":
                self.pending = out
                return _ENDED
            if out.kind == "disconnected":
                return _ENDED
        return None

    async def next_connection(self) -> httpx2.Response | None:
        """After a connection ended: the next one to read (a resume), or None when done."""
        while True:
            out, self.pending = self.pending or self.stream.poll(), None
            if out is None:
                deadline = self.stream.poll_timeout()
                if deadline is None:
                    return None
                await anyio.sleep(max(0.0, deadline - time.monotonic()))
                self.stream.handle_timeout(time.monotonic())
                continue
            if out.kind == "reconnect":
                response = await self.get(out.last_event_id)
                now = time.monotonic()
                if response is None:
                    self.stream.reconnect_failed(now)
                    continue
                answer = self.stream.reconnect_response(
                    response.status_code,
                    response.headers.get("content-type"),
                    response.headers.get("retry-after"),
                    now,
                )
                if answer == "read":
                    return response
                await response.aclose()
                continue
            if await self.handle(out):
                return None

    async def handle(self, out: Any) -> bool:
        """One output of the engine; True when the stream is done with."""
        kind = out.kind
        if kind == "deliver":
            await self.deliver(out)
            return False
        if kind == "finished":
            return True
        if kind == "failed":
            reason = out.reason
            logger.warning("the response stream was lost: %s", reason)
            if self.request_id is not None:
                await self.writer.send(_lost(self.request_id, self.method, reason, out.failure))
            return True
        if kind == "dropped":
            # An event over a limit while the response is outstanding may have been the response.
            if self.request_id is not None:
                reason = f"an event was dropped over a limit: {out.reason}"
                await self.writer.send(_lost(self.request_id, self.method, reason, "limit"))
                return True
            logger.warning("an event was dropped: %s", out.reason)
        return False

    async def deliver(self, out: Any) -> None:
        # One copy, into what pydantic parses; the engine has already gated it as one JSON value.
        data = bytes(out.message)
        response = out.rpc_kind == "response"
        try:
            parsed = jsonrpc_message_adapter.validate_json(data, by_name=False)
        except ValueError as exc:
            logger.warning("a message the SDK does not take: %s", exc)
            if response and self.request_id is not None:
                error = ErrorData(code=PARSE_ERROR, message=f"the response is not a JSON-RPC message the SDK takes: {exc}")
                await self.writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error)))
            else:
                await self.writer.send(exc)
            return
        if response and self.request_id is not None and isinstance(parsed, JSONRPCResponse | JSONRPCError):
            # As the SDK does: the answer carries the id the request was sent with.
            parsed.id = self.request_id
        await self.writer.send(SessionMessage(parsed))
        cursor = self.stream.cursor
        if cursor is not None and cursor != self.cursor and self.ctx is not None:
            self.cursor = cursor
            metadata = self.ctx.metadata
            if metadata is not None and metadata.on_resumption_token_update is not None:
                await metadata.on_resumption_token_update(cursor.decode("latin-1"))


class GuardedTransport:
    """An MCP `Transport` for `mcp.Client` (and, through the same streams, `ClientSession`):
    Streamable HTTP through the SDK's `httpx2` client, every answer read by ssegate's engine.

    Args:
        url: The MCP endpoint.
        headers: Headers for every request (ignored when `httpx_client` is given).
        auth: An `httpx2.Auth` (ignored when `httpx_client` is given).
        httpx_client: Your own `httpx2.AsyncClient` (you close it); redirects are never followed.
        terminate_on_close: End the session with `DELETE` on exit.
        max_event: The largest SSE event (bytes of data).
        max_json_body: The largest `application/json` answer.
        max_error_body: How much of an error answer's body is read.
        replay_timeout: Seconds a resume may take to bring its first event.
        idle_timeout: Seconds a connection may bring nothing before it is resumed (None: never).
        max_delay: The longest wait before a reconnect, whatever the server asks.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        httpx_client: httpx2.AsyncClient | None = None,
        terminate_on_close: bool = True,
        max_event: int = DEFAULT_MAX_EVENT,
        max_json_body: int = DEFAULT_MAX_JSON_BODY,
        max_error_body: int = DEFAULT_MAX_ERROR_BODY,
        replay_timeout: float = 10.0,
        idle_timeout: float | None = 300.0,
        max_delay: float = 60.0,
    ) -> None:
        self.url = url
        self._headers = headers
        self._auth = auth
        self._client = httpx_client
        self._terminate = terminate_on_close
        self._transport = _GuardedHTTP(
            url,
            max_event=max_event,
            max_json_body=max_json_body,
            max_error_body=max_error_body,
            replay_timeout=replay_timeout,
            idle_timeout=idle_timeout,
            max_delay=max_delay,
        )
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def session_id(self) -> str | None:
        """The session id the server gave, if any."""
        return self._transport.session_id

    async def __aenter__(self) -> Any:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            streams = await stack.enter_async_context(self._run())
        except BaseException:
            await stack.__aexit__(None, None, None)
            raise
        self._stack = stack
        return streams

    async def __aexit__(self, *exc: Any) -> bool | None:
        stack, self._stack = self._stack, None
        if stack is not None:
            return await stack.__aexit__(*exc)
        return None

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[Any]:
        transport = self._transport
        async with contextlib.AsyncExitStack() as stack:
            client = self._client
            if client is None:
                client = create_mcp_http_client(headers=self._headers, auth=self._auth)
                await stack.enter_async_context(client)
            read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
            write_stream, write_reader = create_context_streams[SessionMessage](0)
            async with read_writer, read_stream, write_stream, write_reader, anyio.create_task_group() as tg:

                def start_get_stream() -> None:
                    tg.start_soon(transport.handle_get_stream, client, read_writer)

                tg.start_soon(transport.post_writer, client, write_reader, read_writer, write_stream, start_get_stream, tg)
                try:
                    yield read_stream, write_stream
                finally:
                    if transport.session_id and self._terminate:
                        with anyio.move_on_after(5):
                            await transport.terminate_session(client)
                    tg.cancel_scope.cancel()
