"""`ssegate.gate` and `ssegate.Verdict`: against the crate's JSONTestSuite-derived vectors, against
Python's own `json` module as an independent oracle, through every buffer type, and with the GIL
released on big inputs."""

from __future__ import annotations

import json
import random
import time

import pytest

import ssegate
from ssegate import Verdict, gate

from _gil import max_gap_while
from _vectors import json_cases

CASES, AMBIGUOUS = json_cases()


def test_the_vectors_are_there() -> None:
    # The file holds 1098 cases, 35 of them implementation-defined.
    assert len(CASES) > 1000 and AMBIGUOUS > 0
    assert {c.verdict for c in CASES} == {"complete", "incomplete", "trailing", "invalid"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_json_test_suite_vectors(case) -> None:
    assert str(gate(case.input, max_depth=case.max_depth)) == case.verdict


def test_every_vector_through_every_buffer_type() -> None:
    wrong = []
    for c in CASES:
        for data in (bytearray(c.input), memoryview(c.input), memoryview(bytearray(c.input))):
            got = gate(data, max_depth=c.max_depth)
            if str(got) != c.verdict:
                wrong.append((c.name, type(data).__name__, got))
    assert not wrong


def test_verdict_is_an_enum_with_words() -> None:
    assert [v.name for v in Verdict] == ["COMPLETE", "INCOMPLETE", "TRAILING", "INVALID"]
    assert gate(b'{"a": [1, 2]}') is Verdict.COMPLETE
    assert gate(b'{"a": [1, 2') is Verdict.INCOMPLETE
    assert gate(b'{"a": 1}{"a"') is Verdict.TRAILING
    assert gate(b'{"a": 1,]') is Verdict.INVALID
    assert [str(v) for v in Verdict] == ["complete", "incomplete", "trailing", "invalid"]
    assert f"{Verdict.TRAILING}" == "trailing"
    assert Verdict("invalid") is Verdict.INVALID


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        (b"", Verdict.INCOMPLETE),
        (b"   \n", Verdict.INCOMPLETE),
        (b"42", Verdict.COMPLETE),
        (b'"a', Verdict.INCOMPLETE),
        (b'"a"', Verdict.COMPLETE),
        (b'"a" ', Verdict.COMPLETE),
        (b'"a" "b"', Verdict.TRAILING),
        (b"[1, 2] ,", Verdict.TRAILING),
        (b"nul", Verdict.INCOMPLETE),
        (b"nulx", Verdict.INVALID),
        (b'{"a" 1}', Verdict.INVALID),
        (b'["\x01"]', Verdict.INVALID),  # a raw control character in a string
        (b'["\xff"]', Verdict.INVALID),  # not UTF-8
        (b'["\\ud800"]', Verdict.COMPLETE),  # an escaped lone surrogate is JSON text
        (b"\xef\xbb\xbf{}", Verdict.INVALID),  # a byte order mark
        (b"NaN", Verdict.INVALID),
    ],
)
def test_small_cases(text: bytes, verdict: Verdict) -> None:
    assert gate(text) is verdict


def test_max_depth() -> None:
    deep = b"[" * 1025 + b"]" * 1025
    assert gate(deep) is Verdict.INVALID  # deeper than the default 1024
    assert gate(deep, max_depth=2000) is Verdict.COMPLETE
    assert gate(b"[[1]]", max_depth=1) is Verdict.INVALID
    assert gate(b"[1]", max_depth=1) is Verdict.COMPLETE


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.randrange(-(10**12), 10**12)
    if kind == 1:
        return rng.random() * 10 ** rng.randrange(-5, 20)
    if kind == 2:
        return "".join(rng.choice('ab "\\\n\té€😀\x01/') for _ in range(rng.randrange(12)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return ""
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(4))}


def test_against_pythons_json_module() -> None:
    """Independent oracle: whatever `json.dumps` writes is one complete value; every proper prefix
    of an array or object is incomplete (its closing bracket is missing); two values in a row are
    trailing; and a text `json.loads` rejects (NaN aside) is not complete."""
    rng = random.Random(20240229)
    for _ in range(300):
        doc = {"jsonrpc": "2.0", "id": rng.randrange(100), "result": _value(rng)}
        for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False, indent=rng.choice([None, 1]))):
            raw = text.encode()
            assert gate(raw) is Verdict.COMPLETE, raw
            for cut in sorted({rng.randrange(len(raw)) for _ in range(20)} | {0, len(raw) - 1}):
                assert gate(raw[:cut]) is Verdict.INCOMPLETE, raw[:cut]
            assert gate(raw + raw) is Verdict.TRAILING
            assert gate(raw + b" \n") is Verdict.COMPLETE
    for _ in range(2000):
        raw = bytes(rng.choice(b'{}[]:,"0123456789.eE+-tfnulra \\') for _ in range(rng.randrange(1, 12)))
        try:
            json.loads(raw, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            loads = True
        except (ValueError, RecursionError):
            loads = False
        assert (gate(raw) is Verdict.COMPLETE) == loads, raw


def test_rejects_what_is_not_a_buffer() -> None:
    with pytest.raises(TypeError):
        gate("{}")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gate(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gate([1, 2])  # type: ignore[arg-type]


def test_big_bytearray_is_judged_on_a_copy() -> None:
    # A bytearray is copied before the scan runs without the GIL: the verdict is the input's.
    data = bytearray(b'{"text": "' + b"x" * (1 << 20) + b'"}')
    assert gate(data) is Verdict.COMPLETE
    data[-1:] = b""
    assert gate(data) is Verdict.INCOMPLETE


def test_releases_the_gil_on_big_inputs() -> None:
    big = b'["' + b"a" * (96 << 20) + b'"]'
    t0 = time.perf_counter()
    assert gate(big) is Verdict.COMPLETE
    one = time.perf_counter() - t0
    gap, _ = max_gap_while(lambda: [gate(big) for _ in range(3)])
    # Holding the GIL, the loop here would stall for a whole scan (`one`) at least once.
    assert gap < one / 2, (gap, one)


def test_version() -> None:
    assert isinstance(ssegate.__version__, str) and ssegate.__version__.count(".") == 2
