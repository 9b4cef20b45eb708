//! What the commands that speak to a live server (`probe`, `call`, `bridge`) parse alike.

use std::path::{Path, PathBuf};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use ssegate::client::{ClientConfig, Protocol, Retry, TaskMode};
use ssegate::contract::{INITIALIZE_VERSIONS, STATELESS_VERSIONS};

/// The server a command speaks to, and how: the URL, `--header`, `--cacert`, `--protocol`.
#[derive(clap::Args, Debug)]
pub(crate) struct Remote {
    /// The server's MCP endpoint (`http://` or `https://`).
    pub(crate) url: String,
    /// A header sent with every request, `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// A PEM file of certificates to trust besides the platform's roots.
    #[arg(long, value_name = "PEM")]
    pub(crate) cacert: Option<PathBuf>,
    /// The protocol spoken to the server: `auto` speaks 2026-07-28 when the server does
    /// (`server/discover`), else `initialize` offering 2025-11-25; a version speaks only that one.
    #[arg(long, value_name = "VERSION", default_value = "auto", value_parser = protocol_parser())]
    pub(crate) protocol: Protocol,
}

impl Remote {
    /// The client configuration these flags ask for; the error names the flag.
    pub(crate) fn config(&self) -> Result<ClientConfig, String> {
        let mut config = client_config(&self.headers, self.cacert.as_deref())?;
        config.protocol(self.protocol.clone());
        Ok(config)
    }
}

/// A client configuration with the `--header` values (`Name: value`, repeatable) and the `--cacert`
/// PEM file (certificates trusted besides the platform's roots); the error names the flag.
pub(crate) fn client_config(
    headers: &[String],
    cacert: Option<&Path>,
) -> Result<ClientConfig, String> {
    let mut client = ClientConfig::default();
    for h in headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("--header {h:?}: expected `Name: value`"))?;
        let name = name
            .trim()
            .parse()
            .map_err(|e| format!("--header {h:?}: {e}"))?;
        let value = value
            .trim()
            .parse()
            .map_err(|e| format!("--header {h:?}: {e}"))?;
        client.header(name, value);
    }
    if let Some(path) = cacert {
        let pem = std::fs::read(path).map_err(|e| format!("--cacert {}: {e}", path.display()))?;
        client.root_certificate_pem(&pem);
    }
    Ok(client)
}

/// A positive, finite number of seconds (fractions allowed), for `--timeout`.
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if secs.is_finite() && secs > 0.0 && secs < 1e9 {
        Ok(secs)
    } else {
        Err("expected a positive number of seconds".to_owned())
    }
}

/// `--retry`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RetryArg {
    Never,
    #[value(alias = "safe")]
    IfSafe,
    Always,
}

impl From<RetryArg> for Retry {
    fn from(r: RetryArg) -> Retry {
        match r {
            RetryArg::Never => Retry::Never,
            RetryArg::IfSafe => Retry::IfSafe,
            RetryArg::Always => Retry::Always,
        }
    }
}

/// `--tasks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TasksArg {
    Auto,
    Never,
    Require,
}

impl From<TasksArg> for TaskMode {
    fn from(t: TasksArg) -> TaskMode {
        match t {
            TasksArg::Auto => TaskMode::Auto,
            TasksArg::Never => TaskMode::Never,
            TasksArg::Require => TaskMode::Require,
        }
    }
}

/// `auto` or one of the versions the client speaks, as the library lists them.
pub(crate) fn protocol_parser() -> impl TypedValueParser<Value = Protocol> {
    let names = std::iter::once("auto")
        .chain(STATELESS_VERSIONS.iter().copied())
        .chain(INITIALIZE_VERSIONS.iter().copied());
    PossibleValuesParser::new(names)
        .map(|s| Protocol::parse(&s).expect("a possible value is a protocol"))
}
