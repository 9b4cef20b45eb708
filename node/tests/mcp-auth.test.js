// `GuardedTransport` with the SDK's `authProvider` against the test kit's OAuth authorization server
// and protected endpoint (`ssegate-testkit serve --auth`): the SDK's own sign-in flow (the request
// fails with the SDK's `UnauthorizedError` after `redirectToAuthorization`; the kit's headless
// browser visits the URL; `finishAuth(code)` exchanges the code), then calls with the token, a
// token expired on the server refreshed by the SDK's `auth()` and the call sent once more, a
// refused refresh answered typed. The kit counts what reached it, so a request that got through
// without its token, or a sign-in that happened twice, cannot pass.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { Kit } = require("./kit.js");
const { GuardedTransport, typed, Unavailable, KIND, OUTCOME } = require("../mcp.js");

let sdk;
test.before(async () => {
  sdk = {
    ...(await import("@modelcontextprotocol/sdk/client/index.js")),
    ...(await import("@modelcontextprotocol/sdk/client/auth.js")),
  };
});

/** The SDK's `OAuthClientProvider`, kept in memory; the authorization URL is kept for the test. */
class Provider {
  constructor(redirectUri) {
    this.redirectUrl = redirectUri;
    this.clientMetadata = {
      client_name: "ssegate-node-tests",
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
    this.authorizationUrl = null;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(client) {
    this.client = client;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

async function signedIn(kit, provider) {
  // No token yet: the SDK's flow asks the user, and the request fails with UnauthorizedError.
  const first = new sdk.Client({ name: "t", version: "0" });
  const transport = new GuardedTransport(kit.url, { authProvider: provider });
  await assert.rejects(first.connect(transport), (error) => error instanceof sdk.UnauthorizedError);
  assert.ok(provider.authorizationUrl, "redirectToAuthorization was not called");
  const redirect = new URL((await kit.command(`authorize ${provider.authorizationUrl.href}`)).redirect);
  await transport.finishAuth(redirect.searchParams.get("code"));
  await first.close();
  const client = new sdk.Client({ name: "t", version: "0" });
  await client.connect(new GuardedTransport(kit.url, { authProvider: provider }));
  return client;
}

test("the SDK's sign-in flow, calls with the token, an expired token refreshed once", async () => {
  const kit = await Kit.start("buffered", { auth: true });
  try {
    const provider = new Provider("http://127.0.0.1:33999/callback");
    const client = await signedIn(kit, provider);
    const text = async () => (await client.callTool({ name: "big_result", arguments: { size: 50_000, seed: 4 } })).content[0].text;
    assert.ok((await text()) === (await kit.expectedText(50_000, 4)));
    let stats = (await kit.command("auth-stats")).auth;
    assert.equal(stats.authorizations, 1);
    assert.equal(stats.code_grants, 1);

    assert.ok((await kit.command("auth-expire")).expired >= 1);
    assert.ok((await text()) === (await kit.expectedText(50_000, 4)), "the call after the refresh");
    stats = await kit.command("auth-stats");
    assert.equal(stats.auth.refresh_grants, 1, JSON.stringify(stats));
    assert.equal(stats.auth.authorizations, 1, "no second sign-in");
    assert.equal(stats.protected.missing_token, 1, "only the first request went without a token");
    assert.equal((await kit.stats()).calls, 2, "each call ran once");

    // A refused refresh: the request is answered typed, not run.
    await kit.command("auth-refresh off");
    await kit.command("auth-expire");
    const error = await client.listTools().then(() => null, typed);
    assert.ok(error instanceof Unavailable, String(error));
    assert.equal(error.data.kind, KIND.AUTH);
    assert.equal(error.data.outcome, OUTCOME.NOT_RUN);
    assert.match(error.data.reason, /sign-in failed/);
    assert.equal((await kit.stats()).calls, 2, "nothing ran without a token");
    await client.close();
  } finally {
    await kit.stop();
  }
});
