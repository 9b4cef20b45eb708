"""Every private name of the official MCP Python SDK that `ssegate.mcp` relies on, in one place.

`ssegate.mcp.GuardedTransport` subclasses the SDK's `StreamableHTTPTransport`: it overrides two of
its private hooks (the SDK's `post_writer` calls them for every request) and calls a few private
helpers, and it builds its streams and HTTP client with functions of the SDK's private modules. The
SDK may change any of these in any release, so they are looked up here once, at import, and
`check()` fails the import with an `SdkMismatch` (an `ImportError`) naming the installed SDK
version and the missing name, rather than letting the transport misbehave: an override of a hook
the SDK no longer calls would silently do nothing, and the SDK's own reading of every answer would
take over unguarded.

`ssegate.mcp` uses only the SDK's public names and this module's: `Transport` (the base class, the
hooks and helpers under names of its own), `create_context_streams` and `create_mcp_http_client`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

import httpx2
from mcp.client.streamable_http import RequestContext, StreamableHTTPTransport
from mcp_types import JSONRPCMessage

__all__ = [
    "TESTED",
    "SdkMismatch",
    "Transport",
    "check",
    "create_context_streams",
    "create_mcp_http_client",
    "sdk_version",
]

TESTED = ("2.3.0",)
"""The `mcp` releases `ssegate.mcp` is tested with (python/test)."""

MODULES: dict[str, tuple[str, ...]] = {
    "mcp.shared._context_streams": ("create_context_streams",),
    "mcp.shared._httpx_utils": ("create_mcp_http_client",),
}
"""Private modules of the SDK, and the names used from each."""

HOOKS: dict[str, str] = {
    "_handle_post_request": "post_writer",
    "_handle_resumption_request": "post_writer",
}
"""The private methods of `StreamableHTTPTransport` that `Transport` overrides, each with the
method of the SDK that must still call it."""

HELPERS: tuple[str, ...] = (
    "_prepare_headers",
    "_is_initialization_request",
    "_maybe_extract_session_id_from_response",
)
"""The private methods of `StreamableHTTPTransport` that `Transport` calls."""

ATTRIBUTES: tuple[str, ...] = ("_protocol_version_header",)
"""The private instance attributes of `StreamableHTTPTransport` that `Transport` reads."""


class SdkMismatch(ImportError):
    """The installed MCP SDK lacks (or no longer uses) a private name `ssegate.mcp` relies on."""


def sdk_version() -> str:
    """The installed `mcp` distribution's version ("(no metadata)" when it has none)."""
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return "(no metadata)"


def _mismatch(name: str, problem: str) -> SdkMismatch:
    return SdkMismatch(
        f"ssegate.mcp cannot run on the installed MCP SDK (mcp {sdk_version()}; ssegate.mcp is tested "
        f"with mcp {', '.join(TESTED)}): {name} {problem}. Install a tested release "
        f"(pip install 'mcp=={TESTED[-1]}') or an ssegate that supports this one.",
        name=name,
    )


def _code_names(code: CodeType) -> Iterator[str]:
    """The attribute and global names `code` and the functions nested in it use."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_names(const)


def _uses(function: Callable[..., Any], name: str) -> bool:
    code = getattr(inspect.unwrap(function), "__code__", None)
    return isinstance(code, CodeType) and name in set(_code_names(code))


def check(base: type[Any] = StreamableHTTPTransport) -> None:
    """Raises `SdkMismatch` unless the SDK has every private name listed here, in the shape used:
    the private modules' functions, the hooks (coroutine functions, still called by the SDK method
    that calls them), the helpers and the instance attributes of `base`."""
    for module_name, names in MODULES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise _mismatch(module_name, f"cannot be imported ({e})") from None
        for name in names:
            if not callable(getattr(module, name, None)):
                raise _mismatch(f"{module_name}.{name}", "is missing")
    where = f"{base.__module__}.{base.__qualname__}"
    for hook, caller in HOOKS.items():
        method = getattr(base, hook, None)
        if method is None or not inspect.iscoroutinefunction(method):
            raise _mismatch(f"{where}.{hook}", "is missing (or no longer a coroutine function)")
        calling = getattr(base, caller, None)
        if calling is None or not _uses(calling, hook):
            raise _mismatch(
                f"{where}.{hook}",
                f"is no longer called by {caller}: ssegate's override of it would do nothing",
            )
    for helper in HELPERS:
        if not callable(getattr(base, helper, None)):
            raise _mismatch(f"{where}.{helper}", "is missing")
    probe = base("http://127.0.0.1/")
    for attribute in ATTRIBUTES:
        if not hasattr(probe, attribute):
            raise _mismatch(f"{where}().{attribute}", "is missing")


check()

# Looked up only after check() passed, so a missing one has already been named.
from mcp.shared._context_streams import create_context_streams  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402


class Transport(StreamableHTTPTransport):
    """The SDK's transport with the private hooks and helpers `ssegate.mcp` uses under names of
    their own: a subclass implements `on_post` and `on_resumption`."""

    # The hooks: the SDK's post_writer calls these for each message (check() makes sure).

    async def _handle_post_request(self, ctx: RequestContext) -> None:
        await self.on_post(ctx)

    async def _handle_resumption_request(self, ctx: RequestContext) -> None:
        await self.on_resumption(ctx)

    async def on_post(self, ctx: RequestContext) -> None:
        """Sends a message (`POST`) and reads its answer."""
        raise NotImplementedError

    async def on_resumption(self, ctx: RequestContext) -> None:
        """Resumes a request's stream from the resumption token in `ctx.metadata` (`GET`)."""
        raise NotImplementedError

    # The helpers.

    def request_headers(self) -> dict[str, str]:
        """The MCP headers of any request: accept, content type, session, protocol version."""
        headers: dict[str, str] = self._prepare_headers()
        return headers

    @property
    def protocol_version(self) -> str | None:
        """The protocol version negotiated (or stamped on the latest request), if any."""
        version: str | None = self._protocol_version_header
        return version

    def is_initialize(self, message: JSONRPCMessage) -> bool:
        """Whether `message` is the `initialize` request."""
        return bool(self._is_initialization_request(message))

    def take_session_id(self, response: httpx2.Response) -> None:
        """Keeps the session id of an `initialize` answer."""
        self._maybe_extract_session_id_from_response(response)
