"""`ssegate.contract` against the Rust crate's `ssegate::contract` and the stub: every word list the
compiled core exports equals the Python enum or the stub's `Literal` that stands for it, `code_for`
follows the contract's table for every kind, and the defaults are the contract's.

The oracles are literals here, on purpose: a change on one side only (a word added to a Rust enum, a
stub `Literal` or a Python enum; a default changed) fails a test until the other sides follow."""

from __future__ import annotations

import ast
import enum
import inspect
import time
from pathlib import Path

import pytest

import ssegate
from ssegate import DecodeError, Decoder, Dropped, ResumableStream, _ssegate, contract
from ssegate.contract import Code, Kind, Outcome, code_for

# The contract's table (src/contract.rs): each kind's code when the outcome is not an unknown
# `tools/call`.
UNAVAILABLE, SERVER_PROTOCOL, REFUSED = -32_051, -32_052, -32_053
CODE_OF_KIND = {
    "setup": UNAVAILABLE,
    "unreachable": UNAVAILABLE,
    "http": UNAVAILABLE,
    "status": UNAVAILABLE,
    "redirect": UNAVAILABLE,
    "timeout": UNAVAILABLE,
    "invalid-response": SERVER_PROTOCOL,
    "protocol": SERVER_PROTOCOL,
    "refused": REFUSED,
    "too-many-resumes": REFUSED,
    "no-progress": REFUSED,
    "reconnect-failed": UNAVAILABLE,
    "task-failed": UNAVAILABLE,
    "task-cancelled": UNAVAILABLE,
    "tasks": UNAVAILABLE,
    "task": UNAVAILABLE,
    "auth": UNAVAILABLE,
}
CODES = {
    -32_050: ("OUTCOME_UNKNOWN", "outcome-unknown"),
    UNAVAILABLE: ("UNAVAILABLE", "unavailable"),
    SERVER_PROTOCOL: ("SERVER_PROTOCOL", "server-protocol"),
    REFUSED: ("REFUSED", "refused"),
}
OUTCOMES = {"unknown", "not-run", "failed"}

MIB = 1 << 20
DEFAULTS: dict[str, float] = {
    "DEFAULT_MAX_EVENT": 64 * MIB,
    "DEFAULT_MAX_LINE": 64 * MIB,
    "DEFAULT_MAX_FIELD": 4096,
    "DEFAULT_MAX_BLOCK": 80 * MIB,
    "DEFAULT_MAX_JSON_BODY": 64 * MIB,
    "DEFAULT_MAX_ERROR_BODY": 1024,
    "DEFAULT_MAX_RESUMES": 32,
    "DEFAULT_MAX_STALLED_RESUMES": 4,
    "DEFAULT_MAX_RECONNECT_ATTEMPTS": 6,
    "DEFAULT_CALL_TIMEOUT": 600.0,
    "DEFAULT_CONNECT_TIMEOUT": 10.0,
    "DEFAULT_REPLAY_TIMEOUT": 10.0,
    "DEFAULT_IDLE_TIMEOUT": 300.0,
    "DEFAULT_MAX_DELAY": 60.0,
    "DEFAULT_MIN_DELAY": 0.25,
    "DEFAULT_RETRY": 1.0,
    "DEFAULT_BACKOFF": 0.25,
}
# The keyword of `ResumableStream` (and `Decoder`) each default is for.
KEYWORDS = {
    "max_event": "DEFAULT_MAX_EVENT",
    "max_line": "DEFAULT_MAX_LINE",
    "max_field": "DEFAULT_MAX_FIELD",
    "max_block": "DEFAULT_MAX_BLOCK",
    "replay_timeout": "DEFAULT_REPLAY_TIMEOUT",
    "idle_timeout": "DEFAULT_IDLE_TIMEOUT",
    "default_retry": "DEFAULT_RETRY",
    "max_delay": "DEFAULT_MAX_DELAY",
    "min_delay": "DEFAULT_MIN_DELAY",
    "backoff": "DEFAULT_BACKOFF",
    "max_resumes": "DEFAULT_MAX_RESUMES",
    "max_stalled_resumes": "DEFAULT_MAX_STALLED_RESUMES",
    "max_reconnect_attempts": "DEFAULT_MAX_RECONNECT_ATTEMPTS",
}

# Each word list of the compiled core, the `ssegate.contract` name it is published as, and the stub
# alias that types it.
WORD_LISTS = {
    "REFUSAL_KINDS": "_RefusalWord",
    "FAILURE_KINDS": "_FailureWord",
    "RESTART_KINDS": "_RestartWord",
    "SKIP_KINDS": "_SkipWord",
    "DECODE_ERROR_KINDS": "_DecodeErrorWord",
    "RPC_KINDS": "_RpcKindWord",
}
# Where the stub must use each alias: (class, attribute) whose annotation names it.
ALIAS_USES = {
    "_RefusalWord": [("Failed", "refusal")],
    "_FailureWord": [("Failed", "failure")],
    "_RestartWord": [("Failed", "restart")],
    "_SkipWord": [("Skip", "skip")],
    "_DecodeErrorWord": [("Dropped", "error"), ("DecodeError", "kind")],
    "_RpcKindWord": [("Deliver", "rpc_kind")],
}


def stub() -> ast.Module:
    """The installed package's stub of the compiled core (what ships in the wheel)."""
    path = Path(_ssegate.__file__).with_name("_ssegate.pyi")
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def literal_words(node: ast.expr) -> list[str]:
    """The strings of a `Literal[...]` subscript."""
    assert isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name), ast.dump(node)
    assert node.value.id == "Literal", ast.unparse(node)
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    words = []
    for e in elts:
        assert isinstance(e, ast.Constant) and isinstance(e.value, str), ast.unparse(e)
        words.append(e.value)
    return words


def stub_aliases() -> dict[str, list[str]]:
    return {
        n.target.id: literal_words(n.value)
        for n in stub().body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and isinstance(n.value, ast.Subscript)
    }


def stub_class(name: str) -> ast.ClassDef:
    (cls,) = [n for n in stub().body if isinstance(n, ast.ClassDef) and n.name == name]
    return cls


def annotation_of(cls: ast.ClassDef, attr: str) -> str:
    """The annotation of a stub class's attribute or the return annotation of its property."""
    for n in cls.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == attr:
            return ast.unparse(n.annotation)
        if isinstance(n, ast.FunctionDef) and n.name == attr and n.returns is not None:
            return ast.unparse(n.returns)
    raise AssertionError(f"{cls.name}.{attr} not in the stub")


def stub_defaults(cls: str) -> dict[str, object]:
    """The keyword defaults of a stub class's `__new__`."""
    (new,) = [n for n in stub_class(cls).body if isinstance(n, ast.FunctionDef) and n.name == "__new__"]
    args = new.args
    return {a.arg: ast.literal_eval(d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}


def test_every_kind_word_is_a_kind_member_and_back() -> None:
    assert [k.value for k in Kind] == list(_ssegate.KINDS) == list(contract.KINDS)
    assert {k.value for k in Kind} == set(CODE_OF_KIND), "the table here and the Rust kinds differ"
    for k in Kind:
        assert k.name == k.value.upper().replace("-", "_")
        assert Kind(k.value) is k and str(k) == k.value and k == k.value


def test_every_outcome_word_is_an_outcome_member() -> None:
    assert [o.value for o in Outcome] == list(_ssegate.OUTCOMES) == list(contract.OUTCOMES)
    assert set(contract.OUTCOMES) == OUTCOMES
    for o in Outcome:
        assert o.name == o.value.upper().replace("-", "_") and str(o) == o.value


def test_every_code_has_its_value_word_and_message() -> None:
    assert {c.value: (c.name, c.word) for c in Code} == CODES
    assert [(c.value, c.word, c.message) for c in Code] == list(_ssegate.CODES)
    messages = [c.message for c in Code]
    assert all(messages) and len(set(messages)) == len(messages)
    assert Code(-32_050) is Code.OUTCOME_UNKNOWN and Code.REFUSED == REFUSED


def test_every_rust_word_list_is_the_stub_literal() -> None:
    aliases = stub_aliases()
    for name, alias in WORD_LISTS.items():
        rust = getattr(_ssegate, name)
        assert isinstance(rust, tuple) and rust, name
        assert getattr(contract, name) == rust, name
        assert len(set(rust)) == len(rust), f"{name} repeats a word"
        assert aliases[alias] == list(rust), f"stub {alias} vs Rust {name}"
        for cls, attr in ALIAS_USES[alias]:
            assert alias in annotation_of(stub_class(cls), attr), f"{cls}.{attr} is not typed {alias}"


def test_only_the_rpc_kind_has_other() -> None:
    """No word is a fallback: `other` is a real JSON-RPC shape, and nothing else's."""
    lists = {name: getattr(contract, name) for name in WORD_LISTS}
    assert [name for name, words in lists.items() if "other" in words] == ["RPC_KINDS"]
    assert "other" not in contract.KINDS


def test_a_failure_word_is_the_kind_its_error_reports() -> None:
    assert set(contract.FAILURE_KINDS) <= set(contract.KINDS)
    assert {Kind(f) for f in contract.FAILURE_KINDS} == {
        Kind.REFUSED,
        Kind.TOO_MANY_RESUMES,
        Kind.NO_PROGRESS,
        Kind.RECONNECT_FAILED,
    }


def test_code_for_follows_the_table_for_every_kind() -> None:
    for kind in Kind:
        for outcome in Outcome:
            for method in ("tools/call", "tools/list", "initialize", "resources/read"):
                lost_call = method == "tools/call" and outcome is Outcome.UNKNOWN
                want = -32_050 if lost_call else CODE_OF_KIND[kind.value]
                got = code_for(method, kind, outcome)
                assert isinstance(got, Code) and got == want, (method, kind, outcome)
    assert contract.TOOLS_CALL == "tools/call"
    # Plain words are taken; anything else is refused.
    assert code_for("tools/call", Kind("refused"), Outcome("not-run")) is Code.REFUSED
    with pytest.raises(ValueError):
        code_for("tools/call", "other", Outcome.UNKNOWN)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        _ssegate.code_for("tools/call", "refused", "maybe")


def test_data_keys() -> None:
    keys = [contract.DATA_KIND, contract.DATA_OUTCOME, contract.DATA_METHOD, contract.DATA_REASON]
    assert keys == ["kind", "outcome", "method", "reason"]
    assert (contract.DATA_REFUSAL, contract.DATA_STATUS) == ("refusal", "status")


def test_defaults_are_the_contracts() -> None:
    for name, want in DEFAULTS.items():
        got = getattr(contract, name)
        assert got == want and type(got) is type(want), (name, got, want)
    published = {n for n in contract.__all__ if n.startswith("DEFAULT_")}
    assert published == set(DEFAULTS)


@pytest.mark.parametrize("cls", [ResumableStream, Decoder])
def test_keyword_defaults_are_the_contracts(cls: type) -> None:
    """The extension's signature (its text signature names the module's constants) and the stub's
    `__new__` both default to the contract's values."""
    runtime = inspect.signature(cls).parameters
    stubbed = stub_defaults(cls.__name__)
    for keyword, name in KEYWORDS.items():
        if keyword not in runtime:
            assert cls is Decoder, keyword
            continue
        want = DEFAULTS[name]
        assert runtime[keyword].default == want, (cls, keyword)
        assert stubbed[keyword] == want, (cls, keyword)
    # The settings the contract has no constant for default to the Rust config's own (None here).
    for keyword in ("copy_below", "gate_ahead", "window", "unrequested_window", "max_depth"):
        if keyword in runtime:
            assert runtime[keyword].default is None and stubbed[keyword] is None, keyword


def test_the_default_field_limit_is_the_one_in_force() -> None:
    """What the signature says is what the engine does (one limit cheap enough to cross)."""
    limit = contract.DEFAULT_MAX_FIELD
    (ev,) = Decoder().feed(b"id: " + b"i" * limit + b"\ndata: x\n\n")
    assert ev.id == "i" * limit
    with pytest.raises(DecodeError) as e:
        Decoder().feed(b"id: " + b"i" * (limit + 1) + b"\ndata: x\n\n")
    assert e.value.kind == "field-too-long" and e.value.limit == limit
    s = ResumableStream()
    s.expect_response(1)
    s.feed(b"id: " + b"i" * (limit + 1) + b'\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n', time.monotonic())
    out = s.poll()
    assert isinstance(out, Dropped) and out.error == "field-too-long", out


def test_the_enums_are_typed_enums() -> None:
    assert issubclass(Code, enum.IntEnum)
    assert issubclass(Kind, str) and issubclass(Kind, enum.Enum)
    assert issubclass(Outcome, str) and issubclass(Outcome, enum.Enum)
    assert ssegate.contract is contract
