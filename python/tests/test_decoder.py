"""`ssegate.Decoder`: the crate's WHATWG conformance cases under every chunking, the limits and their
typed error, zero-copy data, and no panic for any input."""

from __future__ import annotations

import contextlib
import gc
import random
import time
import tracemalloc

import pytest

import ssegate
from ssegate import DecodeError, Decoder, Event

from _gil import max_gap_while
from _vectors import lossy, sse_cases

CASES = sse_cases()


def outcome(chunks, **limits):
    """Feeds `chunks`, then ends the input: (events, last id, retry, discarded block), with each
    event as (type, data, id) in the vectors' terms."""
    d = Decoder(**limits)
    events = []
    for c in chunks:
        for ev in d.feed(c):
            assert isinstance(ev, Event)
            events.append((ev.event or "message", bytes(ev.data), ev.id or ""))
    assert d.finish() == []
    p = d.discarded
    partial = None if p is None else (p.bytes, p.data_len, p.id)
    return events, d.last_event_id or "", d.retry, partial


def expected(case):
    events = [(lossy(t), data, lossy(i)) for t, data, i in case.events]
    partial = None
    if case.partial is not None:
        b, n, pid = case.partial
        partial = (b, n, None if pid is None else lossy(pid))
    return events, lossy(case.last), case.retry, partial


def test_the_vectors_are_there() -> None:
    assert len(CASES) >= 70
    assert sum(len(c.events) for c in CASES) > 60
    assert any(c.partial for c in CASES) and any(c.retry is not None for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_under_every_chunking(case) -> None:
    want = expected(case)
    data = case.input
    n = len(data)
    assert outcome([data]) == want, "whole input"
    assert outcome([data[i : i + 1] for i in range(n)]) == want, "1-byte chunks"
    for cut in range(n + 1):
        assert outcome([data[:cut], data[cut:]]) == want, f"split at {cut}"
    rng = random.Random(case.name)
    for _ in range(50):
        cuts = sorted(rng.randrange(n + 1) for _ in range(rng.randrange(8)))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        assert outcome(pieces) == want, f"cuts {cuts}"


@pytest.mark.parametrize("kind", [bytearray, memoryview, lambda b: memoryview(bytearray(b))])
def test_conformance_through_other_buffers(kind) -> None:
    for case in CASES:
        assert outcome([kind(case.input)]) == expected(case), case.name


def _stream(rng: random.Random, n: int) -> tuple[bytes, list[tuple[str, bytes, str]]]:
    """A stream written here from a list of events (the oracle), with every WHATWG wrinkle an
    encoder may use: CR, LF and CRLF line ends, comments, optional spaces, multi-line data, ids
    that carry over, retry fields, unknown fields."""
    out = bytearray(b"\xef\xbb\xbf" if rng.random() < 0.5 else b"")
    events = []
    last_id = ""
    for i in range(n):
        eol = rng.choice([b"\n", b"\r", b"\r\n"])
        lines = []
        if rng.random() < 0.3:
            lines.append(b": comment " + str(i).encode())
        etype = rng.choice([None, "message", "progress", ""])
        if etype is not None:
            lines.append(b"event:" + rng.choice([b" ", b""]) + etype.encode())
        if rng.random() < 0.6:
            last_id = f"{i}-é"
            lines.append(b"id: " + last_id.encode())
        if rng.random() < 0.1:
            lines.append(b"retry: 1500")
        if rng.random() < 0.1:
            lines.append(b"unknown: field")
        parts = [
            bytes(rng.choice(b'ab{}":, \xc3\xa9') for _ in range(rng.randrange(0, 400)))
            for _ in range(rng.randrange(1, 4))
        ]
        for p in parts:
            # One space after the colon is dropped by the decoder: write it whenever the value
            # starts with one.
            space = b" " if p.startswith(b" ") or rng.random() < 0.5 else b""
            lines.append(b"data:" + space + p)
        for line in lines:
            out += line + eol
        out += eol
        events.append((etype or "message", b"\n".join(parts), last_id))
    return bytes(out), events


def test_random_streams_every_chunking() -> None:
    """Events written by an independent encoder come back as written, however the stream is cut
    (including between a CR and its LF)."""
    rng = random.Random(7)
    for _ in range(30):
        raw, events = _stream(rng, rng.randrange(1, 40))
        got, _, _, partial = outcome([raw])
        assert partial is None
        assert got == events
        for _ in range(20):
            cuts = sorted(rng.randrange(len(raw) + 1) for _ in range(rng.randrange(1, 30)))
            pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
            assert outcome(pieces)[0] == got


def test_event_attributes_and_repr() -> None:
    d = Decoder()
    (a, b) = d.feed(b"retry: 2500\nid: 7\nevent: add\ndata: x\ndata: y\n\ndata: z\n\n")
    assert (a.event, a.id, a.has_own_id, a.retry, bytes(a.data), len(a)) == ("add", "7", True, 2500, b"x\ny", 3)
    # The id carries over (WHATWG lastEventId); the event type and retry do not.
    assert (b.event, b.id, b.has_own_id, b.retry, bytes(b.data)) == (None, "7", False, None, b"z")
    assert d.last_event_id == "7" and d.retry == 2500
    assert repr(a) == "Event(event='add', id='7', retry=2500, data=b'x\\ny')"
    (c,) = d.feed(b"id\ndata: w\n\n")  # an empty id field resets the last event id
    assert c.id is None and d.last_event_id is None
    (e,) = d.feed(b"data: " + b"q" * 100 + b"\n\n")
    assert "(100 bytes)" in repr(e)


def test_finish_discards_an_unterminated_event() -> None:
    d = Decoder()
    (first,) = d.feed(b"id: 1\ndata: a\n\nid: 2\ndata: half")
    assert bytes(first.data) == b"a"
    assert d.finish() == []
    p = d.discarded
    assert (p.bytes, p.data_len, p.id) == (16, 4, "2")
    assert repr(p) == "PartialEvent(bytes=16, data_len=4, id='2')"
    # The committed id carries over to the next connection; the open block does not.
    assert d.last_event_id == "1"
    (again,) = d.feed(b"data: next\n\n")
    assert (bytes(again.data), again.id) == (b"next", "1")
    d.finish()
    assert d.discarded is None


def test_limits_raise_the_typed_error_and_decoding_goes_on() -> None:
    d = Decoder(max_event=10)
    with pytest.raises(DecodeError) as info:
        d.feed(b"data: ok\n\nid: 5\ndata: 0123456789A\n\ndata: after\n\n")
    e = info.value
    assert isinstance(e, ValueError)
    assert (e.kind, e.limit, e.id) == ("event-too-large", 10, "5")
    assert e.offset == 10 + 6  # the line that crossed the limit starts after "data: ok\n\nid: 5\n"
    assert [bytes(ev.data) for ev in e.events] == [b"ok", b"after"]
    assert e.errors == [e]
    assert "exceeds 10 bytes" in str(e)
    # The dropped block's id is never committed; the next chunk decodes normally.
    assert d.last_event_id is None
    assert [bytes(ev.data) for ev in d.feed(b"data: 0123456789\n\n")] == [b"0123456789"]


@pytest.mark.parametrize(
    ("limits", "stream", "kind"),
    [
        ({"max_line": 16}, b"data: 0123456789ABCDEF\n\n", "line-too-long"),
        ({"max_line": 16}, b": a comment longer than 16\n\n", "line-too-long"),
        ({"max_event": 4}, b"data: ab\ndata: cd\n\n", "event-too-large"),
        ({"max_field": 8}, b"id: 0123456789\ndata: x\n\n", "field-too-long"),
        ({"max_field": 8}, b"event: 0123456789\ndata: x\n\n", "field-too-long"),
        ({"max_block": 40}, b"data: a\n" + b": padding\n" * 5 + b"\n", "block-too-large"),
    ],
)
def test_each_limit(limits, stream, kind) -> None:
    for chunks in ([stream], [stream[i : i + 1] for i in range(len(stream))]):
        d = Decoder(**limits)
        errors = []
        for c in [*chunks, b"data: next\n\n"]:
            try:
                events = d.feed(c)
            except DecodeError as e:
                errors.append(e.kind)
                events = e.events
            if c.startswith(b"data: next"):
                assert [bytes(ev.data) for ev in events] == [b"next"]
        assert errors == [kind]


def test_several_errors_in_one_chunk() -> None:
    with pytest.raises(DecodeError) as info:
        Decoder(max_event=2).feed(b"data: aaa\n\ndata: b\n\ndata: ccc\n\n")
    assert [x.kind for x in info.value.errors] == ["event-too-large"] * 2
    assert [bytes(ev.data) for ev in info.value.events] == [b"b"]


def test_defaults_are_the_rust_decoders() -> None:
    # 64 MiB of data in one event (two lines and their LF join) is within the default limit; one
    # byte more is not. A line of 64 MiB and its field name is over the line limit.
    limit = 64 << 20
    half = b"x" * (limit // 2)
    (ev,) = Decoder().feed(b"data: " + half + b"\ndata: " + half[1:] + b"\n\n")
    assert len(ev) == limit
    with pytest.raises(DecodeError) as info:
        Decoder().feed(b"data: " + half + b"\ndata: " + half + b"\n\n")
    assert info.value.kind == "event-too-large" and info.value.limit == limit
    with pytest.raises(DecodeError) as info:
        Decoder().feed(b"data: " + half + half + b"\n\n")
    assert info.value.kind == "line-too-long" and info.value.limit == limit
    with pytest.raises(DecodeError) as info:
        Decoder().feed(b"id: " + b"1" * (4 << 10) + b"1\n\n")
    assert (info.value.kind, info.value.limit) == ("field-too-long", 4096)


def test_data_is_zero_copy() -> None:
    """An event inside one `bytes` chunk comes back as a read-only view of that very object: no
    copy of a 4 MiB event (Python-side allocations stay tiny while it is decoded and read)."""
    body = b'{"jsonrpc":"2.0","id":1,"result":"' + b"r" * (4 << 20) + b'"}'
    chunk = b"id: 1\ndata: " + body + b"\n\n"
    d = Decoder()
    tracemalloc.start()
    try:
        (ev,) = d.feed(chunk)
        view = ev.data
        assert view.obj is chunk
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10, peak
    assert isinstance(view, memoryview) and view.readonly
    assert view == body and view.nbytes == len(body)
    assert ev.data is view  # made once
    with pytest.raises(TypeError):
        view[0] = 0  # type: ignore[index]
    assert bytes(view) == body


def test_data_joined_once_when_spread_over_chunks() -> None:
    body = b"y" * 300_000
    stream = b"data: " + body + b"\n\n"
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    d = Decoder()
    events = [ev for c in chunks for ev in d.feed(c)]
    (ev,) = events
    assert ev.data.readonly and ev.data == body
    assert all(ev.data.obj is not c for c in chunks)


def test_small_pieces_are_copied_and_still_views() -> None:
    d = Decoder()
    (ev,) = d.feed(b"data: a\ndata: b\n\n")
    assert isinstance(ev.data, memoryview) and ev.data.readonly and ev.data == b"a\nb"


def test_bytearray_input_is_copied() -> None:
    buf = bytearray(b"data: mutable\n\n")
    (ev,) = Decoder().feed(buf)
    buf[6:13] = b"changed"
    assert bytes(ev.data) == b"mutable"


# The test hook of the cargo feature `testing`, which python/test builds with (no wheel has it).
_live_chunks = getattr(ssegate._ssegate, "_live_chunks", None)


@pytest.mark.skipif(_live_chunks is None, reason="ssegate built without the cargo feature `testing`")
def test_chunks_are_released() -> None:
    assert _live_chunks is not None
    gc.collect()
    base = _live_chunks()
    d = Decoder()
    events = d.feed(b"data: " + b"z" * 1000 + b"\n\ndata: open")
    views = [ev.data for ev in events]
    assert _live_chunks() == base + 1
    del events, views, d
    gc.collect()
    assert _live_chunks() == base


def test_bad_input_types() -> None:
    d = Decoder()
    for bad in ("data: x\n\n", 5, None, [1]):
        with pytest.raises(TypeError):
            d.feed(bad)  # type: ignore[arg-type]


def test_no_panic_for_any_input() -> None:
    """Random bytes over an SSE-heavy alphabet, random chunkings, tiny and zero limits: events or
    DecodeError, never anything else (a Rust panic would surface as BaseException)."""
    rng = random.Random(99)
    alphabet = b"data:id:event:retry: \r\n\n\n\x00\xef\xbb\xbf\xff0123456789"
    for _ in range(400):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randrange(300)))
        limits = {
            k: rng.choice([0, 1, 2, 5, 64, 1 << 20])
            for k in ("max_line", "max_event", "max_field", "max_block", "copy_below")
            if rng.random() < 0.5
        }
        d = Decoder(**limits)
        at = 0
        while at < len(raw):
            n = rng.randrange(1, 50)
            with contextlib.suppress(DecodeError):
                d.feed(raw[at : at + n])
            at += n
        d.finish()


def test_releases_the_gil_on_big_chunks() -> None:
    chunk = b"data: " + b"x" * (128 << 20) + b"\n\n"
    limits = {"max_line": 1 << 30, "max_event": 1 << 30, "max_block": 1 << 30}
    t0 = time.perf_counter()
    (ev,) = Decoder(**limits).feed(chunk)
    one = time.perf_counter() - t0
    assert len(ev) == 128 << 20

    gap, _ = max_gap_while(lambda: [Decoder(**limits).feed(chunk) for _ in range(3)])
    assert gap < one / 2, (gap, one)
