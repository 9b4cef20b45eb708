"""The wire contract: what every ssegate surface answers with, defined once in the Rust crate
(`ssegate::contract`) and read here from the compiled core. No value below is written in Python.

- `Code`: the JSON-RPC error codes ssegate answers with, one meaning each; `code_for` picks one.
- `Kind`: the word in an error's `data.kind`; `Outcome`: the word in its `data.outcome`.
- `DATA_*`: the keys of an error's `data`; `TOOLS_CALL`: the one method whose lost answer is an
  unknown outcome.
- `DEFAULT_*`: the default limits (sizes in bytes, counts, durations in seconds), the same on every
  surface: `ssegate.Decoder` and `ssegate.ResumableStream` default to them.
- `*_KINDS`: the stable words of what the engine reports (`Failed.failure`, `Failed.refusal`,
  `Failed.restart`, `Skip.skip`, `Dropped.error` and `DecodeError.kind`, `Deliver.rpc_kind`).

| code | `Code` | `data.kind` |
| --- | --- | --- |
| -32050 | `OUTCOME_UNKNOWN` | any: a `tools/call` whose answer was lost (the tool may have run) |
| -32051 | `UNAVAILABLE` | the server could not be reached, did not take the request, or gave no answer in time |
| -32052 | `SERVER_PROTOCOL` | `protocol`, `invalid-response` |
| -32053 | `REFUSED` | `refused`, `too-many-resumes`, `no-progress` |
"""

from __future__ import annotations

import enum

from . import _ssegate

__all__ = [
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
    "Code",
    "Kind",
    "Outcome",
    "code_for",
]


def _member(words: tuple[str, ...], name: str) -> str:
    """The word of `words` that the enum member `name` stands for (`"not-run"` for `NOT_RUN`): the
    members are named here, their values come from the Rust lists. Fails the import when the Rust
    side has no such word."""
    for word in words:
        if word.upper().replace("-", "_") == name:
            return word
    raise ImportError(f"ssegate.contract: the compiled core has no word for {name} (it has {words})")


_CODES: dict[str, tuple[int, str, str]] = {word: (value, word, message) for value, word, message in _ssegate.CODES}
_CODE_WORDS = tuple(_CODES)


class Code(enum.IntEnum):
    """A JSON-RPC error code ssegate answers with (`int(code)` is the value). `word` is its stable
    name, `message` the error's `message` on every surface (`data.reason` says more)."""

    OUTCOME_UNKNOWN = _CODES[_member(_CODE_WORDS, "OUTCOME_UNKNOWN")][0]
    """-32050: a `tools/call` was sent, its answer was lost and it was not sent again: the tool may
    have run. An application must not re-run it blindly."""
    UNAVAILABLE = _CODES[_member(_CODE_WORDS, "UNAVAILABLE")][0]
    """-32051: the server could not be reached, did not take the request, or gave no answer in
    time."""
    SERVER_PROTOCOL = _CODES[_member(_CODE_WORDS, "SERVER_PROTOCOL")][0]
    """-32052: the server broke the protocol (a torn, invalid or foreign answer)."""
    REFUSED = _CODES[_member(_CODE_WORDS, "REFUSED")][0]
    """-32053: the answer's stream was refused: it could not be resumed as the same stream."""

    @property
    def word(self) -> str:
        """`"outcome-unknown"`, `"unavailable"`, `"server-protocol"` or `"refused"`."""
        return _member(_CODE_WORDS, self.name)

    @property
    def message(self) -> str:
        """The error's `message`."""
        return _CODES[self.word][2]


class Kind(str, enum.Enum):
    """What happened to an answer: the word in an error's `data.kind` (`str(kind)` is the word)."""

    SETUP = _member(_ssegate.KINDS, "SETUP")
    """The client could not be set up (a bad URL, certificate or header)."""
    UNREACHABLE = _member(_ssegate.KINDS, "UNREACHABLE")
    """The connection could not be made; nothing was sent."""
    HTTP = _member(_ssegate.KINDS, "HTTP")
    """The HTTP exchange failed after the request may have been sent."""
    STATUS = _member(_ssegate.KINDS, "STATUS")
    """The server answered with an error status (`data.status`)."""
    REDIRECT = _member(_ssegate.KINDS, "REDIRECT")
    """The server answered with a redirect, which is not followed."""
    TIMEOUT = _member(_ssegate.KINDS, "TIMEOUT")
    """The call's deadline passed."""
    INVALID_RESPONSE = _member(_ssegate.KINDS, "INVALID_RESPONSE")
    """The response head is not valid HTTP."""
    PROTOCOL = _member(_ssegate.KINDS, "PROTOCOL")
    """The answer breaks the protocol."""
    REFUSED = _member(_ssegate.KINDS, "REFUSED")
    """The engine refused the stream (`data.refusal` says why)."""
    TOO_MANY_RESUMES = _member(_ssegate.KINDS, "TOO_MANY_RESUMES")
    """The stream was resumed as often as allowed."""
    NO_PROGRESS = _member(_ssegate.KINDS, "NO_PROGRESS")
    """Resumes in a row brought nothing: the cut repeats."""
    RECONNECT_FAILED = _member(_ssegate.KINDS, "RECONNECT_FAILED")
    """Every attempt at a resume failed."""
    TASK_FAILED = _member(_ssegate.KINDS, "TASK_FAILED")
    """The call ran as a task and the task failed."""
    TASK_CANCELLED = _member(_ssegate.KINDS, "TASK_CANCELLED")
    """The call's task was cancelled."""
    TASKS = _member(_ssegate.KINDS, "TASKS")
    """The call had to run as a task and could not (required, or unsupported)."""
    TASK = _member(_ssegate.KINDS, "TASK")
    """The call's task could not be read to its end."""
    AUTH = _member(_ssegate.KINDS, "AUTH")
    """The client has no token the server accepts; the request was not taken."""

    def __str__(self) -> str:
        return self.value


class Outcome(str, enum.Enum):
    """Whether the server may have acted on a request answered with an error: `data.outcome`."""

    UNKNOWN = _member(_ssegate.OUTCOMES, "UNKNOWN")
    """The request may have been taken and run."""
    NOT_RUN = _member(_ssegate.OUTCOMES, "NOT_RUN")
    """The server did not take the request."""
    FAILED = _member(_ssegate.OUTCOMES, "FAILED")
    """The server answered with a failure."""

    def __str__(self) -> str:
        return self.value


def code_for(method: str, kind: Kind, outcome: Outcome) -> Code:
    """The code of the error answering a `method` request that failed with `kind`, whose outcome is
    `outcome`: `Code.OUTCOME_UNKNOWN` for a `tools/call` whose outcome is unknown, else the kind's
    own code. Raises `ValueError` for a word that is not a `Kind` or an `Outcome`."""
    return Code(_ssegate.code_for(method, Kind(kind).value, Outcome(outcome).value))


TOOLS_CALL: str = _ssegate.TOOLS_CALL
"""A tool call: the one method whose lost answer is an unknown outcome."""

DATA_KIND: str = _ssegate.DATA_KIND
"""`data` key: the `Kind` word."""
DATA_OUTCOME: str = _ssegate.DATA_OUTCOME
"""`data` key: the `Outcome` word."""
DATA_METHOD: str = _ssegate.DATA_METHOD
"""`data` key: the request's method."""
DATA_REASON: str = _ssegate.DATA_REASON
"""`data` key: one line saying what happened."""
DATA_REFUSAL: str = _ssegate.DATA_REFUSAL
"""`data` key: the refusal's word (one of `REFUSAL_KINDS`), when the engine refused the stream."""
DATA_STATUS: str = _ssegate.DATA_STATUS
"""`data` key: the HTTP status, for kind `status`."""

DEFAULT_MAX_EVENT: int = _ssegate.DEFAULT_MAX_EVENT
"""Data bytes of one SSE event (64 MiB)."""
DEFAULT_MAX_LINE: int = _ssegate.DEFAULT_MAX_LINE
"""Bytes of one SSE line, its line end excluded (64 MiB)."""
DEFAULT_MAX_FIELD: int = _ssegate.DEFAULT_MAX_FIELD
"""Bytes of an `id`, `event` or `retry` value (4 KiB)."""
DEFAULT_MAX_BLOCK: int = _ssegate.DEFAULT_MAX_BLOCK
"""Wire bytes of one open SSE block (80 MiB)."""
DEFAULT_MAX_JSON_BODY: int = _ssegate.DEFAULT_MAX_JSON_BODY
"""The largest `application/json` answer a client reads (64 MiB)."""
DEFAULT_MAX_ERROR_BODY: int = _ssegate.DEFAULT_MAX_ERROR_BODY
"""How much of an error answer's body a client reads (1 KiB)."""
DEFAULT_MAX_RESUMES: int = _ssegate.DEFAULT_MAX_RESUMES
"""Most resumes of one stream."""
DEFAULT_MAX_STALLED_RESUMES: int = _ssegate.DEFAULT_MAX_STALLED_RESUMES
"""Most resumes in a row that bring no complete event."""
DEFAULT_MAX_RECONNECT_ATTEMPTS: int = _ssegate.DEFAULT_MAX_RECONNECT_ATTEMPTS
"""Most attempts at one resume."""

DEFAULT_CALL_TIMEOUT: float = _ssegate.DEFAULT_CALL_TIMEOUT
"""A call's deadline in seconds, from its request to its answer, resumes included."""
DEFAULT_CONNECT_TIMEOUT: float = _ssegate.DEFAULT_CONNECT_TIMEOUT
"""How long a connection may take to be made, in seconds."""
DEFAULT_REPLAY_TIMEOUT: float = _ssegate.DEFAULT_REPLAY_TIMEOUT
"""How long a resumed connection may take to bring its first event, in seconds."""
DEFAULT_IDLE_TIMEOUT: float = _ssegate.DEFAULT_IDLE_TIMEOUT
"""How long an open connection may bring nothing before it is resumed, in seconds."""
DEFAULT_MAX_DELAY: float = _ssegate.DEFAULT_MAX_DELAY
"""The longest wait before a resume, whatever the server asks, in seconds."""
DEFAULT_MIN_DELAY: float = _ssegate.DEFAULT_MIN_DELAY
"""The shortest wait before a resume, whatever the server asks, in seconds."""
DEFAULT_RETRY: float = _ssegate.DEFAULT_RETRY
"""The delay before a resume when the server gave no `retry:`, in seconds."""
DEFAULT_BACKOFF: float = _ssegate.DEFAULT_BACKOFF
"""The first wait between failed attempts at one resume (it doubles), in seconds."""

REFUSAL_KINDS: tuple[str, ...] = _ssegate.REFUSAL_KINDS
"""Every `Failed.refusal` word (and `data.refusal`)."""
FAILURE_KINDS: tuple[str, ...] = _ssegate.FAILURE_KINDS
"""Every `Failed.failure` word: each is also a `Kind`."""
RESTART_KINDS: tuple[str, ...] = _ssegate.RESTART_KINDS
"""Every `Failed.restart` word (the evidence of a `stream-restarted` refusal)."""
SKIP_KINDS: tuple[str, ...] = _ssegate.SKIP_KINDS
"""Every `Skip.skip` word."""
DECODE_ERROR_KINDS: tuple[str, ...] = _ssegate.DECODE_ERROR_KINDS
"""Every `Dropped.error` and `DecodeError.kind` word."""
RPC_KINDS: tuple[str, ...] = _ssegate.RPC_KINDS
"""Every `Deliver.rpc_kind` word."""
KINDS: tuple[str, ...] = _ssegate.KINDS
"""Every `Kind` word, in the Rust `Kind::ALL` order."""
OUTCOMES: tuple[str, ...] = _ssegate.OUTCOMES
"""Every `Outcome` word, in the Rust `Outcome::ALL` order."""
