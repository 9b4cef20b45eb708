"""`GuardedTransport`: the official Python MCP SDK's Streamable HTTP transport with every response
body decoded, gated and guarded by ssegate's engine, and every request's answer bounded by a
deadline.

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
  application can tell apart (below). The transport never sends a request twice.
- Every request's answer has a deadline, `timeout` (600 s by default, as the Rust client and
  `ssegate bridge`), from the request to its answer, resumes included: when it passes, the
  connection is dropped and the request answered with the timeout error.
- Bounded like the Rust client: a `JSON` answer up to `max_json_body` (64 MiB), an error answer's
  body read up to `max_error_body` (1 KiB), no redirect followed, each reconnect timed by the
  engine (`replay_timeout`, `idle_timeout`, `max_delay`).

The errors are ssegate's wire contract (`ssegate.contract`, the same as the Rust client's, the rmcp
adapter's and `ssegate bridge`'s): a JSON-RPC error whose `code` is one of

- `OUTCOME_UNKNOWN` (-32050): a `tools/call` sent whose answer was lost (cut, refused, timed out,
  torn): the server may have run the tool, and nothing was sent again;
- `UNAVAILABLE` (-32051): the server could not be reached (`data.outcome` "not-run"), answered with
  an error status, or gave no answer in time (another method than `tools/call`);
- `SERVER_PROTOCOL` (-32052): the server broke the protocol (a torn or invalid answer);
- `REFUSED` (-32053): the answer's stream was refused (it could not be resumed as the same stream);

with the contract's `message` for the code and `data` saying what happened: `kind` (`refused`,
`timeout`, `unreachable`, `status`...), `outcome` (`unknown`: the server may have acted; `not-run`),
`method`, `reason` (one line), `refusal` (the engine's refusal, e.g. `replay-missed`, when it
refused the stream) and `status` (the HTTP status, when there was one). An error the server
answered itself is passed on as it is. When the `auth` (the SDK's `OAuthClientProvider`...) raises,
its sign-in or refresh failed (a refused authorization, a token endpoint's error): the request is
answered with kind `auth` (`UNAVAILABLE`, not run; when it is a resume's, the answer is lost:
`OUTCOME_UNKNOWN` for a `tools/call`), the exception in `reason`.

The SDK raises a JSON-RPC error as `mcp.shared.exceptions.MCPError`; inside `typed_errors()` this
transport's are raised as `OutcomeUnknown`, `Unavailable`, `ServerProtocol` and `Refused` (all
`MCPError` subclasses).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc
import httpx2
from mcp.client.streamable_http import LAST_EVENT_ID, RequestContext, StreamWriter
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import (
    Deliver,
    Disconnected,
    Dropped,
    Failed,
    Finished,
    Output,
    Reconnect,
    ResumableStream,
    Verdict,
    _sdk,
    gate,
)
from .contract import (
    DATA_KIND,
    DATA_METHOD,
    DATA_OUTCOME,
    DATA_REASON,
    DATA_REFUSAL,
    DATA_STATUS,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_DELAY,
    DEFAULT_MAX_ERROR_BODY,
    DEFAULT_MAX_EVENT,
    DEFAULT_MAX_JSON_BODY,
    DEFAULT_REPLAY_TIMEOUT,
    Code,
    Kind,
    Outcome,
    code_for,
)

__all__ = [
    "OUTCOME_UNKNOWN",
    "REFUSED",
    "SERVER_PROTOCOL",
    "UNAVAILABLE",
    "GuardedTransport",
    "OutcomeUnknown",
    "Refused",
    "ServerProtocol",
    "Unavailable",
    "typed_errors",
]

logger = logging.getLogger(__name__)

OUTCOME_UNKNOWN = Code.OUTCOME_UNKNOWN
"""-32050: a `tools/call` whose answer was lost: the server may have run the tool."""

UNAVAILABLE = Code.UNAVAILABLE
"""-32051: the server could not be reached, did not take the request, or gave no answer in time."""

SERVER_PROTOCOL = Code.SERVER_PROTOCOL
"""-32052: the server broke the protocol (a torn, invalid or foreign answer)."""

REFUSED = Code.REFUSED
"""-32053: the answer's stream was refused: it could not be resumed as the same stream."""


class OutcomeUnknown(MCPError):
    """-32050: a `tools/call` whose answer was lost and could not be recovered: the server may have
    run the tool, and the transport did not send it again. `data` says why (`kind`, `reason`)."""


class Unavailable(MCPError):
    """-32051: the server could not be reached (`data["outcome"]` is "not-run"), answered with an
    error status (`data["status"]`), or gave no answer before the deadline (`data["kind"]` is
    "timeout")."""


class ServerProtocol(MCPError):
    """-32052: the server broke the protocol: an answer that is not one complete JSON-RPC message, a
    content type that is neither JSON nor an event stream, `202` to a request."""


class Refused(MCPError):
    """-32053: a request (not a `tools/call`) whose answer stream was refused: it could not be
    resumed as the same stream (`data["refusal"]` says why, when the engine refused it)."""


_TYPED: dict[int, type[MCPError]] = {
    OUTCOME_UNKNOWN: OutcomeUnknown,
    UNAVAILABLE: Unavailable,
    SERVER_PROTOCOL: ServerProtocol,
    REFUSED: Refused,
}


@contextlib.contextmanager
def typed_errors() -> Iterator[None]:
    """Raises an `MCPError` with one of this transport's codes as its class (`OutcomeUnknown`,
    `Unavailable`, `ServerProtocol`, `Refused`) instead of as a plain `MCPError`."""
    try:
        yield
    except MCPError as e:
        typed = _TYPED.get(e.code) if type(e) is MCPError else None
        if typed is None:
            raise
        raise typed(e.code, e.message, e.data) from e


def _error_message(
    request_id: RequestId,
    method: str,
    kind: Kind,
    outcome: Outcome,
    reason: str,
    *,
    refusal: str | None = None,
    status: int | None = None,
) -> JSONRPCError:
    """The contract's error answering `method` request `request_id`."""
    code = code_for(method, kind, outcome)
    data: dict[str, Any] = {
        DATA_KIND: kind.value,
        DATA_OUTCOME: outcome.value,
        DATA_METHOD: method,
        DATA_REASON: reason,
    }
    if refusal is not None:
        data[DATA_REFUSAL] = refusal
    if status is not None:
        data[DATA_STATUS] = status
    error = ErrorData(code=int(code), message=code.message, data=data)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _Request:
    """A request waiting for its answer. Every answer goes through `answer()`, which hands the
    application one: a later one (an error after the response, the timeout error after an error
    whose sending the deadline interrupted) is dropped here or, should it get through, by the SDK,
    which drops an answer to a request it no longer waits for."""

    def __init__(self, writer: StreamWriter, message: JSONRPCRequest) -> None:
        self.writer = writer
        self.id: RequestId = message.id
        self.method = message.method
        self.answered = False

    async def answer(self, message: JSONRPCMessage) -> None:
        if self.answered:
            logger.debug("request %r is answered already; dropping %s", self.id, type(message).__name__)
            return
        try:
            await self.writer.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("the read stream closed before request %r could be answered", self.id)
        self.answered = True

    async def fail(
        self,
        kind: Kind,
        outcome: Outcome,
        reason: str,
        *,
        refusal: str | None = None,
        status: int | None = None,
    ) -> None:
        """Answers with the contract's error (its code by `code_for`)."""
        error = _error_message(self.id, self.method, kind, outcome, reason, refusal=refusal, status=status)
        await self.answer(error)


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


async def _close(response: httpx2.Response) -> None:
    """Closes a response (and, unless it was read to its end, its connection), even when the task
    is being cancelled (the deadline)."""
    with anyio.move_on_after(5, shield=True):
        await response.aclose()


def _is_event_stream(response: httpx2.Response) -> bool:
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return response.status_code == 200 and content_type == "text/event-stream"


def _sign_in_failed(client: httpx2.AsyncClient, exc: Exception) -> str | None:
    """What `client.send` raised, other than an `httpx2.TransportError`, when the client has an
    `auth` (the SDK's `OAuthClientProvider`...): its sign-in or refresh failed (a refused
    authorization, a token endpoint's error), and the request was not sent with a token. The
    reason, or None when there is no `auth` (then it is a bug, raised as it is)."""
    if client.auth is None:
        return None
    return f"the sign-in failed ({type(client.auth).__name__}): {_described(exc)}"


class _GuardedHTTP(_sdk.Transport):
    """The SDK's transport, reading every answer through ssegate's engine, within the deadline."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float | None,
        max_event: int,
        max_json_body: int,
        max_error_body: int,
        replay_timeout: float,
        idle_timeout: float | None,
        max_delay: float,
    ) -> None:
        # The SDK's own event cap is off: the engine's limit (max_event) holds instead.
        super().__init__(url, max_sse_event_size=None)
        self._timeout = timeout
        self._stream_options: dict[str, Any] = {
            "max_event": max_event,
            "replay_timeout": replay_timeout,
            "idle_timeout": idle_timeout,
            "max_delay": max_delay,
        }
        self._max_json_body = max_json_body
        self._max_error_body = max_error_body

    def _modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _stream(self, request: _Request) -> ResumableStream:
        stream = ResumableStream(resumable=not self._modern(), **self._stream_options)
        stream.expect_response(request.id)
        return stream

    async def _within_deadline(self, request: _Request | None, work: Callable[[], Awaitable[None]]) -> None:
        """Runs `work` (a request's exchange, to its answer) within the deadline. When it passes,
        the work is cancelled (its connection dropped) and the request answered with the timeout
        error, unless it was answered already."""
        if self._timeout is None:
            await work()
            return
        with anyio.move_on_after(self._timeout) as scope:
            await work()
        if not scope.cancelled_caught:
            return
        if request is None:
            logger.warning("a message's POST got no answer within %g s; its connection was dropped", self._timeout)
        elif not request.answered:
            reason = f"no answer within {self._timeout:g} s (the call's deadline); the connection was dropped"
            await request.fail(Kind.TIMEOUT, Outcome.UNKNOWN, reason)

    async def on_post(self, ctx: RequestContext) -> None:
        message = ctx.session_message.message
        request = _Request(ctx.read_stream_writer, message) if isinstance(message, JSONRPCRequest) else None
        await self._within_deadline(request, lambda: self._post(ctx, message, request))

    async def _post(self, ctx: RequestContext, message: JSONRPCMessage, request: _Request | None) -> None:
        headers = self.request_headers()
        if ctx.metadata is not None and ctx.metadata.headers is not None:
            headers.update(ctx.metadata.headers)
        body = message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        http_request = ctx.client.build_request("POST", self.url, json=body, headers=headers)
        try:
            response = await ctx.client.send(http_request, stream=True, follow_redirects=False)
        except httpx2.TransportError as exc:
            if request is None:
                logger.warning("a message could not be sent: %s", _described(exc))
                return
            # A connection that was never made sent nothing; anything later may have reached the
            # server.
            if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
                await request.fail(Kind.UNREACHABLE, Outcome.NOT_RUN, _described(exc))
            else:
                await request.fail(Kind.HTTP, Outcome.UNKNOWN, _described(exc))
            return
        except Exception as exc:
            # The auth flow raised, before the request was sent or after it was answered 401
            # (403): the server did not take it.
            if (reason := _sign_in_failed(ctx.client, exc)) is None:
                raise
            if request is None:
                logger.warning("a message could not be sent: %s", reason)
            else:
                await request.fail(Kind.AUTH, Outcome.NOT_RUN, reason)
            return
        try:
            if request is not None:
                await self._answered(ctx, message, request, response)
        finally:
            await _close(response)

    async def _answered(
        self, ctx: RequestContext, message: JSONRPCMessage, request: _Request, response: httpx2.Response
    ) -> None:
        status = response.status_code
        if status == 202:
            reason = "the server answered the request 202 Accepted: no answer will follow"
            await request.fail(Kind.PROTOCOL, Outcome.UNKNOWN, reason, status=status)
            return
        if 300 <= status < 400:
            where = response.headers.get("location", "(no Location)")
            reason = f"the server answered {status}, a redirect to {where}, which is not followed"
            await request.fail(Kind.REDIRECT, Outcome.NOT_RUN, reason, status=status)
            return
        if status >= 400:
            await self._status_answer(request, response)
            return
        if self.is_initialize(message):
            self.take_session_id(response)
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            await self._json_answer(request, response)
        elif content_type.startswith("text/event-stream"):
            stream = self._stream(request)
            await _Drive(self, stream, ctx.client, ctx.read_stream_writer, request, ctx.metadata).run(response)
        else:
            reason = f"the answer's content type is {content_type or 'missing'}: neither JSON nor an event stream"
            await request.fail(Kind.PROTOCOL, Outcome.UNKNOWN, reason, status=status)

    async def _status_answer(self, request: _Request, response: httpx2.Response) -> None:
        """An error status: the server's own JSON-RPC error when its body is one, else the
        contract's `status` error (a 4xx was not run; after a 5xx the outcome is unknown)."""
        status = response.status_code
        try:
            body, _ = await _read_capped(response, self._max_error_body)
        except (httpx2.TransportError, httpx2.StreamError):
            body = b""
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            try:
                parsed = jsonrpc_message_adapter.validate_json(body, by_name=False)
            except ValueError:
                parsed = None
            if isinstance(parsed, JSONRPCError):
                # The server may have set `id: null`; the answer carries this request's id.
                await request.answer(JSONRPCError(jsonrpc="2.0", id=request.id, error=parsed.error))
                return
        text = " ".join(body.decode("utf-8", "replace").split())
        reason = f"the server answered {status}" + (f": {text}" if text else "")
        outcome = Outcome.NOT_RUN if status < 500 else Outcome.UNKNOWN
        await request.fail(Kind.STATUS, outcome, reason, status=status)

    async def _json_answer(self, request: _Request, response: httpx2.Response) -> None:
        """A JSON answer: read up to the cap, gated whole, then parsed."""
        try:
            body, more = await _read_capped(response, self._max_json_body)
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            await request.fail(Kind.HTTP, Outcome.UNKNOWN, f"the JSON answer was cut: {_described(exc)}")
            return
        verdict = Verdict.INCOMPLETE if more else gate(body)
        if more or verdict is not Verdict.COMPLETE:
            reason = (
                f"the JSON answer exceeds {self._max_json_body} bytes (max_json_body)"
                if more
                else f"the JSON answer is {verdict}, not one complete JSON value"
            )
            await request.fail(Kind.PROTOCOL, Outcome.UNKNOWN, reason)
            return
        try:
            parsed = jsonrpc_message_adapter.validate_json(body, by_name=False)
        except ValueError as exc:
            reason = f"the JSON answer is not a JSON-RPC message the SDK takes: {exc}"
            await request.fail(Kind.PROTOCOL, Outcome.UNKNOWN, reason)
            return
        await request.answer(parsed)

    async def handle_get_stream(self, client: httpx2.AsyncClient, read_stream_writer: StreamWriter) -> None:
        """The standalone `GET` stream, guarded and resumed like a response stream (no deadline:
        it answers no request)."""
        if not self.session_id or self._modern():
            return
        stream = ResumableStream(keep_open=True, **self._stream_options)
        drive = _Drive(self, stream, client, read_stream_writer, None, None)
        try:
            response = await drive.get(None)
        except httpx2.TransportError as exc:
            logger.debug("no GET stream: %s", _described(exc))
            return
        except Exception as exc:
            if (reason := _sign_in_failed(client, exc)) is None:
                raise
            logger.warning("no GET stream: %s", reason)
            return
        if not _is_event_stream(response):
            # 405: the server offers no GET stream; anything else: none is opened either.
            logger.debug("no GET stream: %s", response.status_code)
            await _close(response)
            return
        await drive.run(response)

    async def on_resumption(self, ctx: RequestContext) -> None:
        """A request the application resumes from a token it kept (`resumption_token`): `GET` with
        `Last-Event-ID`, the stream read by the engine like any other, within the deadline. The
        engine did not see the stream the token came from, so the replay's first event is taken as
        the server sends it; every later cut of this stream is guarded as usual."""
        message = ctx.session_message.message
        token = ctx.metadata.resumption_token if ctx.metadata is not None else None
        if not isinstance(message, JSONRPCRequest) or not token:
            raise ValueError("a resumption needs a request and a resumption token")
        request = _Request(ctx.read_stream_writer, message)
        await self._within_deadline(request, lambda: self._resume(ctx, request, token))

    async def _resume(self, ctx: RequestContext, request: _Request, token: str) -> None:
        # The replay answers the request that opened the stream, under that request's id: its
        # first response is this request's answer, and the stream is let go of then.
        stream = ResumableStream(resumable=not self._modern(), keep_open=True, **self._stream_options)
        drive = _Drive(self, stream, ctx.client, ctx.read_stream_writer, request, ctx.metadata)
        drive.adopts_response = True
        try:
            response = await drive.get(token.encode("latin-1"))
        except httpx2.TransportError as exc:
            reason = f"the resumption GET failed: {_described(exc)}"
            await request.fail(Kind.RECONNECT_FAILED, Outcome.UNKNOWN, reason)
            return
        except Exception as exc:
            if (failed := _sign_in_failed(ctx.client, exc)) is None:
                raise
            await request.fail(Kind.AUTH, Outcome.UNKNOWN, f"the resumption GET was not sent: {failed}")
            return
        if not _is_event_stream(response):
            status = response.status_code
            content_type = response.headers.get("content-type", "(none)")
            await _close(response)
            reason = f"the resumption GET was answered {status} ({content_type}), not with the stream"
            await request.fail(Kind.STATUS, Outcome.UNKNOWN, reason, status=status)
            return
        await drive.run(response)


_DONE = object()
_ENDED = object()
# The word of `Deliver.rpc_kind` for a response (a result or an error; `contract.RPC_KINDS`).
_RESPONSE = "response"


class _Drive:
    """Drives one `ResumableStream` over a response and the resumes it asks for."""

    def __init__(
        self,
        transport: _GuardedHTTP,
        stream: ResumableStream,
        client: httpx2.AsyncClient,
        writer: StreamWriter,
        request: _Request | None,
        metadata: ClientMessageMetadata | None,
    ) -> None:
        self.transport = transport
        self.stream = stream
        self.client = client
        self.writer = writer
        self.request = request
        self.metadata = metadata
        self.cursor: bytes | None = None
        self.pending: Reconnect | None = None
        # A resumed request's stream: its first response is the answer, whatever its id.
        self.adopts_response = False

    async def get(self, last_event_id: bytes | None) -> httpx2.Response:
        """`GET` on the session, with `Last-Event-ID` when there is one."""
        headers = self.transport.request_headers()
        headers["accept"] = "text/event-stream"
        headers.pop("content-type", None)
        if last_event_id is not None:
            headers[LAST_EVENT_ID] = last_event_id.decode("latin-1")
        request = self.client.build_request("GET", self.transport.url, headers=headers)
        return await self.client.send(request, stream=True, follow_redirects=False)

    async def run(self, response: httpx2.Response) -> None:
        current: httpx2.Response | None = response
        while current is not None:
            try:
                state = await self.read(current)
            finally:
                await _close(current)
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
                state = await self.consume(receive)
            finally:
                tg.cancel_scope.cancel()
        return state

    async def consume(self, receive: anyio.abc.ObjectReceiveStream[tuple[str, Any]]) -> object:
        """Feeds the engine what the connection's reader hands over, and the engine's deadlines as
        they pass, until the stream is done with (`_DONE`) or the connection is over (`_ENDED`)."""
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
                # A deadline passed: a replay that brought nothing is refused, an idle connection
                # is ended by the engine (and then resumed).
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

    async def drain(self) -> object:
        """Handles what the engine has to say while a connection is open: `_DONE` once the stream
        is done with, `_ENDED` when the engine ended the connection, None to read on."""
        while (out := self.stream.poll()) is not None:
            if await self.handle(out):
                return _DONE
            if isinstance(out, Reconnect):
                self.pending = out
                return _ENDED
            if isinstance(out, Disconnected):
                return _ENDED
        return None

    async def next_connection(self) -> httpx2.Response | None:
        """After a connection ended: the next one to read (a resume), or None when done."""
        while True:
            out: Output | None = self.pending or self.stream.poll()
            self.pending = None
            if out is None:
                deadline = self.stream.poll_timeout()
                if deadline is None:
                    return None
                await anyio.sleep(max(0.0, deadline - time.monotonic()))
                self.stream.handle_timeout(time.monotonic())
                continue
            if isinstance(out, Reconnect):
                try:
                    response = await self.get(out.last_event_id)
                except httpx2.TransportError as exc:
                    logger.debug("a resume failed: %s", _described(exc))
                    self.stream.reconnect_failed(time.monotonic())
                    continue
                except Exception as exc:
                    # Not a failure to retry: the sign-in would be asked for again at each.
                    if (reason := _sign_in_failed(self.client, exc)) is None:
                        raise
                    logger.warning("the response stream was lost: %s", reason)
                    if self.request is not None:
                        await self.request.fail(Kind.AUTH, Outcome.UNKNOWN, f"a resume was not sent: {reason}")
                    return None
                answer = self.stream.reconnect_response(
                    response.status_code,
                    response.headers.get("content-type"),
                    response.headers.get("retry-after"),
                    time.monotonic(),
                )
                if answer == "read":
                    return response
                await _close(response)
                continue
            if await self.handle(out):
                return None

    async def handle(self, out: Output) -> bool:
        """One output of the engine; True when the stream is done with."""
        if isinstance(out, Deliver):
            return await self.deliver(out)
        if isinstance(out, Finished):
            return True
        if isinstance(out, Failed):
            logger.warning("the response stream was lost: %s", out.reason)
            if self.request is not None:
                await self.request.fail(Kind(out.failure), Outcome.UNKNOWN, out.reason, refusal=out.refusal)
            return True
        if isinstance(out, Dropped):
            # An event over a limit while the response is outstanding may have been the response:
            # nothing will come in its place.
            if self.request is not None and out.outstanding:
                reason = f"an event was dropped over a limit ({out.error}): {out.reason}"
                await self.request.fail(Kind.REFUSED, Outcome.UNKNOWN, reason, refusal=out.refusal)
                return True
            logger.warning("an event was dropped: %s", out.reason)
        return False

    async def deliver(self, out: Deliver) -> bool:
        """Hands a message on; True when it answered a resumed request (the stream is done with)."""
        # One copy, into what pydantic parses; the engine has already gated it as one JSON value.
        data = bytes(out.message)
        request = self.request
        # The engine delivers one response per request id: a message with this request's id is
        # its answer (a notification has no id). A resumed request's answer carries the id of the
        # request that opened the stream: the first response is its answer, as the SDK takes it.
        if self.adopts_response:
            answers = request is not None and out.rpc_id is not None and out.rpc_kind == _RESPONSE
        else:
            answers = request is not None and out.rpc_id is not None and out.rpc_id == request.id
        try:
            parsed = jsonrpc_message_adapter.validate_json(data, by_name=False)
        except ValueError as exc:
            logger.warning("a message the SDK does not take: %s", exc)
            if request is not None and answers:
                reason = f"the answer is not a JSON-RPC message the SDK takes: {exc}"
                await request.fail(Kind.PROTOCOL, Outcome.UNKNOWN, reason)
                return self.adopts_response
            await self.writer.send(exc)
            return False
        done = False
        if request is not None and answers and isinstance(parsed, JSONRPCResponse | JSONRPCError):
            # As the SDK does: the answer carries the id the request was sent with.
            parsed.id = request.id
            await request.answer(parsed)
            done = self.adopts_response
        else:
            await self.writer.send(SessionMessage(parsed))
        cursor = self.stream.cursor
        if cursor is not None and cursor != self.cursor and self.metadata is not None:
            self.cursor = cursor
            if self.metadata.on_resumption_token_update is not None:
                await self.metadata.on_resumption_token_update(cursor.decode("latin-1"))
        return done


def _checked_timeout(timeout: float | None) -> float | None:
    if timeout is not None and not (timeout > 0 and not math.isnan(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
    return timeout


class GuardedTransport:
    """An MCP `Transport` for `mcp.Client` (and, through the same streams, `ClientSession`):
    Streamable HTTP through the SDK's `httpx2` client, every answer read by ssegate's engine.

    Args:
        url: The MCP endpoint.
        headers: Headers for every request (ignored when `httpx_client` is given).
        auth: An `httpx2.Auth` (ignored when `httpx_client` is given), e.g. the SDK's
            `mcp.client.auth.OAuthClientProvider`: every request, resumes included, goes through it.
        httpx_client: Your own `httpx2.AsyncClient` (you close it); redirects are never followed.
        terminate_on_close: End the session with `DELETE` on exit.
        timeout: Seconds from a request to its answer, resumes included (600 by default, as the
            Rust client's); when they pass, the connection is dropped and the request answered
            with the contract's timeout error (`OutcomeUnknown` for a `tools/call`, `Unavailable`
            for another method; `data["kind"]` "timeout"). None: no deadline.
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
        timeout: float | None = DEFAULT_CALL_TIMEOUT,
        max_event: int = DEFAULT_MAX_EVENT,
        max_json_body: int = DEFAULT_MAX_JSON_BODY,
        max_error_body: int = DEFAULT_MAX_ERROR_BODY,
        replay_timeout: float = DEFAULT_REPLAY_TIMEOUT,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_delay: float = DEFAULT_MAX_DELAY,
    ) -> None:
        self.url = url
        self._headers = headers
        self._auth = auth
        self._client = httpx_client
        self._terminate = terminate_on_close
        self._transport = _GuardedHTTP(
            url,
            timeout=_checked_timeout(timeout),
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
                client = _sdk.create_mcp_http_client(headers=self._headers, auth=self._auth)
                await stack.enter_async_context(client)
            read_writer, read_stream = _sdk.create_context_streams[SessionMessage | Exception](0)
            write_stream, write_reader = _sdk.create_context_streams[SessionMessage](0)
            async with read_writer, read_stream, write_stream, write_reader, anyio.create_task_group() as tg:

                def start_get_stream() -> None:
                    tg.start_soon(transport.handle_get_stream, client, read_writer)

                tg.start_soon(
                    transport.post_writer, client, write_reader, read_writer, write_stream, start_get_stream, tg
                )
                try:
                    yield read_stream, write_stream
                finally:
                    if transport.session_id and self._terminate:
                        with anyio.move_on_after(5):
                            await transport.terminate_session(client)
                    tg.cancel_scope.cancel()
