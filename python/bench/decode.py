"""Decoding speed: `ssegate.Decoder` (and the whole engine, `ssegate.ResumableStream`) against the SSE
parser the official MCP Python SDK reads its streams with, and against `httpx-sse`.

    python python/bench/decode.py [--runs N] [--chunk BYTES]

Two workloads, each fed in chunks of 64 KiB (what an HTTP stack hands over):

- `4 MiB event`: one `tools/call` result of 4 MiB in one event (the SDK's own transport refuses it
  by default, `max_sse_event_size` = 1 MiB; it is measured here with the limit off, as
  `max_sse_event_size=None` reads it);
- `100k events`: 100 000 small progress notifications (about 9 MB).

What each contender does per run is what its user gets: the SDK's path (`mcp` 2.3.0:
`mcp.client.streamable_http` reads a response with `httpx2.EventSource(response,
max_event_size=...)`, iterating `response.iter_text()` through httpx2's `_SSEParser`) yields
`ServerSentEvent`s with `str` data; `httpx-sse`'s `EventSource.iter_sse()` likewise; ssegate's
`Decoder.feed` yields `Event`s whose `data` is touched once (`ev.data`, a memoryview); the engine
(`ResumableStream`) also gates every message as one JSON value and checks the guard's rules, and
yields `Deliver`s whose `message` is touched once. Printed: the median of N runs in ms, and each
contender's time over ssegate.Decoder's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import ssegate

try:
    import httpx2
    from httpx2 import EventSource as SdkEventSource  # what mcp.client.streamable_http uses
except ImportError:  # pragma: no cover - the SDK is optional here
    httpx2 = None  # type: ignore[assignment]

try:
    import httpx
    import httpx_sse
except ImportError:  # pragma: no cover
    httpx = None  # type: ignore[assignment]
    httpx_sse = None  # type: ignore[assignment]


def big_event() -> bytes:
    text = ("ssegate " * ((4 << 20) // 8))[: 4 << 20]
    body = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + text + '"}],"isError":false}}'
    return b"id: 1\nevent: message\ndata: " + body.encode() + b"\n\n"


def small_events(n: int = 100_000) -> bytes:
    out = []
    for i in range(n):
        out.append(
            f'id: {i}\ndata: {{"jsonrpc":"2.0","method":"notifications/progress",'
            f'"params":{{"progressToken":1,"progress":{i}}}}}\n\n'
        )
    return "".join(out).encode()


def chunks_of(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def run_ssegate(chunks: list[bytes]) -> int:
    decoder = ssegate.Decoder()
    n = 0
    for chunk in chunks:
        for ev in decoder.feed(chunk):
            ev.data  # noqa: B018 - the data, as a user reads it
            n += 1
    decoder.finish()
    return n


def run_engine(chunks: list[bytes]) -> int:
    stream = ssegate.ResumableStream()
    now = time.monotonic()
    n = 0
    for chunk in chunks:
        stream.feed(chunk, now)
        while (out := stream.poll()) is not None:
            if out.kind == "deliver":
                out.message  # noqa: B018
                n += 1
    stream.connection_ended("eof", now)
    while stream.poll() is not None:
        pass
    return n


def _response_sdk(chunks: list[bytes]) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=iter(chunks),
        request=httpx2.Request("POST", "http://127.0.0.1/mcp"),
    )


def run_sdk(chunks: list[bytes]) -> int:
    # The SDK's path with its event cap off (max_sse_event_size=None); every event it yields is a
    # ServerSentEvent with str data.
    n = 0
    for sse in SdkEventSource(_response_sdk(chunks), max_event_size=None):
        sse.data  # noqa: B018
        n += 1
    return n


def run_httpx_sse(chunks: list[bytes]) -> int:
    response = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=iter(chunks),
        request=httpx.Request("POST", "http://127.0.0.1/mcp"),
    )
    n = 0
    for sse in httpx_sse.EventSource(response).iter_sse():
        sse.data  # noqa: B018
        n += 1
    return n


def median_ms(fn: Callable[[list[bytes]], int], chunks: list[bytes], runs: int, expect: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        got = fn(chunks)
        times.append((time.perf_counter() - t0) * 1e3)
        if got != expect:
            raise SystemExit(f"{fn.__name__}: {got} events, expected {expect}")
    return statistics.median(times)


def contenders() -> Iterator[tuple[str, Callable[[list[bytes]], int]]]:
    yield "ssegate.Decoder", run_ssegate
    yield "ssegate.ResumableStream", run_engine
    if httpx2 is not None:
        yield "mcp 2.3 SDK (httpx2.EventSource)", run_sdk
    if httpx_sse is not None:
        yield f"httpx-sse {httpx_sse.__version__ if hasattr(httpx_sse, '__version__') else ''}".strip(), run_httpx_sse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs per contender (the median is shown)")
    parser.add_argument("--chunk", type=int, default=64 << 10, help="chunk size in bytes")
    args = parser.parse_args()

    workloads = [
        ("4 MiB event", chunks_of(big_event(), args.chunk), 1),
        ("100k events", chunks_of(small_events(), args.chunk), 100_000),
    ]
    python = sys.version.split()[0]
    print(f"ssegate {ssegate.__version__}, Python {python}, {args.chunk}-byte chunks, median of {args.runs}")
    header = f"{'workload':<13} {'contender':<34} {'ms/run':>10} {'vs Decoder':>11}"
    print(header)
    print("-" * len(header))
    for name, chunks, expect in workloads:
        base = None
        for label, fn in contenders():
            ms = median_ms(fn, chunks, args.runs, expect)
            base = base or ms
            print(f"{name:<13} {label:<34} {ms:>10.2f} {ms / base:>10.1f}x")


if __name__ == "__main__":
    main()
