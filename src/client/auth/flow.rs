//! The glue between the client's requests and rmcp's `AuthorizationManager`: the token a request
//! carries, and what a `401` or a `403 insufficient_scope` leads to (a refresh, a sign-in, a
//! step-up). One [`Endpoint`] per MCP endpoint holds the manager behind a tokio mutex, so the
//! requests of a client (and of the clients sharing one [`AuthConfig`]) sign in one at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use reqwest::Url;
use reqwest::header::{self, HeaderMap};
use rmcp::transport::auth::{
    AuthorizationCallback, AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig,
    OAuthClientConfig, WWWAuthenticateParams,
};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::http::{OAuthHttp, without_param};
use super::{
    AuthConfig, AuthFailure, CredentialRefreshGuard, CredentialStore, OAuthError, SignInError,
    StoredCredentials,
};
use crate::client::{ClientConfig, ClientError, transport::build_http};

/// Where ssegate keeps a dynamic registration's secret and redirect URI: a field of the stored
/// token response (rmcp's [`StoredCredentials`] has the client id only), so that a client
/// registered with a secret can still refresh its tokens after a restart.
pub(crate) const REGISTRATION_FIELD: &str = "ssegate_registration";

fn failure(f: AuthFailure) -> ClientError {
    ClientError::Auth(Box::new(f))
}

fn oauth(e: OAuthError) -> ClientError {
    failure(AuthFailure::OAuth(e))
}

fn sign_in_error(e: SignInError) -> ClientError {
    failure(AuthFailure::SignIn(e))
}

/// What a server's `401` or `403` asked for.
#[derive(Debug)]
pub(crate) struct Challenge {
    header: String,
    params: WWWAuthenticateParams,
    insufficient_scope: bool,
}

impl Challenge {
    /// The `Bearer` challenge of a `401`, or the `insufficient_scope` one of a `403`; `None` for
    /// any other answer (the caller reports it as it would without sign-in).
    pub(crate) fn of(status: u16, headers: &HeaderMap, url: &Url) -> Option<Challenge> {
        if !matches!(status, 401 | 403) {
            return None;
        }
        let header = headers
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| {
                v.trim_start()
                    .get(..6)
                    .is_some_and(|s| s.eq_ignore_ascii_case("bearer"))
            })?
            .to_owned();
        let params = WWWAuthenticateParams::parse(&header, url);
        let insufficient_scope = params.is_insufficient_scope();
        if status == 403 && !insufficient_scope {
            return None;
        }
        Some(Challenge {
            header,
            params,
            insufficient_scope: status == 403,
        })
    }

    fn describe(&self) -> String {
        match (&self.params.error, &self.params.error_description) {
            (Some(e), Some(d)) => format!("{e}: {d}"),
            (Some(e), None) => e.clone(),
            _ => self.header.clone(),
        }
    }
}

/// What one request has been through, so that it never loops.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    refreshed: bool,
    signed_in: bool,
    unauthorized: u32,
    step_ups: u32,
}

/// A dynamic registration (or the configured client), as remembered for refreshes and reuse.
#[derive(Clone, Debug, Default)]
struct Registration {
    client_id: String,
    client_secret: Option<String>,
    redirect_uri: Option<String>,
    issuer: Option<String>,
}

impl Registration {
    /// The registration stashed in `stored` by [`Store::save`], if any.
    fn stashed(stored: &StoredCredentials) -> Option<Registration> {
        let extra = stored.token_response.as_ref()?.extra_fields();
        let field = extra.0.get(REGISTRATION_FIELD)?;
        Some(Registration {
            client_id: stored.client_id.clone(),
            client_secret: field["client_secret"].as_str().map(str::to_owned),
            redirect_uri: field["redirect_uri"].as_str().map(str::to_owned),
            issuer: stored.issuer.clone(),
        })
    }
}

/// The application's store, seen through rmcp: every save keeps the current dynamic
/// registration's secret and redirect URI beside the tokens.
struct Store {
    inner: Arc<dyn CredentialStore>,
    registration: Arc<StdMutex<Option<Registration>>>,
}

#[async_trait::async_trait]
impl CredentialStore for Store {
    async fn load(&self) -> Result<Option<StoredCredentials>, OAuthError> {
        self.inner.load().await
    }

    async fn save(&self, mut credentials: StoredCredentials) -> Result<(), OAuthError> {
        let registration = self.registration.lock().expect("registration lock").clone();
        if let Some(r) = registration.filter(|r| r.client_id == credentials.client_id)
            && let Some(tokens) = credentials.token_response.as_mut()
        {
            let mut extra = tokens.extra_fields().clone();
            extra.0.insert(
                REGISTRATION_FIELD.to_owned(),
                json!({"client_secret": r.client_secret, "redirect_uri": r.redirect_uri}),
            );
            tokens.set_extra_fields(extra);
        }
        self.inner.save(credentials).await
    }

    async fn clear(&self) -> Result<(), OAuthError> {
        self.inner.clear().await
    }

    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), OAuthError> {
        self.inner.on_refresh_token_rejected(credentials).await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, OAuthError> {
        self.inner.acquire_refresh_guard().await
    }
}

/// What the clones of an [`AuthConfig`] share: one [`Endpoint`] per MCP endpoint URL.
#[derive(Default)]
pub(crate) struct Shared {
    endpoints: StdMutex<HashMap<String, Arc<Endpoint>>>,
}

impl Shared {
    pub(crate) fn endpoint(&self, url: &Url) -> Arc<Endpoint> {
        self.endpoints
            .lock()
            .expect("endpoints lock")
            .entry(url.as_str().to_owned())
            .or_default()
            .clone()
    }
}

/// One MCP endpoint's sign-in state. Its mutex is held across a refresh or a sign-in: concurrent
/// requests wait for it, then find the new token in the store.
#[derive(Default)]
pub(crate) struct Endpoint {
    state: tokio::sync::Mutex<State>,
    registration: Arc<StdMutex<Option<Registration>>>,
}

#[derive(Default)]
struct State {
    manager: Option<AuthorizationManager>,
    /// The authorization server's metadata, once discovered.
    metadata: Option<AuthorizationMetadata>,
    /// The metadata was synthesized (the 2025-03-26 default endpoints), not published.
    synthesized: bool,
    /// The manager's OAuth client is configured (a refresh can be made).
    configured: bool,
}

/// The settings a flow reads.
pub(crate) struct Context<'a> {
    pub(crate) auth: &'a AuthConfig,
    pub(crate) config: &'a ClientConfig,
    pub(crate) url: &'a Url,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The access token of `stored`, if any.
fn access_token(stored: &StoredCredentials) -> Option<String> {
    Some(
        stored
            .token_response
            .as_ref()?
            .access_token()
            .secret()
            .clone(),
    )
}

/// Seconds left before `stored`'s access token expires (`None`: unknown, taken as valid).
fn remaining(stored: &StoredCredentials) -> Option<u64> {
    let tokens = stored.token_response.as_ref()?;
    let expires_in = tokens.expires_in()?.as_secs();
    let received = stored.token_received_at?;
    Some(expires_in.saturating_sub(now().saturating_sub(received)))
}

/// Refreshed ahead when less than this is left (rmcp's rule: 30 s, or half the lifetime).
fn expiring(stored: &StoredCredentials) -> bool {
    let Some(left) = remaining(stored) else {
        return false;
    };
    let lifetime = stored
        .token_response
        .as_ref()
        .and_then(|t| t.expires_in())
        .map_or(0, |d| d.as_secs());
    left < 30u64.min(lifetime / 2).max(1)
}

fn has_refresh_token(stored: &StoredCredentials) -> bool {
    stored
        .token_response
        .as_ref()
        .is_some_and(|t| t.refresh_token().is_some())
}

/// Every scope of `more` not yet in `scopes`, in order.
fn union(scopes: &mut Vec<String>, more: impl IntoIterator<Item = String>) {
    for s in more {
        if !scopes.contains(&s) {
            scopes.push(s);
        }
    }
}

/// The value of query parameter `name` of `url`.
fn query_param(url: &str, name: &str) -> Option<String> {
    Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

impl Endpoint {
    async fn load(&self, cx: &Context<'_>) -> Result<Option<StoredCredentials>, ClientError> {
        cx.auth.store.load().await.map_err(oauth)
    }

    /// A token in the store that is not `sent` (another request or process signed in meanwhile)
    /// and has not expired.
    async fn newer_token(
        &self,
        cx: &Context<'_>,
        sent: Option<&str>,
    ) -> Result<Option<String>, ClientError> {
        let Some(stored) = self.load(cx).await? else {
            return Ok(None);
        };
        let token = access_token(&stored).filter(|t| Some(t.as_str()) != sent);
        Ok(token.filter(|_| remaining(&stored) != Some(0)))
    }

    async fn manager<'s>(
        &self,
        state: &'s mut State,
        cx: &Context<'_>,
    ) -> Result<&'s mut AuthorizationManager, ClientError> {
        if state.manager.is_none() {
            let http = Arc::new(OAuthHttp {
                http: build_http(cx.config)?,
                send_resource: cx.auth.send_resource,
            });
            let mut manager =
                AuthorizationManager::new_with_oauth_http_client(cx.url.clone(), http)
                    .await
                    .map_err(oauth)?;
            manager.set_credential_store(Store {
                inner: cx.auth.store.clone(),
                registration: self.registration.clone(),
            });
            state.manager = Some(manager);
        }
        Ok(state.manager.as_mut().expect("just set"))
    }

    /// Discovers the authorization server (from `challenge` when given, else by probing the
    /// endpoint and the well-known locations) and hands its metadata to the manager.
    async fn discover(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        challenge: Option<&str>,
    ) -> Result<AuthorizationMetadata, ClientError> {
        let manager = self.manager(state, cx).await?;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge)
            .await
            .map_err(oauth)?;
        debug!(source = ?resolution.source, issuer = ?resolution.metadata.issuer, "authorization server found");
        manager.set_metadata(resolution.metadata.clone());
        state.metadata = Some(resolution.metadata.clone());
        state.synthesized = !resolution.source.is_discovered();
        Ok(resolution.metadata)
    }

    /// Configures the manager's OAuth client from the stored credentials (for a refresh): the
    /// configured client, or the stored registration with its stashed secret. `false` when the
    /// credentials came from another authorization server.
    fn configure_from_store(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        stored: &StoredCredentials,
        metadata: &AuthorizationMetadata,
    ) -> Result<bool, ClientError> {
        if let (Some(was), Some(is)) = (&stored.issuer, &metadata.issuer)
            && was != is
        {
            warn!(
                was,
                is, "the authorization server changed: a new sign-in is needed"
            );
            return Ok(false);
        }
        let secret = if cx.auth.client_id.as_deref() == Some(stored.client_id.as_str()) {
            cx.auth.client_secret.clone()
        } else {
            let stashed = Registration::stashed(stored);
            let secret = stashed.as_ref().and_then(|r| r.client_secret.clone());
            if stashed.is_some() {
                *self.registration.lock().expect("registration lock") = stashed;
            }
            secret
        };
        let mut client = OAuthClientConfig::new(stored.client_id.clone(), cx.url.as_str());
        if let Some(secret) = secret {
            client = client.with_client_secret(secret);
        }
        let manager = state.manager.as_mut().expect("discovered");
        manager.configure_client(client).map_err(oauth)?;
        state.configured = true;
        Ok(true)
    }

    /// The token to send with a request: the stored one, refreshed first when it is about to
    /// expire and a refresh token exists (`None`: none, or none that is still usable).
    pub(crate) async fn token(&self, cx: &Context<'_>) -> Result<Option<String>, ClientError> {
        let mut state = self.state.lock().await;
        let Some(stored) = self.load(cx).await? else {
            return Ok(None);
        };
        let Some(token) = access_token(&stored) else {
            return Ok(None);
        };
        if !expiring(&stored) {
            return Ok(Some(token));
        }
        if !has_refresh_token(&stored) {
            return Ok((remaining(&stored) != Some(0)).then_some(token));
        }
        if !state.configured {
            let configured = match self.discover(&mut state, cx, None).await {
                Ok(metadata) => self.configure_from_store(&mut state, cx, &stored, &metadata)?,
                Err(e) => {
                    debug!(%e, "no refresh ahead of expiry: discovery failed");
                    false
                }
            };
            if !configured {
                return Ok(Some(token));
            }
        }
        let manager = state.manager.as_ref().expect("configured");
        match manager.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(OAuthError::AuthorizationRequired) => Ok(None),
            Err(e) => {
                debug!(%e, "the refresh ahead of expiry failed; the stored token is sent");
                Ok(Some(token))
            }
        }
    }

    /// A new token after `challenge` answered a request that carried `sent`: one refresh (when a
    /// token was sent), else or then a sign-in, a step-up for `insufficient_scope`, within the
    /// limits of `rounds`.
    pub(crate) async fn answer(
        &self,
        cx: &Context<'_>,
        challenge: &Challenge,
        sent: Option<&str>,
        rounds: &mut Rounds,
    ) -> Result<String, ClientError> {
        if challenge.insufficient_scope {
            if rounds.step_ups >= cx.auth.max_step_ups {
                return Err(failure(AuthFailure::InsufficientScope {
                    scope: challenge.params.scope.clone(),
                    attempts: rounds.step_ups,
                }));
            }
            rounds.step_ups += 1;
        } else {
            rounds.unauthorized += 1;
            if rounds.signed_in || rounds.unauthorized > 3 {
                return Err(failure(AuthFailure::Rejected {
                    challenge: challenge.describe(),
                }));
            }
        }
        let mut state = self.state.lock().await;
        if let Some(token) = self.newer_token(cx, sent).await? {
            debug!("a token stored meanwhile is used");
            return Ok(token);
        }
        if !challenge.insufficient_scope && sent.is_some() && !rounds.refreshed {
            rounds.refreshed = true;
            match self.refresh(&mut state, cx, challenge).await {
                Ok(Some(token)) => return Ok(token),
                Ok(None) => {}
                Err(e) => debug!(%e, "the refresh failed: signing in"),
            }
        }
        let token = self.sign_in(&mut state, cx, challenge, sent).await?;
        rounds.signed_in = true;
        Ok(token)
    }

    /// A refresh after a `401`: `None` when there is nothing to refresh with or the
    /// authorization server changed.
    async fn refresh(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        challenge: &Challenge,
    ) -> Result<Option<String>, ClientError> {
        let Some(stored) = self.load(cx).await?.filter(has_refresh_token) else {
            return Ok(None);
        };
        // The challenge may name another authorization server than the one the tokens came from.
        let metadata = self.discover(state, cx, Some(&challenge.header)).await?;
        if !self.configure_from_store(state, cx, &stored, &metadata)? {
            return Ok(None);
        }
        let manager = state.manager.as_ref().expect("configured");
        let tokens = manager.refresh_token().await.map_err(oauth)?;
        debug!("refreshed after a 401");
        Ok(Some(tokens.access_token().secret().clone()))
    }

    async fn sign_in(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        challenge: &Challenge,
        sent: Option<&str>,
    ) -> Result<String, ClientError> {
        let auth = cx.auth;
        if auth.sign_in.is_none() && !auth.client_credentials {
            return Err(failure(AuthFailure::SignInRequired {
                resource: cx.url.to_string(),
            }));
        }
        let metadata = self.discover(state, cx, Some(&challenge.header)).await?;
        // Held until the tokens are stored: another process signing in to the same server waits,
        // then finds its tokens below.
        let _exclusive = match &auth.sign_in {
            Some(sign_in) => sign_in.exclusive().await.map_err(sign_in_error)?,
            None => None,
        };
        if let Some(token) = self.newer_token(cx, sent).await? {
            debug!("another process signed in meanwhile");
            return Ok(token);
        }
        let stored = self.load(cx).await?;
        let scopes = self
            .scopes(state, cx, challenge, stored.as_ref(), &metadata)
            .await;
        if auth.client_credentials {
            return self.client_credentials(state, cx, scopes).await;
        }
        let sign_in = auth.sign_in.as_ref().expect("checked above");
        // MCP authorization: PKCE S256, and a server whose metadata does not list it (or lists no
        // methods at all) is refused before the user is asked. rmcp refuses only a list without
        // S256. The 2025-03-26 default endpoints (no metadata published) have no list to read:
        // S256 is sent, as that revision asks.
        let s256 = metadata
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|methods| methods.iter().any(|m| m == "S256"));
        if !s256 && !state.synthesized {
            return Err(oauth(OAuthError::PkceUnsupported));
        }
        let redirect_uri = sign_in.redirect_uri().await.map_err(sign_in_error)?;
        self.choose_client(
            state,
            cx,
            &redirect_uri,
            &scopes,
            stored.as_ref(),
            &metadata,
        )
        .await?;
        let manager = state.manager.as_mut().expect("discovered");
        let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let mut url = manager.get_authorization_url(&refs).await.map_err(oauth)?;
        if !auth.send_resource
            && let Ok(mut parsed) = Url::parse(&url)
        {
            let query = without_param(parsed.query().unwrap_or(""), "resource");
            parsed.set_query(Some(&query));
            url = parsed.to_string();
        }
        let expected_state = query_param(&url, "state");
        debug!(?scopes, "signing in");
        let callback = tokio::time::timeout(auth.sign_in_timeout, sign_in.authorize(&url))
            .await
            .map_err(|_| sign_in_error(SignInError::Timeout(auth.sign_in_timeout)))?
            .map_err(sign_in_error)?;
        let parsed = Url::parse(&callback).map_err(|e| {
            sign_in_error(SignInError::Other(format!(
                "the sign-in came back to an address that is not a URL: {e}"
            )))
        })?;
        let param = |name: &str| {
            parsed
                .query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        if let Some(error) = param("error") {
            let why = match param("error_description") {
                Some(d) => format!("{error}: {d}"),
                None => error,
            };
            return Err(sign_in_error(SignInError::Refused(why)));
        }
        let callback = AuthorizationCallback::from_redirect_url(&callback).map_err(oauth)?;
        if expected_state.as_deref() != Some(callback.csrf_token.as_str()) {
            return Err(oauth(OAuthError::AuthorizationFailed(
                "the authorization server's redirect carries another sign-in's state".to_owned(),
            )));
        }
        let tokens = manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(oauth)?;
        state.configured = true;
        Ok(tokens.access_token().secret().clone())
    }

    /// The scopes to ask for: the configured ones, else the challenge's, else the protected
    /// resource metadata's (`offline_access` added where the authorization server offers it);
    /// a step-up adds the scopes already granted and the challenged ones.
    async fn scopes(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        challenge: &Challenge,
        stored: Option<&StoredCredentials>,
        metadata: &AuthorizationMetadata,
    ) -> Vec<String> {
        let manager = state.manager.as_ref().expect("discovered");
        let mut scopes = if !cx.auth.scopes.is_empty() {
            cx.auth.scopes.clone()
        } else if challenge.insufficient_scope {
            Vec::new()
        } else {
            manager.select_initial_scopes(&[]).await
        };
        if challenge.insufficient_scope {
            if let Some(stored) = stored {
                union(&mut scopes, stored.granted_scopes.iter().cloned());
            }
            union(&mut scopes, manager.get_current_scopes().await);
            if let Some(scope) = &challenge.params.scope {
                union(&mut scopes, scope.split_whitespace().map(str::to_owned));
            }
        }
        let offline = metadata
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if offline && !scopes.is_empty() {
            union(&mut scopes, ["offline_access".to_owned()]);
        }
        scopes
    }

    /// Configures the OAuth client for an authorization code sign-in, in the specification's
    /// order: the configured client, a Client ID Metadata Document where the authorization server
    /// accepts them, the registration made earlier with this server and redirect URI, a dynamic
    /// registration.
    async fn choose_client(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        redirect_uri: &str,
        scopes: &[String],
        stored: Option<&StoredCredentials>,
        metadata: &AuthorizationMetadata,
    ) -> Result<(), ClientError> {
        let auth = cx.auth;
        let manager = state.manager.as_mut().expect("discovered");
        if let Some(id) = &auth.client_id {
            let mut client = OAuthClientConfig::new(id.clone(), redirect_uri);
            if let Some(secret) = &auth.client_secret {
                client = client.with_client_secret(secret.clone());
            }
            *self.registration.lock().expect("registration lock") = None;
            return manager.configure_client(client).map_err(oauth);
        }
        let cimd = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(url) = auth.client_metadata_url.as_ref().filter(|_| cimd) {
            *self.registration.lock().expect("registration lock") = None;
            return manager
                .configure_client(OAuthClientConfig::new(url.clone(), redirect_uri))
                .map_err(oauth);
        }
        let known = self
            .registration
            .lock()
            .expect("registration lock")
            .clone()
            .or_else(|| stored.and_then(Registration::stashed));
        if let Some(r) = known.filter(|r| {
            r.issuer == metadata.issuer && r.redirect_uri.as_deref() == Some(redirect_uri)
        }) {
            debug!(client_id = r.client_id, "the earlier registration is used");
            let mut client = OAuthClientConfig::new(r.client_id.clone(), redirect_uri);
            if let Some(secret) = &r.client_secret {
                client = client.with_client_secret(secret.clone());
            }
            *self.registration.lock().expect("registration lock") = Some(r);
            return manager.configure_client(client).map_err(oauth);
        }
        let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let client = manager
            .register_client(&auth.client_name, redirect_uri, &refs)
            .await
            .map_err(oauth)?;
        debug!(client_id = client.client_id, "registered");
        *self.registration.lock().expect("registration lock") = Some(Registration {
            client_id: client.client_id,
            client_secret: client.client_secret,
            redirect_uri: Some(redirect_uri.to_owned()),
            issuer: metadata.issuer.clone(),
        });
        Ok(())
    }

    /// The client-credentials grant with the configured client (no user).
    async fn client_credentials(
        &self,
        state: &mut State,
        cx: &Context<'_>,
        scopes: Vec<String>,
    ) -> Result<String, ClientError> {
        let (Some(client_id), Some(client_secret)) = (&cx.auth.client_id, &cx.auth.client_secret)
        else {
            return Err(oauth(OAuthError::ClientCredentialsError(
                "the client-credentials grant needs AuthConfig::client with a secret".to_owned(),
            )));
        };
        let grant = ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            scopes,
            resource: Some(cx.url.to_string()),
        };
        *self.registration.lock().expect("registration lock") = None;
        let manager = state.manager.as_mut().expect("discovered");
        manager
            .validate_client_credentials_metadata(&grant)
            .map_err(oauth)?;
        manager
            .configure_client_credentials(&grant)
            .map_err(oauth)?;
        let tokens = manager
            .exchange_client_credentials(&grant)
            .await
            .map_err(oauth)?;
        state.configured = true;
        Ok(tokens.access_token().secret().clone())
    }
}
