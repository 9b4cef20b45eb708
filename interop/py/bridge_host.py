"""A stdio MCP host on the official Python SDK (`mcp.client.stdio.stdio_client` + `ClientSession`),
for ssegate's interop tests of `ssegate bridge` (cli/tests/cli_bridge_interop.rs).

    interop/py/.venv/bin/python bridge_host.py SSEGATE URL [SIZE] [--discover]

Spawns `SSEGATE bridge URL` as its stdio server (the bridge's stderr is passed through), then:
`initialize` (the SDK's handshake, at its latest handshake version; with `--discover`,
`server/discover` instead: the SDK as a 2026-07-28 host), `tools/list`, `tools/call big_result
{size: SIZE}` (default 4 MiB), `tools/call progress {count: 3, delay_ms: 150}` with a
`progress_callback` (the SDK sends a progressToken), and leaves the `stdio_client` context (stdin
closed; the SDK waits 2 s before SIGTERM). Prints one line of JSON on stdout:
    {"sdk", "protocolVersion", "serverName", "tools", "toolNames", "size", "textLength", "intact",
     "firstDiff", "head", "tail", "isError", "progress", "progressWire", "progressText", "closeMs"}
`intact`: the text equals the interop pattern (16-byte blocks, each its byte offset as 15 hex
digits and `|`, truncated to SIZE); `firstDiff`: the first differing offset, or null;
`progress`: what the callback saw; `progressWire`: the progress notifications the session
received (its message handler). Exits 1 (a traceback on stderr) when anything fails, or after
60 s in all.
"""

import json
import sys
import time

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation


def pattern(size: int) -> str:
    """The interop servers' content: `size` bytes of 16-byte blocks `<offset as %015x>|`."""
    return "".join(f"{offset:015x}|" for offset in range(0, size + 15, 16))[:size]


def first_diff(a: str, b: str) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


async def run(ssegate: str, url: str, size: int, discover: bool) -> dict:
    params = StdioServerParameters(command=ssegate, args=["bridge", url])
    progress: list[float] = []
    wire: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_message(message) -> None:  # type: ignore[no-untyped-def]
        if isinstance(message, Exception):
            raise message
        if getattr(message, "method", None) == "notifications/progress":
            wire.append(message.params.progress)

    closing = 0.0
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=30,
            message_handler=on_message,
            client_info=Implementation(name="ssegate-bridge-host-py", version="0.0.0"),
        ) as session:
            if discover:
                await session.discover()
            else:
                await session.initialize()
            listed = await session.list_tools()
            tool_names = sorted(t.name for t in listed.tools)
            result = await session.call_tool("big_result", {"size": size})
            text = result.content[0].text if result.content else ""
            done = await session.call_tool(
                "progress", {"count": 3, "delay_ms": 150}, progress_callback=on_progress
            )
            server_info = session.server_info
            summary = {
                "sdk": "py",
                "protocolVersion": session.protocol_version,
                "serverName": server_info.name if server_info else None,
                "tools": len(tool_names),
                "toolNames": tool_names,
                "size": size,
                "textLength": len(text),
                "intact": text == pattern(size),
                "firstDiff": first_diff(text, pattern(size)),
                "head": text[:32],
                "tail": text[-32:],
                "isError": bool(result.is_error),
                "progress": progress,
                "progressWire": wire,
                "progressText": done.content[0].text if done.content else None,
            }
        closing = time.monotonic()
    summary["closeMs"] = round((time.monotonic() - closing) * 1000)
    return summary


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--discover"]
    if len(args) not in (2, 3):
        print("usage: bridge_host.py SSEGATE URL [SIZE] [--discover]", file=sys.stderr)
        sys.exit(2)
    size = int(args[2]) if len(args) == 3 else 4 << 20

    async def bounded() -> dict:
        with anyio.fail_after(60):
            return await run(args[0], args[1], size, "--discover" in sys.argv[1:])

    print(json.dumps(anyio.run(bounded)), flush=True)


if __name__ == "__main__":
    main()
