"""An MCP server on the official Python SDK (PyPI `mcp`), for ssegate's interop tests.

    python server.py [--port N] [--host H] [--forgetful] [--stateless] [--shared-store] [--json-response]

Port: --port, else $PORT, else 0 (any free port). Once listening it prints one line
`listening http://HOST:PORT/mcp` on stdout, so a harness started with port 0 learns the port.

Streamable HTTP at /mcp with sessions and the in-memory EventStore below (resumable: `GET` +
`Last-Event-ID` replays strictly after the id), one store per session. `--forgetful`: the store
forgets everything (a lost buffer: `replay_events_after` finds nothing). `--stateless`:
`stateless_http=True` (no `Mcp-Session-Id`, no event store). `--shared-store`: one store for every
session, as `streamable_http_app(event_store=...)` does (see below: sessions then share streams).

Why one store per session: the SDK hands the one `event_store` to every session's transport and
names a request's stream by the JSON-RPC request id alone (`str(id)`; `_GET_stream` for the GET
stream), and `store_event` is not told the session. A store keyed by stream id, as the interface
invites, puts two sessions' requests with the same id (every client's first call is usually id 1)
in one stream, and a resume replays the other session's response. So this server gives each new
session's transport its own store, through the session manager's admission hook (a private method
of the pinned SDK version).

MCP 2026-07-28 (stateless, per-request `_meta` envelope, `server/discover`) is served by the SDK
itself, in every mode above, with no flag: the session manager routes any POST whose
`MCP-Protocol-Version` header is not one of the handshake versions (2024-11-05 .. 2025-11-25) to its
single-exchange entry (`mcp.server._streamable_http_modern`), which never creates a session, never
sets `Mcp-Session-Id` and never touches the event store (so `--forgetful`, `--stateless` and
`--shared-store` change nothing there). It answers JSON unless the handler sends a notification
(e.g. `progress` with a progressToken) or stays silent for 15 s, then SSE (`event: message`, CRLF,
no `id:`, no `retry:`, `: ping` every 15 s); GET/DELETE with a 2026-07-28 header get `405`.
`--json-response`: the SDK's `json_response=True`, for both eras: never SSE (on 2026-07-28,
notifications are dropped; on 2025-era sessions, plain JSON responses, nothing to resume).

Tools:
    big_result(size=4 MiB)        one text content of `size` bytes, readOnlyHint
    progress(count=5, delay_ms=0) `count` progress notifications, then a small result
    echo(text)                    the text back
    charge(size=0)                NOT idempotent: counts its executions; a receipt of `size` bytes
    count()                       how many times `charge` ran in this process

The content of big_result (and of charge's receipt) is deterministic: 16-byte blocks, each the
block's byte offset as 15 lowercase hex digits and a `|`, truncated to `size`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import uuid
from dataclasses import dataclass, field

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
import mcp_types as types
from mcp_types import JSONRPCMessage, ToolAnnotations


def pattern(size: int) -> str:
    """`size` bytes of 16-byte blocks `<offset as %015x>|`."""
    blocks = (size + 15) // 16
    return "".join(f"{i * 16:015x}|" for i in range(blocks))[:size]


@dataclass
class _Stream:
    events: list[tuple[EventId, JSONRPCMessage | None]] = field(default_factory=list)


class InMemoryEventStore(EventStore):
    """A correct in-memory EventStore.

    Event ids are uuid4 strings (opaque to a client, as in the SDK's examples). Each stream keeps
    its events in the order they were stored; a replay sends the stream's events strictly after
    the given id, in that order (priming events, stored as `None`, are not re-sent). An unknown id
    replays nothing. `forgetful`: stores nothing (a lost buffer).
    """

    def __init__(self, forgetful: bool = False) -> None:
        self.forgetful = forgetful
        self.streams: dict[StreamId, _Stream] = {}
        self.index: dict[EventId, tuple[StreamId, int]] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(uuid.uuid4())
        if self.forgetful:
            return event_id
        stream = self.streams.setdefault(stream_id, _Stream())
        self.index[event_id] = (stream_id, len(stream.events))
        stream.events.append((event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = self.index.get(last_event_id)
        if found is None:
            return None
        stream_id, position = found
        for event_id, message in self.streams[stream_id].events[position + 1 :]:
            if message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


charges = 0


def build_server() -> MCPServer:
    mcp = MCPServer("ssegate-interop-py", version="0.0.0")

    @mcp.tool(
        description="One text content of `size` deterministic bytes (default 4 MiB)",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def big_result(size: int = 4 << 20) -> str:
        return pattern(max(0, min(size, 256 << 20)))

    @mcp.tool(
        description="Sends `count` progress notifications, then a small result",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def progress(ctx: Context, count: int = 5, delay_ms: int = 0) -> str:
        for i in range(1, count + 1):
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await ctx.report_progress(i, count, f"step {i}")
        return f"done {count}"

    @mcp.tool(
        description="The text back",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def echo(text: str) -> str:
        return text

    @mcp.tool(
        description="Not idempotent: counts its executions; a receipt of `size` bytes",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False),
        structured_output=False,
    )
    async def charge(size: int = 0) -> list[str]:
        global charges
        charges += 1
        content = [f"charged {charges}"]
        if size:
            content.append(pattern(max(0, min(size, 256 << 20))))
        return content

    @mcp.tool(
        description=(
            "Asks the client sampling/createMessage with `question` on this call's stream; with `ping`, "
            "first a ping unrelated to the call (the SDK sends it on the standalone GET stream)"
        ),
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def ask(ctx: Context, question: str = "?", ping: bool = False) -> str:
        if ping:
            await ctx.session.send_ping()
        result = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
            max_tokens=16,
            related_request_id=ctx.request_id,
        )
        return f"client said: {getattr(result.content, 'text', result.content)}"

    @mcp.tool(
        description="How many times `charge` ran in this process",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def count() -> str:
        return str(charges)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "0")))
    parser.add_argument("--forgetful", action="store_true", help="an event store that forgets everything")
    parser.add_argument("--stateless", action="store_true", help="stateless_http=True (no sessions)")
    parser.add_argument("--shared-store", action="store_true", help="one event store for every session (unsafe)")
    parser.add_argument("--json-response", action="store_true", help="json_response=True (never SSE, both eras)")
    args = parser.parse_args()

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    mcp = build_server()
    app = mcp.streamable_http_app(
        json_response=args.json_response,
        stateless_http=args.stateless,
        event_store=None if args.stateless else InMemoryEventStore(forgetful=args.forgetful),
        host=args.host,
    )
    if not args.stateless and not args.shared_store:
        manager = mcp.session_manager
        admit = manager._admit_session

        def admit_with_own_store(requestor):  # type: ignore[no-untyped-def]
            transport = admit(requestor)
            if transport is not None:
                transport._event_store = InMemoryEventStore(forgetful=args.forgetful)
            return transport

        manager._admit_session = admit_with_own_store
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # before saying so: a client may connect as soon as it reads the line
    host, port = sock.getsockname()[:2]
    print(f"listening http://{host}:{port}/mcp", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    sys.exit(main())
