//! The server's side: the guarded client, connected when the host first needs it (with the host's
//! capabilities), the server's own stream of notifications, and the [`Handler`] that relays what
//! the server sends to the host.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use ssegate::client::{
    CallOptions, Client, ClientConfig, ClientError, Handler, HandlerFuture, RpcError,
};
use ssegate::contract::{data, jsonrpc, meta, method as methods};
use ssegate::message::{Message, RpcKind};

use tokio::sync::mpsc;

use super::errors::Error;
use super::subscriptions::{Route, tagged};
use super::{Bridge, BridgeConfig, Event, note};

/// The `_meta` keys a 2026-07-28 host stamps on each request; the bridge's client stamps its own.
const HOST_META: [&str; 3] = meta::CLIENT_KEYS;

/// The longest wait between two attempts at the server's notification stream.
const MAX_LISTEN_DELAY: Duration = Duration::from_secs(30);

/// What the host said of itself, declared to the server as the client's own.
#[derive(Default)]
struct HostInfo {
    capabilities: Option<Value>,
    info: Option<Value>,
}

pub(super) struct Upstream {
    url: String,
    config: ClientConfig,
    options: CallOptions,
    timeout: Duration,
    verbose: bool,
    client: tokio::sync::Mutex<Option<Client>>,
    /// Connect attempts ended, and the last failed sign-in: requests that waited for an attempt
    /// share its failed sign-in (the user is asked once per wave of requests, not once each).
    connects: Mutex<Connects>,
    /// What a failed sign-in tells the user to do.
    sign_in_hint: String,
    host: Mutex<HostInfo>,
    /// The bridge the server's messages go to, and its relay's loop (for server requests).
    bridge: OnceLock<(Weak<Bridge>, mpsc::UnboundedSender<Event>)>,
}

/// What [`Upstream::connects`] counts.
#[derive(Default)]
struct Connects {
    /// Connect attempts ended.
    ended: u64,
    /// The number of the attempt whose sign-in failed last, and the error it answered with.
    failed_sign_in: Option<(u64, Error)>,
}

impl Upstream {
    /// The server's side of a bridge with `config`; connected when first needed.
    pub(super) fn new(config: BridgeConfig) -> Upstream {
        Upstream {
            url: config.url,
            config: config.client,
            options: config.options,
            timeout: config.timeout,
            verbose: config.verbose,
            client: tokio::sync::Mutex::new(None),
            connects: Mutex::new(Connects::default()),
            sign_in_hint: config.sign_in_hint,
            host: Mutex::new(HostInfo::default()),
            bridge: OnceLock::new(),
        }
    }

    /// Where the server's notifications and requests go.
    pub(super) fn attach(&self, bridge: Weak<Bridge>, events: mpsc::UnboundedSender<Event>) {
        let _ = self.bridge.set((bridge, events));
    }

    /// Learns the host's capabilities and name from its `initialize`, or from the `_meta` of a
    /// 2026-07-28 host's request.
    pub(super) fn learn_host(&self, method: &str, params: &Value) {
        let mut host = self.host.lock().expect("host lock");
        if method == methods::INITIALIZE {
            host.capabilities = params.get("capabilities").cloned();
            host.info = params.get("clientInfo").cloned();
        } else if host.capabilities.is_none() {
            let stamped = &params["_meta"];
            host.capabilities = stamped.get(meta::CLIENT_CAPABILITIES).cloned();
            host.info = stamped.get(meta::CLIENT_INFO).cloned();
        }
    }

    /// The error answering `method` that failed with `e`; a failed sign-in says how to sign in.
    fn error(&self, method: &str, e: &ClientError) -> Error {
        let mut error = Error::of_client(method, e);
        if matches!(e, ClientError::Auth(_)) {
            error.data[data::REASON] = json!(format!("{e}; {}", self.sign_in_hint));
        }
        error
    }

    /// The connected client; connects first if it is not (or the last attempt failed). A request
    /// that waited while an attempt failed to sign in (the user refused, or did not come back in
    /// time) gets that attempt's error; a later one tries again.
    pub(super) async fn client(&self) -> Result<Client, Error> {
        let seen = self.connects.lock().expect("connects lock").ended;
        let mut slot = self.client.lock().await;
        if let Some(client) = &*slot {
            return Ok(client.clone());
        }
        if let Some((n, e)) = &self.connects.lock().expect("connects lock").failed_sign_in
            && *n > seen
        {
            return Err(e.clone());
        }
        let mut config = self.config.clone();
        {
            let host = self.host.lock().expect("host lock");
            if let Some(caps) = host.capabilities.clone().filter(Value::is_object) {
                config.capabilities(caps);
            }
            if let Some(info) = &host.info {
                if let Some(name) = info["name"].as_str() {
                    config.client_name(name);
                }
                if let Some(version) = info["version"].as_str() {
                    config.client_version(version);
                }
            }
        }
        let (bridge, events) = match self.bridge.get() {
            Some((bridge, events)) => (bridge.clone(), Some(events.clone())),
            None => (Weak::new(), None),
        };
        config.handler(Arc::new(Forward {
            bridge,
            events,
            timeout: self.timeout,
        }));
        let connected = Client::connect(&self.url, config).await;
        let client = {
            let mut connects = self.connects.lock().expect("connects lock");
            connects.ended += 1;
            match connected {
                Ok(client) => client,
                Err(e) => {
                    let error = self.error(methods::INITIALIZE, &e);
                    if matches!(e, ClientError::Auth(_)) {
                        connects.failed_sign_in = Some((connects.ended, error.clone()));
                    }
                    return Err(error);
                }
            }
        };
        if self.verbose {
            note(&format!(
                "connected to {}: protocol {}{}",
                self.url,
                client.protocol_version().unwrap_or_default(),
                match client.session_id() {
                    Some(id) => format!(", session {id}"),
                    None if client.is_stateless() => " (stateless)".to_owned(),
                    None if client.is_legacy_sse() => " (HTTP+SSE)".to_owned(),
                    None => " (sessionless)".to_owned(),
                }
            ));
        }
        tokio::spawn(listen(client.clone(), self.verbose));
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Whether the server is spoken to on 2026-07-28 (no: not connected yet, or a 2025 session).
    pub(super) async fn is_stateless(&self) -> bool {
        self.client
            .lock()
            .await
            .as_ref()
            .is_some_and(Client::is_stateless)
    }

    /// One guarded call.
    pub(super) async fn call(&self, method: &str, params: Value) -> Result<Message, Error> {
        let client = self.client().await?;
        client
            .call_with(method, params, &self.options)
            .await
            .map(|response| response.message)
            .map_err(|e| self.error(method, &e))
    }

    /// A host notification for the server: sent on a session; a 2026-07-28 server has no
    /// session to notify.
    pub(super) async fn notify(&self, note_: &Value) {
        let method = note_["method"].as_str().unwrap_or_default().to_owned();
        let client = self.client.lock().await.clone();
        let Some(client) = client else {
            note(&format!("{method} before the server was reached: dropped"));
            return;
        };
        if client.is_stateless() {
            if self.verbose {
                note(&format!(
                    "{method}: a 2026-07-28 server takes no notifications; dropped"
                ));
            }
            return;
        }
        match tokio::time::timeout(self.timeout, client.post_raw(note_)).await {
            Ok(Ok(res)) if res.status().is_success() => {}
            Ok(Ok(res)) => note(&format!("{method}: the server answered {}", res.status())),
            Ok(Err(e)) => note(&format!("{method}: {e}")),
            Err(_) => note(&format!("{method}: no answer in time")),
        }
    }

    /// Ends the session (`DELETE`) within `deadline`.
    pub(super) async fn close(&self, deadline: Duration) {
        let client = self.client.lock().await.take();
        if let Some(client) = client {
            match tokio::time::timeout(deadline, client.close()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => note(&format!("could not end the session: {e}")),
                Err(_) => note("could not end the session in time"),
            }
        }
    }
}

/// Drops the `_meta` keys a 2026-07-28 host stamps: the server hears the bridge's client.
pub(super) fn strip_host_meta(params: &mut Value) {
    let Some(stamped) = params.get_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    for key in HOST_META {
        stamped.remove(key);
    }
    if stamped.is_empty()
        && let Some(obj) = params.as_object_mut()
    {
        obj.remove("_meta");
    }
}

/// The server's `serverInfo` (`initialize`), or its `_meta` stamp (2026-07-28 `server/discover`),
/// or the bridge's when it gave none.
pub(super) fn server_info(declared: &Value) -> Value {
    // A 2026-07-28 discover result has no `serverInfo` member: its `_meta` carries it.
    let stamped = &declared["_meta"][meta::SERVER_INFO];
    match declared.get("serverInfo") {
        Some(info) if info.is_object() => info.clone(),
        _ if stamped.is_object() => stamped.clone(),
        _ => json!({"name": "ssegate-bridge", "version": env!("CARGO_PKG_VERSION")}),
    }
}

/// Keeps the server's own notification stream open (the `GET` stream, or on 2026-07-28
/// `subscriptions/listen`): what arrives there reaches the host through [`Forward`]. A server
/// without one (`405`) is not asked again; an ended or failed stream is opened again after a
/// growing delay.
async fn listen(client: Client, verbose: bool) {
    let mut delay = Duration::from_secs(1);
    loop {
        match client.listen().await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(_) => delay = Duration::from_secs(1),
                        Err(failure) if verbose => {
                            note(&format!("the server's notification stream: {failure}"));
                        }
                        Err(_) => {}
                    }
                }
            }
            Err(ClientError::Status { status: 405, .. }) => {
                if verbose {
                    note("the server offers no notification stream (405)");
                }
                return;
            }
            Err(e) if verbose => note(&format!("the server's notification stream: {e}")),
            Err(_) => {}
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_LISTEN_DELAY);
    }
}

/// The client's [`Handler`]: server requests are asked of the host through the relay's loop
/// (`ping` is answered here), server notifications written to it.
struct Forward {
    bridge: Weak<Bridge>,
    events: Option<mpsc::UnboundedSender<Event>>,
    /// How long the host has to answer a server request.
    timeout: Duration,
}

impl Handler for Forward {
    fn request(&self, method: &str, params: Option<&Value>) -> HandlerFuture {
        let events = self.events.clone();
        let timeout = self.timeout;
        let method = method.to_owned();
        let params = params.cloned();
        Box::pin(async move {
            let stopping =
                || RpcError::new(jsonrpc::INTERNAL_ERROR.into(), "the bridge is stopping");
            if method == "ping" {
                return Ok(json!({}));
            }
            let (reply, answer) = tokio::sync::oneshot::channel();
            let asked = Event::Ask {
                method: method.clone(),
                params,
                reply,
            };
            if events.is_none_or(|events| events.send(asked).is_err()) {
                return Err(stopping());
            }
            match tokio::time::timeout(timeout, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(stopping()),
                Err(_) => Err(RpcError::new(
                    jsonrpc::REQUEST_TIMEOUT.into(),
                    format!(
                        "the host did not answer {method} within {} s",
                        timeout.as_secs_f64()
                    ),
                )),
            }
        })
    }

    fn notification(&self, message: &Message) {
        let Some(bridge) = self.bridge.upgrade() else {
            return;
        };
        let peek = message.jsonrpc_peek();
        match peek.kind {
            RpcKind::Notification => {
                #[derive(serde::Deserialize)]
                struct Head {
                    method: String,
                }
                let method = message
                    .deserialize::<Head>()
                    .map(|h| h.method)
                    .unwrap_or_default();
                let host_2026 = bridge.host_2026.load(Ordering::Relaxed);
                match bridge.subscriptions.route(&method, host_2026) {
                    Route::AsIs => bridge.out.send(message.data().segments().to_vec()),
                    Route::Drop => {}
                    Route::Tagged(ids) => {
                        let Ok(value) = message.deserialize::<Value>() else {
                            return;
                        };
                        for id in ids {
                            bridge.out.value(&tagged(value.clone(), id));
                        }
                    }
                }
            }
            RpcKind::Response => note(&format!(
                "a response for {}, which the host never asked: dropped",
                peek.id.map(|id| id.to_string()).unwrap_or_default()
            )),
            // A server request on a 2026-07-28 stream: servers ask for input in results there.
            _ => note("a server message that is no notification, outside any call: dropped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_info_is_read_from_initialize_or_the_2026_07_28_meta_stamp() {
        let info = json!({"name": "s", "version": "1"});
        assert_eq!(server_info(&json!({"serverInfo": info})), info);
        let discovered =
            json!({"supportedVersions": ["2026-07-28"], "_meta": {meta::SERVER_INFO: info}});
        assert_eq!(server_info(&discovered), info);
        assert_eq!(server_info(&json!({}))["name"], "ssegate-bridge");
    }
}
