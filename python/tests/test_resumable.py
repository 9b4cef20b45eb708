"""`ssegate.ResumableStream`: a stream cut anywhere and resumed with `Last-Event-ID` delivers each
message once; refused resumes fail with the right kind; deadlines through `poll_timeout` and
`handle_timeout`; the expected response once; zero copies; no panic for any sequence of calls.

Each expectation is computed here from the stream the test writes (where each event ends, which id
a resume must send, which messages exist), not read back from the engine."""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
import tracemalloc

import pytest

import ssegate
from ssegate import ResumableStream

from _gil import max_gap_while

T0 = 1000.0  # any time.monotonic()-like value


def sse(eid: str | None, data: bytes, event: str | None = None) -> bytes:
    out = b""
    if event is not None:
        out += f"event: {event}\n".encode()
    if eid is not None:
        out += f"id: {eid}\n".encode()
    return out + b"data: " + data + b"\n\n" if data else out + b"data:\n\n"


def progress(n: int) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": n}},
        separators=(",", ":"),
    ).encode()


def result(rid, text: str = "done") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}},
        separators=(",", ":"),
    ).encode()


class Written:
    """A response stream written by the test: event ids `0..`, a priming event first, progress
    notifications, the result for request 7 last."""

    def __init__(self, n_progress: int = 3, rid=7) -> None:
        self.events: list[tuple[str, bytes]] = [("0", b"")]
        self.events += [(str(i), progress(i)) for i in range(1, n_progress + 1)]
        self.events.append((str(n_progress + 1), result(rid)))
        self.raw = b""
        self.starts: list[int] = []
        self.ends: list[int] = []
        for eid, data in self.events:
            self.starts.append(len(self.raw))
            self.raw += sse(eid, data)
            self.ends.append(len(self.raw))
        self.messages = [d for _, d in self.events if d]

    def last_complete(self, cut: int) -> int:
        """Index of the last event whose blank line is inside raw[:cut], -1 if none."""
        return max((i for i, e in enumerate(self.ends) if e <= cut), default=-1)

    def after(self, k: int) -> bytes:
        """What a correct server replays after event k."""
        return self.raw[self.starts[k + 1] :] if k + 1 < len(self.events) else b""


def drain(s: ResumableStream) -> list:
    out = []
    while (o := s.poll()) is not None:
        out.append(o)
    return out


def delivered(outs) -> list[bytes]:
    return [bytes(o.message) for o in outs if o.kind == "deliver"]


def until_reconnect(s: ResumableStream, now: float, outs: list) -> tuple[ssegate.Reconnect, float]:
    """Waits out the stream's deadlines until it asks for a reconnect (outputs kept in `outs`)."""
    for _ in range(100):
        for o in drain(s):
            outs.append(o)
            if o.kind == "reconnect":
                return o, now
            assert o.kind != "failed", o
        t = s.poll_timeout()
        assert t is not None, "no deadline while waiting to reconnect"
        now = max(now, t)
        s.handle_timeout(now)
    raise AssertionError("no reconnect")


def feed_in_pieces(s: ResumableStream, data: bytes, now: float, rng: random.Random) -> list:
    outs = []
    at = 0
    while at < len(data):
        n = rng.randrange(1, 64)
        s.feed(data[at : at + n], now)
        outs += drain(s)
        at += n
    return outs


def new_stream(**kw) -> ResumableStream:
    s = ResumableStream(jitter_seed=1, **kw)
    s.expect_response(7)
    return s


@pytest.mark.parametrize("replay", ["from-cursor", "from-start"])
def test_a_stream_cut_anywhere_delivers_each_message_once(replay: str) -> None:
    w = Written()
    rng = random.Random(replay)
    for cut in range(len(w.raw) + 1):
        s = new_stream()
        now = T0
        outs = []
        if cut:
            s.feed(w.raw[:cut], now)
        s.connection_ended("error", now)
        k = w.last_complete(cut)
        if cut == len(w.raw):
            outs += drain(s)
            assert delivered(outs) == w.messages and outs[-1].kind == "finished", cut
            continue
        if k < 0:
            # Cut before any id was committed, with the response outstanding: nothing to resume.
            outs += drain(s)
            assert outs[-1].kind == "failed" and outs[-1].refusal == "unresumable", (cut, outs)
            assert outs[-1].outstanding == [7]
            continue
        r, now = until_reconnect(s, now, outs)
        assert r.last_event_id == w.events[k][0].encode(), cut
        assert r.attempt == 1
        assert s.reconnect_response(200, "text/event-stream", None, now) == "read"
        body = w.after(k) if replay == "from-cursor" else w.raw
        outs += feed_in_pieces(s, body, now, rng)
        s.connection_ended("eof", now)
        outs += drain(s)
        assert delivered(outs) == w.messages, (cut, outs)
        assert outs[-1].kind == "finished", (cut, outs)
        assert s.is_done and s.outstanding == [] and s.resumes == 1
        assert s.stats["delivered"] == len(w.messages)


def test_a_replay_that_skips_the_interrupted_event_is_a_gap() -> None:
    w = Written()
    for k in range(len(w.events) - 2):
        interrupted = k + 1
        start = w.starts[interrupted]
        # The cut comes after the interrupted event's id line and some of its data.
        first_data = start + len(f"id: {w.events[interrupted][0]}\ndata: ") + 1
        for cut in range(first_data, w.ends[interrupted]):
            s = new_stream()
            s.feed(w.raw[:cut], T0)
            s.connection_ended("error", T0)
            outs = []
            r, now = until_reconnect(s, T0, outs)
            assert r.last_event_id == w.events[k][0].encode()
            assert s.reconnect_response(200, "text/event-stream; charset=utf-8", None, now) == "read"
            s.feed(w.after(interrupted), now)  # the interrupted event is missing
            outs = drain(s)
            failed = [o for o in outs if o.kind == "failed"]
            assert len(failed) == 1, (cut, outs)
            f = failed[0]
            assert (f.failure, f.refusal) == ("refused", "gap"), (cut, f)
            assert f.outstanding == [7] and f.must_renegotiate
            assert w.messages[-1] not in delivered(outs)
            assert s.is_done and s.poll() is None


def test_a_restarted_stream_is_refused() -> None:
    w = Written()
    s = new_stream()
    s.feed(w.raw[: w.ends[2]], T0)  # events 0, 1, 2 complete
    s.connection_ended("error", T0)
    outs = []
    r, now = until_reconnect(s, T0, outs)
    assert r.last_event_id == b"2"
    assert s.reconnect_response(200, "text/event-stream", None, now) == "read"
    # The server lost its buffer and numbers a new stream from 1, with other content.
    s.feed(sse("1", progress(99)), now)
    (f,) = [o for o in drain(s) if o.kind == "failed"]
    assert (f.failure, f.refusal, f.restart) == ("refused", "stream-restarted", "id-reused")
    assert f.cursor == b"2" and f.outstanding == [7]


@pytest.mark.parametrize(
    ("status", "content_type", "refusal"),
    [
        (404, "text/plain", "session-expired"),
        (409, None, "replay-unavailable"),
        (410, None, "replay-unavailable"),
        (200, "application/json", "unexpected-response"),
        (200, None, "unexpected-response"),
        (500, "text/html", "unexpected-response"),
    ],
)
def test_a_refused_reconnect(status, content_type, refusal) -> None:
    w = Written()
    s = new_stream()
    s.feed(w.raw[: w.ends[1] + 5], T0)
    s.connection_ended("error", T0)
    outs = []
    _, now = until_reconnect(s, T0, outs)
    assert s.reconnect_response(status, content_type, None, now) == "drop"
    (f,) = drain(s)
    assert isinstance(f, ssegate.Failed) and f.kind == "failed"
    assert (f.failure, f.refusal) == ("refused", refusal)
    assert f.must_renegotiate and f.outstanding == [7]
    assert s.is_done and not s.is_open
    assert "Failed(failure='refused'" in repr(f)


def test_busy_answers_wait_retry_after_then_give_up() -> None:
    s = new_stream(max_reconnect_attempts=3, max_delay=30.0)
    s.feed(sse("p", b""), T0)
    s.connection_ended("error", T0)
    outs = []
    _, now = until_reconnect(s, T0, outs)
    assert s.reconnect_response(503, None, "7", now) == "drop"
    assert s.poll() is None
    assert s.poll_timeout() == pytest.approx(now + 7, abs=1e-6)
    s.handle_timeout(now + 6.9)
    assert s.poll() is None  # not before the deadline
    r, later = until_reconnect(s, now, outs)
    assert r.attempt == 2 and later == pytest.approx(now + 7, abs=1e-6)
    # A Retry-After HTTP-date 5 s from now, as bytes.
    date = email.utils.formatdate(time.time() + 5, usegmt=True).encode()
    assert s.reconnect_response(429, b"text/plain", date, later) == "drop"
    assert 3.5 <= s.poll_timeout() - later <= 5.5
    r, later = until_reconnect(s, later, outs)
    assert r.attempt == 3
    assert s.reconnect_response(503, None, None, later) == "drop"
    (f,) = drain(s)
    assert (f.failure, f.refusal) == ("reconnect-failed", "busy")
    assert f.outstanding == [7] and f.must_renegotiate


def test_failed_reconnects_back_off_then_give_up() -> None:
    s = new_stream(backoff=0.1, min_delay=0.0, max_reconnect_attempts=4)
    s.feed(sse("p", b""), T0)
    s.connection_ended("error", T0)
    outs = []
    r, now = until_reconnect(s, T0, outs)
    waits = []
    for attempt in (2, 3, 4):
        s.reconnect_failed(now)
        before = now
        r, now = until_reconnect(s, now, outs)
        assert r.attempt == attempt and r.last_event_id == b"p"
        waits.append(now - before)
    for k, wait in enumerate(waits):
        full = 0.1 * 2**k
        assert full / 2 - 1e-6 <= wait <= full + 1e-6, (k, wait)
    s.reconnect_failed(now)
    (f,) = drain(s)
    assert (f.failure, f.refusal) == ("reconnect-failed", None)
    assert "4 reconnect attempts failed" in f.reason


def test_the_replay_timeout() -> None:
    s = new_stream(replay_timeout=2.0)
    s.feed(sse("p", b""), T0)
    s.connection_ended("error", T0)
    outs = []
    _, now = until_reconnect(s, T0, outs)
    assert s.reconnect_response(200, "text/event-stream", None, now) == "read"
    assert s.poll_timeout() == pytest.approx(now + 2.0, abs=1e-6)
    # Bytes that arrive push the deadline: it runs from the last byte.
    s.feed(b": still here\n", now + 1.5)
    assert s.poll_timeout() == pytest.approx(now + 3.5, abs=1e-6)
    s.handle_timeout(now + 3.0)
    assert drain(s) == []
    deadline = s.poll_timeout()
    s.handle_timeout(deadline)
    (f,) = drain(s)
    assert (f.failure, f.refusal) == ("refused", "replay-missed")
    assert "no event arrived within 2000 ms" in f.reason


def test_an_empty_replay_is_refused() -> None:
    s = new_stream()
    s.feed(sse("p", b""), T0)
    s.connection_ended("error", T0)
    outs = []
    _, now = until_reconnect(s, T0, outs)
    assert s.reconnect_response(200, "text/event-stream", None, now) == "read"
    s.connection_ended("eof", now)
    (f,) = drain(s)
    assert f.refusal == "replay-missed"


def test_an_idle_connection_is_resumed() -> None:
    s = new_stream(idle_timeout=30.0)
    s.feed(sse("41", b""), T0)
    assert [o.kind for o in drain(s)] == ["cursor"]
    assert s.poll_timeout() == pytest.approx(T0 + 30.0, abs=1e-6)
    s.handle_timeout(T0 + 29.0)
    assert drain(s) == []
    s.handle_timeout(s.poll_timeout())
    (d,) = drain(s)
    assert isinstance(d, ssegate.Disconnected) and d.needed and d.last_event_id == b"41"
    assert not s.is_open
    outs = []
    r, _ = until_reconnect(s, T0 + 30.0, outs)
    assert r.last_event_id == b"41"


def test_no_idle_timeout() -> None:
    s = new_stream(idle_timeout=None)
    s.feed(sse("41", b""), T0)
    drain(s)
    assert s.poll_timeout() is None


def test_the_delay_is_the_servers_retry_clamped() -> None:
    s = new_stream(max_delay=5.0)
    s.feed(b"retry: 1000000000000\n" + sse("a", b""), T0)
    s.connection_ended("eof", T0)
    outs = drain(s)
    d = outs[-1]
    assert d.kind == "disconnected" and d.delay == 5.0 and d.last_event_id == b"a"
    assert s.server_retry == pytest.approx(1e9)
    assert s.poll_timeout() == pytest.approx(T0 + 5.0, abs=1e-6)
    _, now = until_reconnect(s, T0, outs)
    assert now == pytest.approx(T0 + 5.0, abs=1e-6)


def test_the_default_delay_and_its_floor() -> None:
    s = new_stream()
    s.feed(sse("a", b""), T0)
    s.connection_ended("error", T0)
    (_, d) = drain(s)
    assert d.delay == 1.0  # the default retry
    s = new_stream(min_delay=0.2)
    s.feed(b"retry: 0\n" + sse("a", b""), T0)
    s.connection_ended("error", T0)
    (_, d) = drain(s)
    assert 0.2 <= d.delay <= 0.3  # retry: 0 is raised to the jittered floor


def test_deadlines_always_fire_when_handed_back() -> None:
    """`handle_timeout(poll_timeout())` reaches the deadline, whatever the float rounding."""
    rng = random.Random(5)
    base = time.monotonic()
    for _ in range(300):
        t = max(0.0, base + rng.uniform(-base, 1e6))
        s = new_stream(default_retry=rng.uniform(0.25, 50.0), min_delay=0.0)
        s.feed(sse("a", b""), t)
        s.connection_ended("error", t)
        drain(s)
        deadline = s.poll_timeout()
        assert deadline is not None and deadline >= t
        s.handle_timeout(deadline)
        (r,) = drain(s)
        assert r.kind == "reconnect", (t, deadline)


def test_the_response_is_delivered_once() -> None:
    s = new_stream()
    s.feed(sse("1", result(7)), T0)
    s.feed(sse("2", result(7)), T0)  # the same response again, under another id
    outs = drain(s)
    assert [o.kind for o in outs] == ["deliver", "skip"]
    assert outs[0].rpc_kind == "response" and outs[0].rpc_id == 7
    assert outs[1].skip == "duplicate-response"
    assert s.outstanding == []
    s.feed(sse("3", result(7, "other")), T0)  # a different second response
    (f,) = drain(s)
    assert (f.failure, f.refusal) == ("refused", "duplicate-response")


def test_deliver_attributes() -> None:
    s = new_stream()
    chunk = sse("e1", progress(1), event="message") + sse(None, b'{"jsonrpc":"2.0","id":"x","method":"ping"}')
    s.feed(chunk, T0)
    a, b = drain(s)
    assert isinstance(a, ssegate.Deliver) and isinstance(a, ssegate.Output)
    assert (a.rpc_kind, a.rpc_id, a.event_id, a.event_type) == ("notification", None, b"e1", "message")
    assert (b.rpc_kind, b.rpc_id, b.event_id, b.event_type) == ("request", "x", None, None)
    assert repr(b).startswith("Deliver(rpc_kind='request', rpc_id='x', event_id=None")
    assert len(a) == len(progress(1))


def test_message_is_zero_copy() -> None:
    body = result(7, "r" * (4 << 20))
    chunk = sse("1", body)
    s = new_stream()
    tracemalloc.start()
    try:
        s.feed(chunk, T0)
        (out,) = drain(s)
        message = out.message
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10, peak
    assert message.obj is chunk and message.readonly and message == body


def test_ids_of_every_kind() -> None:
    big = 2**70
    s = ResumableStream()
    for rid in ("abc", big, -3):
        s.expect_response(rid)
    assert sorted(map(str, s.outstanding)) == sorted(map(str, ["abc", big, -3]))
    s.feed(sse("1", result("abc")) + sse("2", result(big)) + sse("3", result(-3)), T0)
    outs = drain(s)
    assert [o.rpc_id for o in outs] == ["abc", big, -3]
    assert s.outstanding == []
    s.feed(sse("4", b'{"jsonrpc":"2.0","id":1.5,"result":1}') + sse("5", b'{"jsonrpc":"2.0","id":null,"error":{}}'), T0)
    a, b = drain(s)
    assert a.rpc_id == 1.5 and b.rpc_id is None
    with pytest.raises(TypeError):
        s.expect_response(True)
    with pytest.raises(TypeError):
        s.expect_response(1.0)


def test_a_dropped_event_is_reported_and_the_stream_goes_on() -> None:
    s = new_stream(max_event=100)
    s.feed(sse("1", progress(1) + b" " * 100) + sse("2", result(7)), T0)
    d, r = drain(s)
    assert isinstance(d, ssegate.Dropped)
    assert (d.error, d.event_id, d.outstanding) == ("event-too-large", b"1", [7])
    assert "exceeds 100 bytes" in d.reason
    assert r.kind == "deliver" and r.rpc_id == 7


def test_not_resumable() -> None:
    w = Written()
    s = new_stream(resumable=False)
    s.feed(w.raw[: w.ends[2]], T0)
    s.connection_ended("error", T0)
    outs = drain(s)
    assert outs[-1].kind == "failed" and outs[-1].refusal == "unresumable"
    assert not any(o.kind == "reconnect" for o in outs)


def test_keep_open_reconnects_with_nothing_outstanding() -> None:
    s = ResumableStream(keep_open=True)
    s.feed(sse("g1", progress(1)), T0)
    s.connection_ended("eof", T0)
    outs = drain(s)
    assert [o.kind for o in outs] == ["deliver", "disconnected"]
    assert outs[-1].needed is False
    r, _ = until_reconnect(s, T0, outs)
    assert r.last_event_id == b"g1"
    # Without keep_open the stream finishes.
    s = ResumableStream()
    s.feed(sse("g1", progress(1)), T0)
    s.connection_ended("eof", T0)
    assert [o.kind for o in drain(s)] == ["deliver", "finished"]
    assert isinstance(s.poll(), type(None))


def test_strict_policy_refuses_a_cut_inside_an_event() -> None:
    w = Written()
    s = new_stream(policy="strict")
    s.feed(w.raw[: w.ends[1] + 10], T0)
    s.connection_ended("error", T0)
    assert drain(s)[-1].refusal == "partial-event"


def test_an_invalid_message_is_refused() -> None:
    s = new_stream()
    s.feed(sse("1", b'{"jsonrpc":"2.0","id":7,"result":{}}{"jsonrpc"'), T0)
    (f,) = drain(s)
    assert f.refusal == "trailing-bytes"


def test_properties() -> None:
    s = new_stream()
    assert (s.cursor, s.is_done, s.is_open, s.outstanding, s.resumes) == (None, False, True, [7], 0)
    assert set(s.stats) == {
        "events",
        "delivered",
        "delivered_bytes",
        "skipped",
        "discarded_partials",
        "discarded_bytes",
        "resumes",
    }
    assert s.gate_isa in ("portable", "neon", "avx2", "avx512")
    s.feed(sse("c1", b""), T0)
    assert s.poll().kind == "cursor" and s.cursor == b"c1"
    assert repr(s) == "ResumableStream(open=True, done=False, resumes=0, cursor=b'c1', outstanding=[7])"
    assert ResumableStream(max_isa="portable").gate_isa == "portable"


def test_bad_arguments() -> None:
    s = new_stream()
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(ValueError):
            s.feed(b"data: x\n\n", bad)
        with pytest.raises(ValueError):
            s.handle_timeout(bad)
    with pytest.raises(ValueError):
        s.connection_ended("reset", T0)
    with pytest.raises(TypeError):
        s.feed("data: x\n\n", T0)  # type: ignore[arg-type]
    for kw in (
        {"replay_timeout": -1.0},
        {"max_delay": math.nan},
        {"idle_timeout": 1e12},
        {"policy": "lax"},
        {"max_isa": "sse9"},
    ):
        with pytest.raises(ValueError):
            ResumableStream(**kw)
    with pytest.raises(OverflowError):
        ResumableStream(max_resumes=-1)
    with pytest.raises(TypeError):
        ResumableStream(7)  # type: ignore[misc]


def test_no_panic_for_any_sequence_of_calls() -> None:
    """Random calls with random times (going backwards too) and random bytes: outputs or
    ValueError/TypeError for bad arguments, never a Rust panic (a BaseException)."""
    rng = random.Random(11)
    pieces = [
        sse("1", b""),
        sse("2", progress(2)),
        sse("3", result(7)),
        b"data: {",
        b"id: 9\n",
        b"\r\n",
        b"retry: 5\n",
        b"event: error\ndata: x\n\n",
        bytes(range(256)),
    ]
    for _ in range(200):
        s = ResumableStream(
            max_event=rng.choice([0, 10, 1 << 20]),
            max_field=rng.choice([0, 4, 4096]),
            replay_timeout=rng.choice([0.0, 1.0]),
            idle_timeout=rng.choice([None, 0.0, 5.0]),
            min_delay=rng.choice([0.0, 0.25]),
            max_resumes=rng.choice([0, 1, 3]),
            max_reconnect_attempts=rng.choice([0, 1, 2]),
            gate_ahead=rng.choice([0, 1, 4096]),
        )
        if rng.random() < 0.8:
            s.expect_response(7)
        now = T0
        for _ in range(60):
            now = max(0.0, now + rng.uniform(-5, 20))
            op = rng.randrange(7)
            if op == 0:
                s.feed(rng.choice(pieces) if rng.random() < 0.8 else rng.randbytes(rng.randrange(40)), now)
            elif op == 1:
                s.connection_ended(rng.choice(["eof", "error"]), now)
            elif op == 2:
                t = s.poll_timeout()
                s.handle_timeout(t if t is not None and rng.random() < 0.7 else now)
            elif op == 3:
                s.reconnect_response(
                    rng.choice([200, 404, 409, 429, 503, 0, 65535]),
                    rng.choice([None, "text/event-stream", "x"]),
                    rng.choice([None, "1", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"]),
                    now,
                )
            elif op == 4:
                s.reconnect_failed(now)
            else:
                for o in drain(s):
                    repr(o)
                    if o.kind == "deliver":
                        bytes(o.message)
            _ = (s.cursor, s.outstanding, s.stats, s.is_done, s.is_open)


def test_releases_the_gil_on_big_chunks() -> None:
    body = result(7, "x" * (96 << 20))
    chunk = sse("1", body)
    limits = {"max_event": 1 << 30, "max_line": 1 << 30, "max_block": 1 << 30}

    def one_stream() -> None:
        s = ResumableStream(**limits)
        s.expect_response(7)
        s.feed(chunk, T0)
        (out,) = drain(s)
        assert out.kind == "deliver"

    t0 = time.perf_counter()
    one_stream()
    one = time.perf_counter() - t0
    gap, _ = max_gap_while(lambda: [one_stream() for _ in range(3)])
    assert gap < one / 2, (gap, one)
