//! What the bridge runs with, apart from how it was asked for: [`BridgeConfig`] is built from the
//! command line ([`BridgeArgs::config`]) or, in tests, by hand.

use std::time::Duration;

use ssegate::client::{CallOptions, ClientConfig};
use ssegate::contract;

use super::BridgeArgs;

/// The longest line read from the host by default: the client's event limit.
pub(crate) const DEFAULT_MAX_LINE: usize = contract::DEFAULT_MAX_EVENT;

/// The bridge's settings.
#[derive(Clone)]
pub(crate) struct BridgeConfig {
    /// The server's MCP endpoint (`http://` or `https://`).
    pub(crate) url: String,
    /// The guarded client's settings: headers, TLS, protocol, transport, sign-in, the call
    /// deadline; the client's name and capabilities are the host's once it declares them.
    pub(crate) client: ClientConfig,
    /// How each host request is called: retry policy, tasks, deadline.
    pub(crate) options: CallOptions,
    /// The deadline of each request, and of the host's answer to a server request.
    pub(crate) timeout: Duration,
    /// The longest line read from the host, in bytes.
    pub(crate) max_line: usize,
    /// Report the server's protocol and each call's outcome on stderr.
    pub(crate) verbose: bool,
    /// Tools hidden from the host (globs, any case).
    pub(crate) ignore_tools: Vec<String>,
    /// What a failed sign-in tells the user to do.
    pub(crate) sign_in_hint: String,
}

impl BridgeConfig {
    /// A bridge to `url` with the defaults of `ssegate bridge URL` (no sign-in).
    #[cfg(test)]
    pub(crate) fn new(url: &str) -> BridgeConfig {
        let timeout = contract::DEFAULT_CALL_TIMEOUT;
        let mut client = ClientConfig::default();
        client
            .call_timeout(Some(timeout))
            .client_name("ssegate-bridge");
        let mut options = CallOptions::default();
        options.timeout(timeout);
        BridgeConfig {
            url: url.to_owned(),
            client,
            options,
            timeout,
            max_line: DEFAULT_MAX_LINE,
            verbose: false,
            ignore_tools: Vec::new(),
            sign_in_hint: format!("to sign in, run: ssegate auth login {url}"),
        }
    }
}

impl BridgeArgs {
    /// The settings these flags ask for; the error names the flag.
    pub(crate) fn config(&self) -> Result<BridgeConfig, String> {
        let url = &self.remote.url;
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(format!("URL {url:?}: not http(s)"));
        }
        let timeout = Duration::from_secs_f64(self.timeout);
        let mut client = self.remote.config()?;
        client
            .call_timeout(Some(timeout))
            .client_name("ssegate-bridge");
        crate::auth::configure(&mut client, &self.remote, &self.auth, "ssegate bridge")?;
        let mut options = CallOptions::default();
        options
            .retry(self.retry.into())
            .tasks(self.tasks.into())
            .timeout(timeout);
        Ok(BridgeConfig {
            url: url.clone(),
            client,
            options,
            timeout,
            max_line: self.max_line,
            verbose: self.verbose,
            ignore_tools: self.ignore_tools.clone(),
            sign_in_hint: crate::auth::hint(url, &self.auth),
        })
    }
}
