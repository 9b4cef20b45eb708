"""`ssegate._sdk`, the one module that holds the MCP SDK's private names `ssegate.mcp` relies on:
its check passes on the installed SDK and fails, naming the SDK's version and the missing name,
when the SDK changes shape; and `ssegate.mcp` itself uses no private name of the SDK.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import mcp.shared._httpx_utils as httpx_utils
import pytest
from mcp.client.streamable_http import StreamableHTTPTransport

import ssegate.mcp
from ssegate import _sdk


def check_fails(base: type[Any] = StreamableHTTPTransport) -> str:
    with pytest.raises(_sdk.SdkMismatch) as raised:
        _sdk.check(base)
    message = str(raised.value)
    assert isinstance(raised.value, ImportError)
    assert f"mcp {_sdk.sdk_version()}" in message, message
    assert _sdk.sdk_version() != "unknown"
    return message


def test_the_installed_sdk_has_every_name_the_transport_uses() -> None:
    _sdk.check()
    # A release tested with MCP_VERSION=X python/test, once the suite passes, goes in TESTED.
    assert _sdk.sdk_version() in _sdk.TESTED, f"mcp {_sdk.sdk_version()} is not in ssegate._sdk.TESTED"


@pytest.mark.parametrize("hook", sorted(_sdk.HOOKS))
def test_a_missing_hook_fails_the_check_naming_it(monkeypatch: pytest.MonkeyPatch, hook: str) -> None:
    monkeypatch.delattr(StreamableHTTPTransport, hook)
    message = check_fails()
    assert f"StreamableHTTPTransport.{hook} is missing" in message, message


def test_a_hook_the_sdk_no_longer_calls_fails_the_check() -> None:
    """An override of a hook the SDK no longer calls would do nothing: the check says so."""

    class Reshaped(StreamableHTTPTransport):
        async def post_writer(self, *args: Any, **kwargs: Any) -> None:
            await self._send_everything(*args)

        async def _send_everything(self, *args: Any) -> None:
            pass

    message = check_fails(Reshaped)
    assert "_handle_post_request is no longer called by post_writer" in message, message


@pytest.mark.parametrize("helper", _sdk.HELPERS)
def test_a_missing_helper_fails_the_check_naming_it(monkeypatch: pytest.MonkeyPatch, helper: str) -> None:
    monkeypatch.delattr(StreamableHTTPTransport, helper)
    message = check_fails()
    assert f"StreamableHTTPTransport.{helper} is missing" in message, message


def test_a_missing_attribute_fails_the_check_naming_it() -> None:
    class Renamed(StreamableHTTPTransport):
        def __init__(self, url: str) -> None:
            super().__init__(url)
            del self._protocol_version_header

    message = check_fails(Renamed)
    assert "._protocol_version_header is missing" in message, message


def test_a_missing_private_function_fails_the_check_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(httpx_utils, "create_mcp_http_client")
    message = check_fails()
    assert "mcp.shared._httpx_utils.create_mcp_http_client is missing" in message, message


def test_the_transport_uses_no_private_name_of_the_sdk() -> None:
    """`ssegate/mcp.py` imports nothing private from the SDK (`mcp`, `mcp_types`) and touches no
    private member of the SDK's transport: those go through `ssegate._sdk`."""
    source = inspect.getsource(ssegate.mcp)
    tree = ast.parse(source)
    private_members = {
        name for name in dir(StreamableHTTPTransport) if name.startswith("_") and not name.startswith("__")
    } | {name for name in vars(StreamableHTTPTransport("http://127.0.0.1/")) if name.startswith("_")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and re.match(r"mcp(_types)?(\.|$)", node.module):
            names = [alias.name for alias in node.names]
            if any(part.startswith("_") for part in [*node.module.split("."), *names]):
                found.append(f"line {node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if re.match(r"mcp.*\._", a.name)]
        elif isinstance(node, ast.Attribute) and node.attr in private_members:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in private_members:
            found.append(f"line {node.lineno}: def {node.name} (an override)")
    assert not found, found
