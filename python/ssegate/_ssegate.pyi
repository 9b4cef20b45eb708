"""Stubs of `ssegate._ssegate`, the compiled core (import its names from `ssegate`)."""

from typing import Final, Literal, TypeAlias, final

from typing_extensions import disjoint_base

__all__ = [
    "CODES",
    "DATA_KIND",
    "DATA_METHOD",
    "DATA_OUTCOME",
    "DATA_REASON",
    "DATA_REFUSAL",
    "DATA_STATUS",
    "DECODE_ERROR_KINDS",
    "DEFAULT_BACKOFF",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_BLOCK",
    "DEFAULT_MAX_DELAY",
    "DEFAULT_MAX_ERROR_BODY",
    "DEFAULT_MAX_EVENT",
    "DEFAULT_MAX_FIELD",
    "DEFAULT_MAX_JSON_BODY",
    "DEFAULT_MAX_LINE",
    "DEFAULT_MAX_RECONNECT_ATTEMPTS",
    "DEFAULT_MAX_RESUMES",
    "DEFAULT_MAX_STALLED_RESUMES",
    "DEFAULT_MIN_DELAY",
    "DEFAULT_REPLAY_TIMEOUT",
    "DEFAULT_RETRY",
    "FAILURE_KINDS",
    "KINDS",
    "OUTCOMES",
    "REFUSAL_KINDS",
    "RESTART_KINDS",
    "RPC_KINDS",
    "SKIP_KINDS",
    "TOOLS_CALL",
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
    "__version__",
    "code_for",
    "gate",
]

__version__: Final[str]

_Buffer: TypeAlias = bytes | bytearray | memoryview
_RpcIdOut: TypeAlias = int | str | float | None

# The stable words of what the engine reports, one alias per Rust enum (its `WORDS`; the module
# attributes of the same name below hold them at run time; tests/test_contract.py checks each
# alias against them).
_FailureWord: TypeAlias = Literal["refused", "too-many-resumes", "no-progress", "reconnect-failed"]
_RefusalWord: TypeAlias = Literal[
    "partial-event",
    "incomplete-message",
    "trailing-bytes",
    "invalid-message",
    "stream-restarted",
    "duplicate-response",
    "gap",
    "session-expired",
    "replay-unavailable",
    "busy",
    "replay-missed",
    "unresumable",
    "unexpected-response",
    "decode-limit",
]
_RestartWord: TypeAlias = Literal["id-reused", "backwards", "other-stream", "message-repeated"]
_SkipWord: TypeAlias = Literal["exact-replay", "duplicate-response", "keep-alive", "error-frame"]
_DecodeErrorWord: TypeAlias = Literal["line-too-long", "event-too-large", "field-too-long", "block-too-large"]
_RpcKindWord: TypeAlias = Literal["request", "notification", "response", "batch", "other"]

def gate(data: _Buffer, /, max_depth: int | None = None) -> Literal["complete", "incomplete", "trailing", "invalid"]:
    """The verdict's name (`ssegate.gate` returns it as a `Verdict`); `max_depth` None: the Rust
    gate's default limit."""

# The wire contract (`ssegate::contract`), presented by `ssegate.contract`.

def code_for(method: str, kind: str, outcome: str, /) -> int:
    """`Code::for_answer` for a `Kind` word and an `Outcome` word, as the code's value."""

CODES: Final[tuple[tuple[int, str, str], ...]]
"""(value, word, message) of every code, in the contract table's order."""
KINDS: Final[tuple[str, ...]]
OUTCOMES: Final[tuple[str, ...]]
TOOLS_CALL: Final[str]
DATA_KIND: Final[str]
DATA_OUTCOME: Final[str]
DATA_METHOD: Final[str]
DATA_REASON: Final[str]
DATA_REFUSAL: Final[str]
DATA_STATUS: Final[str]
DEFAULT_MAX_EVENT: Final[int]
DEFAULT_MAX_LINE: Final[int]
DEFAULT_MAX_FIELD: Final[int]
DEFAULT_MAX_BLOCK: Final[int]
DEFAULT_MAX_JSON_BODY: Final[int]
DEFAULT_MAX_ERROR_BODY: Final[int]
DEFAULT_MAX_RESUMES: Final[int]
DEFAULT_MAX_STALLED_RESUMES: Final[int]
DEFAULT_MAX_RECONNECT_ATTEMPTS: Final[int]
DEFAULT_CALL_TIMEOUT: Final[float]
DEFAULT_CONNECT_TIMEOUT: Final[float]
DEFAULT_REPLAY_TIMEOUT: Final[float]
DEFAULT_IDLE_TIMEOUT: Final[float]
DEFAULT_MAX_DELAY: Final[float]
DEFAULT_MIN_DELAY: Final[float]
DEFAULT_RETRY: Final[float]
DEFAULT_BACKOFF: Final[float]
REFUSAL_KINDS: Final[tuple[_RefusalWord, ...]]
FAILURE_KINDS: Final[tuple[_FailureWord, ...]]
RESTART_KINDS: Final[tuple[_RestartWord, ...]]
SKIP_KINDS: Final[tuple[_SkipWord, ...]]
DECODE_ERROR_KINDS: Final[tuple[_DecodeErrorWord, ...]]
RPC_KINDS: Final[tuple[_RpcKindWord, ...]]

class DecodeError(ValueError):
    """An SSE event went over one of the decoder's limits and was dropped: the decoder skipped to
    the next blank line and goes on with the next chunk.

    Raised by `Decoder.feed` after the whole chunk was decoded: `events` holds every event the chunk
    completed (the dropped ones excepted), `errors` every limit error of the chunk in order (this
    one first)."""

    kind: _DecodeErrorWord
    """Which limit."""
    limit: int
    """The limit, in bytes."""
    offset: int
    """Stream offset of the start of the line that crossed it."""
    id: str | None
    """The dropped event's own id, when its `id` line came before the limit was crossed."""
    events: list[Event]
    errors: list[DecodeError]

@final
class Event:
    """One dispatched SSE event."""

    @property
    def data(self) -> memoryview:
        """The `data` lines joined with LF, as a read-only memoryview: of the `bytes` chunk it lies
        in when the decoder kept it as one slice of its input (no copy; `data.obj` is that chunk),
        else of one new `bytes` object (the pieces joined once). `bytes(ev.data)` copies it."""
    @property
    def event(self) -> str | None:
        """The event type (`event` field); None when absent or empty, that is `message`."""
    @property
    def id(self) -> str | None:
        """The last event ID at dispatch (WHATWG `lastEventId`, inherited when the event has no `id`
        field of its own); None when empty. Invalid UTF-8 is replaced, as WHATWG decodes."""
    @property
    def has_own_id(self) -> bool:
        """Whether this event's own block carried an `id` field."""
    @property
    def retry(self) -> int | None:
        """The reconnection time in ms from a valid `retry` field in this event's block."""
    def __len__(self) -> int:
        """Bytes of data."""

@final
class PartialEvent:
    """The block still open when a connection's input ended (never dispatched)."""

    @property
    def bytes(self) -> int:
        """Wire bytes of the open block."""
    @property
    def data_len(self) -> int:
        """Data bytes it had accumulated."""
    @property
    def id(self) -> str | None:
        """Its `id` value, when the `id` line had arrived whole."""

@final
class Decoder:
    """Incremental, zero-copy SSE decoder, exact to the WHATWG rules under any chunking. Every limit
    defaults to the Rust decoder's (`DecoderConfig`): the `DEFAULT_*` of `ssegate.contract`."""

    def __new__(
        cls,
        *,
        max_line: int = 67_108_864,
        max_event: int = 67_108_864,
        max_field: int = 4096,
        max_block: int = 83_886_080,
        copy_below: int | None = None,
    ) -> Decoder:
        """`max_line`: longest line, line end excluded (`DEFAULT_MAX_LINE`); `max_event`: data bytes
        of one event, its `data` values and their LF joins (`DEFAULT_MAX_EVENT`); `max_field`:
        longest `id`, `event` or `retry` value (`DEFAULT_MAX_FIELD`); `max_block`: wire bytes of one
        open block, every line of an event before its blank line (`DEFAULT_MAX_BLOCK`);
        `copy_below`: data pieces shorter than this are copied rather than sliced (None: the Rust
        decoder's default, 256)."""
    def feed(self, data: _Buffer) -> list[Event]:
        """Decodes a chunk and returns the events it completed. `bytes` are shared with the decoder
        (no copy); other buffers are copied once. The GIL is released for chunks of 64 KiB or more.
        Raises `DecodeError` when an event went over a limit (see there: the chunk's other events
        are on the exception, and the decoder goes on)."""
    def finish(self) -> list[Event]:
        """Ends the connection's input. Returns the events still to dispatch, which is always none:
        `feed` returns every event it completes, and a block without its blank line is discarded
        (WHATWG), reported in `discarded`. `last_event_id` and `retry` carry over to the next
        connection, which this decoder can read."""
    @property
    def discarded(self) -> PartialEvent | None:
        """The block the last `finish()` discarded, if the input ended inside one."""
    @property
    def last_event_id(self) -> str | None:
        """The committed last event ID (None when empty)."""
    @property
    def retry(self) -> int | None:
        """The reconnection time (ms) from the last valid `retry` field."""
    @property
    def offset(self) -> int:
        """Bytes of this connection's input decoded so far."""

@disjoint_base
class Output:
    """What `ResumableStream.poll()` hands back; `kind` names the subclass."""

    @property
    def kind(
        self,
    ) -> Literal["deliver", "skip", "cursor", "dropped", "disconnected", "reconnect", "finished", "failed"]: ...

@final
class Deliver(Output):
    """A complete, new message: exactly one JSON value. Hand it to the application."""

    @property
    def kind(self) -> Literal["deliver"]: ...
    @property
    def message(self) -> memoryview:
        """The JSON-RPC message, a read-only memoryview: of the input `bytes` chunk when the message
        is one slice of it (no copy), else of one new `bytes` (joined once). `bytes(out.message)`
        copies it."""
    @property
    def rpc_kind(self) -> _RpcKindWord:
        """What its top-level keys say it is."""
    @property
    def rpc_id(self) -> _RpcIdOut:
        """Its top-level `id`: int or str; None when absent or `null` (an id that is neither, such
        as a fraction, comes as the number its JSON text is)."""
    @property
    def event_id(self) -> bytes | None:
        """The event's own id (raw bytes), if it had one."""
    @property
    def event_type(self) -> str | None:
        """The event type; None for the default `message`."""
    def __len__(self) -> int:
        """Bytes of the message."""

@final
class Skip(Output):
    """An event that carries nothing new."""

    @property
    def kind(self) -> Literal["skip"]: ...
    @property
    def skip(self) -> _SkipWord: ...
    @property
    def reason(self) -> str:
        """Why, in a few words."""

@final
class Cursor(Output):
    """A priming event (empty data, its own id): the cursor moved."""

    @property
    def kind(self) -> Literal["cursor"]: ...
    @property
    def cursor(self) -> bytes: ...

@final
class Dropped(Output):
    """The decoder dropped an event over one of its limits and the stream goes on; the message it
    carried is lost (end a call in `outstanding` that needed it)."""

    @property
    def kind(self) -> Literal["dropped"]: ...
    @property
    def reason(self) -> str:
        """The decoder's error, in words."""
    @property
    def error(self) -> _DecodeErrorWord:
        """Which limit."""
    @property
    def refusal(self) -> _RefusalWord:
        """The refusal a driver ends a call with when the dropped event may have been its answer
        (`"decode-limit"`)."""
    @property
    def event_id(self) -> bytes | None:
        """The dropped event's own id, when its `id` line came before the limit."""
    @property
    def cursor(self) -> bytes | None:
        """The cursor after the drop."""
    @property
    def outstanding(self) -> list[_RpcIdOut]:
        """Requests this stream still had to deliver."""

@final
class Disconnected(Output):
    """The connection is over for the stream: drop it. A `reconnect` follows after `delay`."""

    @property
    def kind(self) -> Literal["disconnected"]: ...
    @property
    def delay(self) -> float:
        """Seconds until the reconnect (wait with `poll_timeout()`/`handle_timeout()`)."""
    @property
    def last_event_id(self) -> bytes | None:
        """The `Last-Event-ID` the reconnect will send (None: no id was received)."""
    @property
    def needed(self) -> bool:
        """Whether a response this stream must deliver is still outstanding."""
    @property
    def discarded(self) -> PartialEvent | None:
        """The partial event discarded at the cut."""

@final
class Reconnect(Output):
    """Send `GET` with `Accept: text/event-stream` and `Last-Event-ID` now, then report the answer
    with `reconnect_response()` (or `reconnect_failed()`)."""

    @property
    def kind(self) -> Literal["reconnect"]: ...
    @property
    def last_event_id(self) -> bytes | None:
        """The header's exact bytes (None: send no `Last-Event-ID`)."""
    @property
    def attempt(self) -> int:
        """Which attempt at this resume (1 for the first)."""

@final
class Failed(Output):
    """The stream stopped for good."""

    @property
    def kind(self) -> Literal["failed"]: ...
    @property
    def failure(self) -> _FailureWord:
        """Why the stream stopped: also the `Kind` word an error answer reports."""
    @property
    def reason(self) -> str:
        """What happened, in words."""
    @property
    def refusal(self) -> _RefusalWord | None:
        """The refusal's kind, when a refusal stopped the stream (for `reconnect-failed`, the
        server's last answer when it answered)."""
    @property
    def restart(self) -> _RestartWord | None:
        """The evidence of a `stream-restarted` refusal."""
    @property
    def outstanding(self) -> list[_RpcIdOut]:
        """Requests still unanswered."""
    @property
    def must_renegotiate(self) -> bool:
        """Whether a new session is needed to get the outstanding responses."""
    @property
    def cursor(self) -> bytes | None:
        """The cursor at the refusal."""

@final
class Finished(Output):
    """The stream ended with nothing outstanding."""

    @property
    def kind(self) -> Literal["finished"]: ...

_AnyOutput: TypeAlias = Deliver | Skip | Cursor | Dropped | Disconnected | Reconnect | Failed | Finished

@final
class ResumableStream:
    """The sans-IO engine for one MCP Streamable HTTP stream (a POST's response and its
    resumptions, or the standalone GET stream). Every `now` and every deadline is
    `time.monotonic()` seconds. Every setting defaults to the Rust `StreamConfig`'s: the limits to
    the `DEFAULT_*` of `ssegate.contract`, and a setting given as None (`copy_below`, `gate_ahead`,
    `window`, `unrequested_window`, `max_depth`) to the Rust config's own default."""

    def __new__(
        cls,
        *,
        resumable: bool = True,
        keep_open: bool = False,
        max_event: int = 67_108_864,
        max_line: int = 67_108_864,
        max_field: int = 4096,
        max_block: int = 83_886_080,
        copy_below: int | None = None,
        replay_timeout: float = 10.0,
        idle_timeout: float | None = 300.0,
        default_retry: float = 1.0,
        max_delay: float = 60.0,
        min_delay: float = 0.25,
        backoff: float = 0.25,
        max_resumes: int = 32,
        max_stalled_resumes: int = 4,
        max_reconnect_attempts: int = 6,
        jitter_seed: int | None = None,
        gate_ahead: int | None = None,
        policy: Literal["verified", "strict"] = "verified",
        window: int | None = None,
        unrequested_window: int | None = None,
        contiguous_ids: bool = False,
        max_depth: int | None = None,
        max_isa: Literal["portable", "neon", "avx2", "avx512"] | None = None,
    ) -> ResumableStream: ...
    def expect_response(self, id: int | str) -> None:
        """Registers a request whose response this stream must deliver."""
    def feed(self, data: _Buffer, now: float) -> None:
        """A body chunk arrived. Ignored unless a connection is open. A chunk of 64 KiB or more is
        scanned, up to its first output, with the GIL released (the state properties may then show
        that output's effect before `poll()` returns it)."""
    def connection_ended(self, cause: Literal["eof", "error"], now: float) -> None:
        """The open connection's body ended."""
    def poll(self) -> _AnyOutput | None:
        """The next output, or None until more input or time."""
    def poll_timeout(self) -> float | None:
        """When `handle_timeout()` is next needed (`time.monotonic()` seconds), if ever."""
    def handle_timeout(self, now: float) -> None:
        """Time passed: `now` is at or after `poll_timeout()` (earlier calls do nothing)."""
    def reconnect_response(
        self,
        status: int,
        content_type: str | bytes | None,
        retry_after: str | bytes | None,
        now: float,
    ) -> Literal["read", "drop"]:
        """The reconnect was answered: its status and raw `Content-Type` and `Retry-After` headers
        (delta-seconds or an HTTP-date). `"read"`: feed its body; `"drop"`: close it and poll."""
    def reconnect_failed(self, now: float) -> None:
        """The reconnect failed before a response head (retried with backoff, a bounded number of
        times)."""
    @property
    def cursor(self) -> bytes | None:
        """The id of the last event processed (the `Last-Event-ID` of a resume)."""
    @property
    def is_done(self) -> bool: ...
    @property
    def is_open(self) -> bool: ...
    @property
    def outstanding(self) -> list[_RpcIdOut]:
        """Requests this stream must still deliver."""
    @property
    def resumes(self) -> int: ...
    @property
    def stats(self) -> dict[str, int]:
        """`events`, `delivered`, `delivered_bytes`, `skipped`, `discarded_partials`,
        `discarded_bytes`, `resumes`."""
    @property
    def server_retry(self) -> float | None:
        """The delay (s) the server last asked for (`retry:` or `Retry-After`), before clamps."""
    @property
    def gate_isa(self) -> Literal["portable", "neon", "avx2", "avx512"]: ...
