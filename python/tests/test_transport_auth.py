"""`ssegate.mcp.GuardedTransport` with the official SDK's own OAuth client
(`mcp.client.auth.OAuthClientProvider`, an `httpx2.Auth`), against the test kit's OAuth
authorization server and OAuth-protected MCP endpoint (`ssegate-testkit serve --auth`).

The sign-in is real: the provider discovers the protected resource's metadata from the endpoint's
`401` challenge, then the authorization server's, registers (RFC 7591), sends its authorization URL
to the `redirect_handler`, which hands it to the kit's headless browser (`authorize URL`: the
redirect URI with `code`, `state` and `iss`), and its `callback_handler` returns them; the code is
exchanged (PKCE S256, RFC 8707 `resource`) for a token that every later request carries. The
protected endpoint answers any request without a valid token `401`, and the authorization server
counts what it did (`auth-stats`), so a request that got through without its token, or a sign-in
done twice, shows.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError

from ssegate.mcp import UNAVAILABLE, GuardedTransport, OutcomeUnknown, typed_errors

pytestmark = pytest.mark.anyio

MIB = 1 << 20

# Every test is bounded: a sign-in that waits for a browser that never comes back must fail the
# test, not hang it.
BOUND = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class MemoryStorage:
    """A `mcp.client.auth.TokenStorage` in memory, counting what was stored."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.tokens_set = 0

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.tokens_set += 1

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """The provider's `redirect_handler` and `callback_handler` over the kit's headless browser:
    the authorization URL is visited (`authorize URL`) and the redirect it answered is kept; the
    callback returns its `code`, `state` and `iss`, or raises when the redirect carries an
    `error` (a refused sign-in), as an application's callback does."""

    def __init__(self, kit) -> None:
        self.kit = kit
        self.visited: list[str] = []
        self.redirects: list[str] = []

    async def redirect_handler(self, authorization_url: str) -> None:
        self.visited.append(authorization_url)
        # The kit's commands block; off the event loop.
        self.redirects.append(await anyio.to_thread.run_sync(self.kit.authorize, authorization_url))

    async def callback_handler(self) -> AuthorizationCodeResult:
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.redirects[-1]).query).items()}
        if "error" in query:
            detail = query.get("error_description")
            raise OAuthFlowError(f"the sign-in was refused: {query['error']}" + (f" ({detail})" if detail else ""))
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def provider(kit, storage: MemoryStorage, browser: Browser) -> OAuthClientProvider:
    """The SDK's OAuth client for the kit's protected endpoint. Its `server_url` is the protected
    endpoint (the resource the tokens are for) even when the transport goes through the fault proxy
    in front of it: the proxy is a hop on the way, not another resource."""
    assert kit.auth is not None, "the kit was started without auth=True"
    metadata = OAuthClientMetadata(
        client_name="ssegate tests",
        redirect_uris=[kit.auth["redirect_uris"][0]],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        server_url=kit.auth["protected"],
        client_metadata=metadata,
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )


def signed_in(kit) -> tuple[MemoryStorage, Browser, OAuthClientProvider]:
    storage = MemoryStorage()
    browser = Browser(kit)
    return storage, browser, provider(kit, storage, browser)


def text_of(result) -> str:
    assert not result.is_error, result
    return result.content[0].text


def mcp_errors(exc: BaseException) -> list[MCPError]:
    """The `MCPError`s in `exc`, an exception group's included (one that leaves
    `async with Client(...)`, e.g. from its `initialize`, comes out wrapped in one)."""
    if isinstance(exc, MCPError):
        return [exc]
    return [e for sub in getattr(exc, "exceptions", ()) for e in mcp_errors(sub)]


def auth_counts(kit) -> dict[str, Any]:
    stats = kit.auth_stats()
    return {**stats["auth"], **{f"protected_{k}": v for k, v in stats["protected"].items()}}


async def test_the_sdks_oauth_signs_in_once_and_every_request_carries_the_token(testkit) -> None:
    kit = testkit(mode="buffered", auth=True)
    storage, browser, auth = signed_in(kit)
    with anyio.fail_after(BOUND):
        async with Client(GuardedTransport(kit.url, auth=auth)) as client:
            tools = await client.list_tools()
            assert "big_result" in {t.name for t in tools.tools}
            result = await client.call_tool("big_result", {"size": 100_000, "seed": 3})
    assert text_of(result) == kit.expected_text(100_000, 3)
    counts = auth_counts(kit)
    assert counts["authorizations"] == 1, counts
    assert counts["registrations"] == 1, counts
    assert counts["code_grants"] == 1, counts
    assert len(browser.visited) == 1 and "code=" in browser.redirects[0], browser.redirects
    assert storage.tokens is not None and storage.client_info is not None
    # The first request went without a token (the challenge started the sign-in); the rest carried
    # it and were let through, none with a token refused. (Once, under load, two went without one,
    # still with one sign-in: not asserted exactly.)
    assert counts["protected_missing_token"] >= 1, counts
    assert counts["protected_invalid_token"] == 0, counts
    assert counts["protected_admitted"] >= 3, counts
    assert kit.stats()["calls"] == 1


async def test_a_cut_result_is_resumed_in_place_with_the_token_on_the_resume(testkit) -> None:
    """The fault proxy sits in front of the protected endpoint: the big result's stream is cut mid
    event, and the resume `GET` (with `Last-Event-ID`) gets through the protected endpoint only
    with a valid token, sent by the SDK's OAuth flow without a new sign-in."""
    kit = testkit(mode="buffered", proxy=True, auth=True)
    assert kit.url == kit.proxy_url and kit.url != kit.auth["protected"]
    _storage, _browser, auth = signed_in(kit)
    kit.cut(300_000)
    with anyio.fail_after(BOUND):
        async with Client(GuardedTransport(kit.url, auth=auth)) as client:
            result = await client.call_tool("big_result", {"size": 1 * MIB, "seed": 9})
    assert text_of(result) == kit.expected_text(1 * MIB, 9)
    assert kit.cuts() == 1
    stats = kit.stats()
    assert stats["calls"] == 1, stats
    assert stats["resumes"] >= 1 and stats["replays"] >= 1, stats
    # A resume sent without the token would have been answered 401, and the SDK would have
    # signed in again to send it.
    counts = auth_counts(kit)
    assert counts["authorizations"] == 1, counts
    assert counts["protected_invalid_token"] == 0, counts


async def test_an_expired_token_is_refreshed_between_calls_without_a_new_sign_in(testkit) -> None:
    """The SDK refreshes a token it knows has expired (by the `expires_in` it was given) before it
    sends the request. The sign-in's token lives 2.999 s (`expires_in` 2: the client's clock runs
    out first, never a request the server sees expired); after the first calls every token is
    expired server side too (`auth-expire`) and the client's has run out: the next call
    refreshes (a `refresh_token` grant) and succeeds, with no new authorization and no request
    refused."""
    kit = testkit(mode="buffered", auth=True)
    storage, _browser, auth = signed_in(kit)
    kit.auth_ttl(2_999)
    with anyio.fail_after(BOUND):
        async with Client(GuardedTransport(kit.url, auth=auth)) as client:
            first = await client.call_tool("big_result", {"size": 10_000, "seed": 1})
            # Tokens issued from now on (the refresh's) live an hour.
            kit.auth_ttl(3_600_000)
            before = auth_counts(kit)
            assert kit.auth_expire() >= 1
            # Every token issued so far has run out on the client's clock too (2 s).
            await anyio.sleep(2.2)
            old_token = storage.tokens.access_token if storage.tokens else None
            second = await client.call_tool("big_result", {"size": 10_000, "seed": 2})
    assert text_of(first) == kit.expected_text(10_000, 1)
    assert text_of(second) == kit.expected_text(10_000, 2)
    after = auth_counts(kit)
    assert after["authorizations"] == 1, after
    assert after["refresh_grants"] > before["refresh_grants"], (before, after)
    assert after["protected_invalid_token"] == before["protected_invalid_token"], (before, after)
    assert storage.tokens is not None and storage.tokens.access_token != old_token
    assert kit.stats()["calls"] == 2


async def test_a_second_transport_with_the_same_storage_reuses_the_token(testkit) -> None:
    kit = testkit(mode="buffered", auth=True)
    storage, browser, auth = signed_in(kit)
    with anyio.fail_after(BOUND):
        async with Client(GuardedTransport(kit.url, auth=auth)) as client:
            await client.list_tools()
        before = auth_counts(kit)
        # A new provider (a restarted application) over the same storage.
        again = provider(kit, storage, browser)
        async with Client(GuardedTransport(kit.url, auth=again)) as client:
            result = await client.call_tool("big_result", {"size": 10_000, "seed": 4})
    assert text_of(result) == kit.expected_text(10_000, 4)
    after = auth_counts(kit)
    for counter in ("authorizations", "registrations", "token_requests", "refresh_grants"):
        assert after[counter] == before[counter], (counter, before, after)
    assert after["protected_missing_token"] == before["protected_missing_token"], (before, after)
    assert after["protected_invalid_token"] == 0, after
    assert after["protected_admitted"] > before["protected_admitted"], (before, after)
    assert len(browser.visited) == 1


async def test_a_refused_sign_in_fails_the_request_with_a_clear_error(testkit) -> None:
    """The authorization server denies the sign-in (`error=access_denied` on the redirect) and the
    callback raises, as an application's does: the request that needed it (here the client's
    first, so `Client(...)` itself fails) is answered at once with the contract's error, kind
    `auth`, not run, the refusal in its reason; nothing hangs and no tool runs."""
    kit = testkit(mode="buffered", auth=True)
    kit.auth_approve(False)
    _storage, browser, auth = signed_in(kit)
    started = time.monotonic()
    raised: BaseException | None = None
    with anyio.fail_after(BOUND):
        try:
            async with Client(GuardedTransport(kit.url, auth=auth)) as client:
                await client.list_tools()
        except Exception as e:
            raised = e
    assert raised is not None, "the sign-in was refused, yet the client connected"
    errors = mcp_errors(raised)
    assert errors, f"not the transport's error: {raised!r}"
    for error in errors:
        assert error.code == UNAVAILABLE, error
        assert error.data["kind"] == "auth", error.data
        assert error.data["outcome"] == "not-run", error.data
        assert "sign-in" in error.data["reason"] and "access_denied" in error.data["reason"], error.data
    assert time.monotonic() - started < BOUND
    counts = auth_counts(kit)
    assert counts["authorizations_refused"] >= 1, counts
    assert counts["authorizations"] == counts["authorizations_refused"], counts
    assert counts["code_grants"] == 0 and counts["protected_admitted"] == 0, counts
    assert all("error=access_denied" in r for r in browser.redirects), browser.redirects
    assert kit.stats()["calls"] == 0


async def test_a_resume_whose_sign_in_is_refused_ends_the_call_typed(testkit) -> None:
    """The token runs out while the cut result waits for its resume (the server asks for 2.5 s),
    the refresh is refused (`invalid_grant`) and so is the sign-in that follows: the resume is
    never sent, and the call ends at once with the typed error (its answer is lost: the tool ran),
    the session and the transport intact."""
    kit = testkit(mode="buffered", proxy=True, auth=True, retry_ms=2_500)
    _storage, browser, auth = signed_in(kit)
    # `expires_in` 1: the client's clock says the token has run out 1 s after it was issued.
    kit.auth_ttl(1_999)
    kit.cut(300_000)
    error: MCPError | None = None

    async def refuse_once_cut() -> None:
        # The resume waits 2.5 s after the cut: refuse the refresh and the sign-in meanwhile.
        while await anyio.to_thread.run_sync(kit.cuts) == 0:
            await anyio.sleep(0.02)
        await anyio.to_thread.run_sync(kit.auth_refresh, False)
        await anyio.to_thread.run_sync(kit.auth_approve, False)

    with anyio.fail_after(BOUND):
        async with Client(GuardedTransport(kit.url, auth=auth)) as client, anyio.create_task_group() as tg:
            tg.start_soon(refuse_once_cut)
            try:
                with typed_errors():
                    await client.call_tool("big_result", {"size": 1 * MIB, "seed": 9})
            except MCPError as e:
                error = e
    assert isinstance(error, OutcomeUnknown), error
    assert error.data["kind"] == "auth", error.data
    assert error.data["outcome"] == "unknown", error.data
    assert "access_denied" in error.data["reason"], error.data
    assert kit.cuts() == 1
    counts = auth_counts(kit)
    assert counts["refreshes_rejected"] >= 1, counts
    # `authorizations` counts every visit of the browser: one sign-in, then refusals (the resume's,
    # and the session's `DELETE` on exit, which the SDK lets fail).
    assert counts["authorizations_refused"] >= 1, counts
    assert counts["authorizations"] - counts["authorizations_refused"] == 1, counts
    assert "code=" in browser.redirects[0] and "error=access_denied" in browser.redirects[1], browser.redirects
    stats = kit.stats()
    assert stats["calls"] == 1 and stats["resumes"] == 0, stats
