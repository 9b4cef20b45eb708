"""An MCP server on FastMCP (PyPI `fastmcp`, on the official `mcp` SDK), for ssegate's interop tests.

    python server.py [--port N] [--host H] [--retry-interval MS] [--json-response] [--stateless]

Port: --port, else $PORT, else 0 (any free port). Once listening it prints one line
`listening http://HOST:PORT/mcp` on stdout, so a harness started with port 0 learns the port.

Streamable HTTP at /mcp as a FastMCP user sets it up: `FastMCP(...)`, `@mcp.tool`, and
`mcp.http_app(event_store=EventStore())` with FastMCP's own `fastmcp.server.event_store.EventStore`
(an in-memory key-value store: uuid4 event ids, at most 100 events per stream, one hour ttl).
FastMCP's session manager wraps that one store for every session in a `SessionScopedEventStore`,
so each session's streams are its own. `GET` + `Last-Event-ID` replays strictly after the id,
then (as the `mcp` SDK does) sends a new priming event and the stream's live events.

`--retry-interval MS`: the priming events carry `retry: MS` (FastMCP's `retry_interval`).
`--json-response`: `json_response=True` (never SSE). `--stateless`: `stateless_http=True` (no
session, no event store).

Tools (the same names, arguments, annotations and content as interop/py/server.py):
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

import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.server.event_store import EventStore
from mcp_types import TextContent, ToolAnnotations


def pattern(size: int) -> str:
    """`size` bytes of 16-byte blocks `<offset as %015x>|`."""
    blocks = (size + 15) // 16
    return "".join(f"{i * 16:015x}|" for i in range(blocks))[:size]


charges = 0


def build_server() -> FastMCP:
    mcp = FastMCP("ssegate-interop-fastmcp", version="0.0.0")
    read_only = ToolAnnotations(read_only_hint=True)

    @mcp.tool(
        description="One text content of `size` deterministic bytes (default 4 MiB)",
        annotations=read_only,
        output_schema=None,
    )
    def big_result(size: int = 4 << 20) -> str:
        return pattern(max(0, min(size, 256 << 20)))

    @mcp.tool(
        description="Sends `count` progress notifications, then a small result",
        annotations=read_only,
        output_schema=None,
    )
    async def progress(ctx: Context, count: int = 5, delay_ms: int = 0) -> str:
        for i in range(1, count + 1):
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await ctx.report_progress(i, count, f"step {i}")
        return f"done {count}"

    @mcp.tool(description="The text back", annotations=read_only, output_schema=None)
    async def echo(text: str) -> str:
        return text

    @mcp.tool(
        description="Not idempotent: counts its executions; a receipt of `size` bytes",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False),
        output_schema=None,
    )
    async def charge(size: int = 0) -> list[TextContent]:
        global charges
        charges += 1
        content = [TextContent(type="text", text=f"charged {charges}")]
        if size:
            content.append(TextContent(type="text", text=pattern(max(0, min(size, 256 << 20)))))
        return content

    @mcp.tool(description="How many times `charge` ran in this process", annotations=read_only, output_schema=None)
    async def count() -> str:
        return str(charges)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "0")))
    parser.add_argument("--retry-interval", type=int, default=None, help="retry: on priming events (ms)")
    parser.add_argument("--json-response", action="store_true", help="json_response=True (never SSE)")
    parser.add_argument("--stateless", action="store_true", help="stateless_http=True (no sessions)")
    args = parser.parse_args()

    logging.basicConfig(level=logging.WARNING)
    mcp = build_server()
    app = mcp.http_app(
        path="/mcp",
        json_response=args.json_response,
        stateless_http=args.stateless,
        event_store=None if args.stateless else EventStore(),
        retry_interval=args.retry_interval,
    )
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
