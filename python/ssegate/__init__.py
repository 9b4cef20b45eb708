"""ssegate: zero-copy SSE decoding, a JSON completeness gate and a resumption guard for MCP
Streamable HTTP clients, compiled from the Rust crate of the same name.

- `gate(data)`: is this exactly one complete JSON value? A `Verdict`.
- `Decoder`: the incremental WHATWG SSE decoder; `feed(chunk)` returns the `Event`s it completed.
- `ResumableStream`: the sans-IO engine for one MCP response stream and its resumptions (decoder,
  gate and resumption guard): feed it what your HTTP stack saw, `poll()` what to do next.

Data crosses without copies where Python allows it: a chunk given as `bytes` is shared with the
engine, and event data or a message that is one slice of such a chunk comes back as a read-only
`memoryview` of that very `bytes` object (`bytes(view)` copies it when you need `bytes`). Other
buffers (`bytearray`, `memoryview`, ...) are copied once on the way in, since they may change. The
GIL is released while the engine scans an input of 64 KiB or more.

`ssegate.contract` is the wire contract every ssegate surface shares, read from the Rust crate: the
JSON-RPC error codes (`Code`), the `data.kind` and `data.outcome` words (`Kind`, `Outcome`), the
default limits (`DEFAULT_*`) and the stable words of the engine's outputs (`*_KINDS`).

`ssegate.mcp.GuardedTransport` (needs the `mcp` SDK: `pip install ssegate[mcp]`) puts the engine
under the official MCP Python SDK; see docs/PYTHON.md.
"""

from __future__ import annotations

import enum

from . import _ssegate, contract
from ._ssegate import (
    Cursor,
    DecodeError,
    Decoder,
    Deliver,
    Disconnected,
    Dropped,
    Event,
    Failed,
    Finished,
    Output,
    PartialEvent,
    Reconnect,
    ResumableStream,
    Skip,
)

__version__: str = _ssegate.__version__

__all__ = [
    "Cursor",
    "DecodeError",
    "Decoder",
    "Deliver",
    "Disconnected",
    "Dropped",
    "Event",
    "Failed",
    "Finished",
    "Output",
    "PartialEvent",
    "Reconnect",
    "ResumableStream",
    "Skip",
    "Verdict",
    "__version__",
    "contract",
    "gate",
]


class Verdict(enum.Enum):
    """What a JSON text is, if the input ended here. `str()` gives the lower-case word."""

    COMPLETE = "complete"
    """Exactly one JSON value, with optional whitespace around it."""
    INCOMPLETE = "incomplete"
    """A proper prefix of some JSON text (this includes empty and whitespace-only input)."""
    TRAILING = "trailing"
    """One complete JSON value followed by more than whitespace: the signature of a resumed stream
    appended onto a partial event."""
    INVALID = "invalid"
    """Neither a JSON text nor a prefix of one (RFC 8259, UTF-8 only)."""

    def __str__(self) -> str:
        return self.value


_VERDICTS = {v.value: v for v in Verdict}
_gate = _ssegate.gate


def gate(data: bytes | bytearray | memoryview, *, max_depth: int | None = None) -> Verdict:
    """The JSON completeness verdict on `data`: `Verdict.COMPLETE` when it is exactly one JSON value
    (RFC 8259, UTF-8), `INCOMPLETE` for a proper prefix of one, `TRAILING` for one value followed by
    more, `INVALID` otherwise. Nesting deeper than `max_depth` (None: the Rust gate's default, 1024
    levels) is `INVALID`.

    A `bytes` object is scanned in place; any other buffer is copied first (a `bytearray` could be
    changed by another thread while the scan runs without the GIL). The GIL is released for inputs
    of 64 KiB or more.
    """
    return _VERDICTS[_gate(data, max_depth)]
