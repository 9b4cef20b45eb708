"""The Rust crate's own test vectors, read from the repository at test time (never copied here):

- `tests/sse_conformance/*.case`: WHATWG conformance cases for the SSE decoder (format in
  `tests/sse_conformance/README.txt`, parsed here as `tests/sse_conformance.rs` parses it);
- `tests/data/json-test-suite-prefixes.jsonl`: JSON completeness verdicts derived from
  JSONTestSuite (`tests/data/README.md`).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SSE_CASES = REPO / "tests" / "sse_conformance"
JSON_VECTORS = REPO / "tests" / "data" / "json-test-suite-prefixes.jsonl"


@dataclass
class SseCase:
    name: str
    input: bytes = b""
    # (event type, data, last event id), as bytes, in order.
    events: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)
    last: bytes = b""
    retry: int | None = None
    # (wire bytes, data bytes, own id or None) of the block open at the end of input.
    partial: tuple[int, int, bytes | None] | None = None


_ESCAPES = {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\0", "\\": b"\\", '"': b'"'}


def _tokens(line: str, where: str) -> list[bytes]:
    """Quoted strings (escapes decoded) and bare words."""
    out: list[bytes] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == " ":
            i += 1
        elif c == '"':
            i += 1
            s = bytearray()
            while True:
                if i >= len(line):
                    raise ValueError(f"{where}: unterminated string: {line}")
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\":
                    e = line[i + 1]
                    if e == "x":
                        s.append(int(line[i + 2 : i + 4], 16))
                        i += 4
                    elif e in _ESCAPES:
                        s += _ESCAPES[e]
                        i += 2
                    else:
                        raise ValueError(f"{where}: unknown escape: {line}")
                else:
                    s += c.encode()
                    i += 1
            out.append(bytes(s))
        else:
            j = line.find(" ", i)
            j = len(line) if j < 0 else j
            out.append(line[i:j].encode())
            i = j
    return out


def sse_cases() -> list[SseCase]:
    files = sorted(SSE_CASES.glob("*.case"))
    if not files:
        raise FileNotFoundError(f"no *.case files in {SSE_CASES}")
    cases: list[SseCase] = []
    for path in files:
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("== "):
                cases.append(SseCase(name=f"{path.stem}: {line[3:]}"))
                continue
            where = f"{path.name}:{n}"
            case = cases[-1]
            word, *args = _tokens(line, where)
            if word == b"in" and len(args) == 1:
                case.input += args[0]
            elif word == b"ev" and len(args) == 3:
                case.events.append((args[0], args[1], args[2]))
            elif word == b"last" and len(args) == 1:
                case.last = args[0]
            elif word == b"retry" and len(args) == 1:
                case.retry = None if args[0] == b"-" else int(args[0])
            elif word == b"partial" and len(args) == 3:
                case.partial = (int(args[0]), int(args[1]), None if args[2] == b"-" else args[2])
            else:
                raise ValueError(f"{where}: cannot parse: {line}")
    return cases


@dataclass
class JsonCase:
    name: str
    input: bytes
    verdict: str
    max_depth: int


def json_cases() -> tuple[list[JsonCase], int]:
    """The unambiguous cases (the deep-nesting ones judged with a raised depth limit, as
    `tests/gate.rs` does), and how many ambiguous ones were left out."""
    cases: list[JsonCase] = []
    skipped = 0
    for line in JSON_VECTORS.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        if c.get("ambiguous"):
            skipped += 1
            continue
        deep = "deep-nesting" in c["tags"]
        cases.append(
            JsonCase(
                name=c["name"],
                input=base64.b64decode(c["input_b64"]),
                verdict=c["verdict"],
                max_depth=1 << 20 if deep else 1024,
            )
        )
    return cases, skipped


def lossy(b: bytes) -> str:
    """Bytes as the text WHATWG decodes them to (UTF-8, errors replaced)."""
    return b.decode("utf-8", "replace")
