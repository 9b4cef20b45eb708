"""Run as a child process by test_transport.py: `python _peak.py URL SIZE CALLS guarded|sdk` makes
CALLS `big_result` calls of SIZE bytes through `GuardedTransport` (or the SDK's own transport,
its event cap off), then prints the process's peak resident memory (`ru_maxrss`, KiB) before and
after, and the result's length, as JSON."""

from __future__ import annotations

import json
import resource
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ssegate.mcp import GuardedTransport


async def main(url: str, size: int, calls: int, transport: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    length = 0
    # "sdk": the SDK's own transport with its event cap off, what the SDK itself holds for a result.
    server = streamable_http_client(url, max_sse_event_size=None) if transport == "sdk" else GuardedTransport(url)
    async with Client(server) as client:
        for _ in range(calls):
            result = await client.call_tool("big_result", {"size": size, "seed": 1})
            length = len(result.content[0].text)
            del result
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "peak_kib": after, "text": length}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
