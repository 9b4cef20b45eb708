//! What the commands that speak to a live server (`probe`, `call`, `bridge`) parse alike.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use ssegate::client::{ClientConfig, Protocol, Retry, TaskMode, TransportStrategy};
use ssegate::contract::{INITIALIZE_VERSIONS, STATELESS_VERSIONS};

pub(crate) use crate::connection::{Connection, check_http, collect_headers, env_var};

/// The server a command speaks to, and how: the URL, `--header`, `--cacert`, `--protocol`.
#[derive(clap::Args, Debug)]
pub(crate) struct Remote {
    /// The server's MCP endpoint (`http://` or `https://`).
    pub(crate) url: String,
    /// A header sent with every request, `Name: value` (repeatable); `${VAR}` in the value is the
    /// environment variable's value (unset or empty: an error), `$${` a literal `${`.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub(crate) headers: Vec<String>,
    /// A PEM file of certificates to trust besides the platform's roots.
    #[arg(long, value_name = "PEM")]
    pub(crate) cacert: Option<PathBuf>,
    /// `--header-file`, `--allow-http`, `--connect-timeout`.
    #[command(flatten)]
    pub(crate) connection: Connection,
    /// The protocol spoken to the server: `auto` speaks 2026-07-28 when the server does
    /// (`server/discover`), else `initialize` offering 2025-11-25; a version speaks only that one.
    #[arg(long, value_name = "VERSION", default_value = "auto", value_parser = protocol_parser())]
    pub(crate) protocol: Protocol,
    /// The HTTP transport: `http-first` speaks Streamable HTTP and, when the URL answers
    /// `initialize` with 400, 404 or 405, the 2024-11-05 HTTP+SSE transport (an event stream from
    /// GET whose `endpoint` event names where messages are POSTed); `sse-first` the other way
    /// round (Streamable HTTP when the GET is answered 400, 404, 405 or with no event stream);
    /// `http-only` and `sse-only` never try the other.
    #[arg(long, value_name = "STRATEGY", default_value = TransportStrategy::default().as_str(),
          value_parser = transport_parser())]
    pub(crate) transport: TransportStrategy,
}

impl Remote {
    /// The client configuration these flags ask for; the error names the flag.
    pub(crate) fn config(&self) -> Result<ClientConfig, String> {
        let mut config = client_config(
            &self.url,
            &self.headers,
            self.cacert.as_deref(),
            &self.connection,
        )?;
        config.protocol(self.protocol.clone());
        config.transport(self.transport);
        Ok(config)
    }
}

/// A client configuration for `url` with the `--header` values (`Name: value`, repeatable), the
/// `--header-file` lines, the `--cacert` PEM file (certificates trusted besides the platform's
/// roots) and the `--connect-timeout`; plain `http://` only to a loopback host unless
/// `--allow-http`. The error names the flag.
pub(crate) fn client_config(
    url: &str,
    headers: &[String],
    cacert: Option<&Path>,
    connection: &Connection,
) -> Result<ClientConfig, String> {
    check_http(url, connection.allow_http)?;
    let mut client = ClientConfig::default();
    for (name, value) in collect_headers(headers, connection.header_file.as_deref(), &env_var)? {
        client.header(name, value);
    }
    if let Some(path) = cacert {
        let pem = std::fs::read(path).map_err(|e| format!("--cacert {}: {e}", path.display()))?;
        client.root_certificate_pem(&pem);
    }
    client.connect_timeout(Duration::from_secs_f64(connection.connect_timeout));
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

/// The transport strategies, as the library words them.
pub(crate) fn transport_parser() -> impl TypedValueParser<Value = TransportStrategy> {
    PossibleValuesParser::new(TransportStrategy::ALL.map(TransportStrategy::as_str))
        .map(|s| TransportStrategy::parse(&s).expect("a possible value is a strategy"))
}

/// How long a sign-in waits for the user by default, in seconds: the contract's.
pub(crate) const DEFAULT_AUTH_TIMEOUT_SECS: f64 =
    ssegate::contract::DEFAULT_SIGN_IN_TIMEOUT.as_secs_f64();

/// How the commands that speak to a live server (`bridge`, `call`, `auth login`) sign in, when the
/// server asks for it (`401`): OAuth 2.1 with PKCE in the browser, the tokens kept per user for
/// the next start (`ssegate auth status`).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct AuthFlags {
    /// A client registered ahead with the server's authorization server (default: ssegate
    /// registers itself where the server allows it). Kept with the tokens: later starts need not
    /// repeat it.
    #[arg(long, value_name = "ID", help_heading = "Sign-in")]
    pub(crate) client_id: Option<String>,
    /// The --client-id's secret (it shows in the process list: prefer --client-secret-env).
    #[arg(
        long,
        value_name = "SECRET",
        requires = "client_id",
        conflicts_with = "client_secret_env",
        help_heading = "Sign-in"
    )]
    pub(crate) client_secret: Option<String>,
    /// The environment variable that holds the --client-id's secret.
    #[arg(
        long,
        value_name = "NAME",
        requires = "client_id",
        help_heading = "Sign-in"
    )]
    pub(crate) client_secret_env: Option<String>,
    /// A scope to ask for (repeatable; default: what the server's challenge or metadata names).
    #[arg(long = "scope", value_name = "SCOPE", help_heading = "Sign-in")]
    pub(crate) scopes: Vec<String>,
    /// The loopback port the sign-in's redirect comes back to (default: one fixed per server in
    /// 33400-33999, the next free one when it is in use).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..),
          help_heading = "Sign-in")]
    pub(crate) callback_port: Option<u16>,
    /// Leave out the RFC 8707 `resource` parameter (for authorization servers that reject it).
    #[arg(long, help_heading = "Sign-in")]
    pub(crate) no_resource: bool,
    /// How long a sign-in waits for the user, in seconds; then the requests waiting for it fail
    /// (kind `auth`).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_AUTH_TIMEOUT_SECS,
          value_parser = seconds, help_heading = "Sign-in")]
    pub(crate) auth_timeout: f64,
    /// Sign in as a machine: the client-credentials grant with --client-id and its secret, no
    /// browser.
    #[arg(long, help_heading = "Sign-in")]
    pub(crate) client_credentials: bool,
    /// Never sign in: a server that asks for a token (`401`) is an error (a token given with
    /// `--header 'Authorization: Bearer ...'` is sent as it is, with or without this flag).
    #[arg(long, help_heading = "Sign-in", conflicts_with_all = [
        "client_id", "client_secret", "client_secret_env", "scopes", "callback_port",
        "no_resource", "client_credentials",
    ])]
    pub(crate) no_auth: bool,
}

impl AuthFlags {
    /// The client secret, from --client-secret or the variable --client-secret-env names.
    pub(crate) fn client_secret(&self) -> Result<Option<String>, String> {
        if let Some(secret) = &self.client_secret {
            return Ok(Some(secret.clone()));
        }
        let Some(name) = &self.client_secret_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(secret) if !secret.is_empty() => Ok(Some(secret)),
            Ok(_) => Err(format!("--client-secret-env {name}: the variable is empty")),
            Err(e) => Err(format!("--client-secret-env {name}: {e}")),
        }
    }

    /// The scopes asked for: each --scope, split at spaces.
    pub(crate) fn scopes(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flat_map(|s| s.split_whitespace())
            .map(str::to_owned)
            .collect()
    }
}

impl Remote {
    /// Whether `--header` or `--header-file` sets `Authorization` (a static token: no sign-in).
    /// Headers that cannot be read count as none: [`Remote::config`] reports them.
    pub(crate) fn has_authorization_header(&self) -> bool {
        collect_headers(
            &self.headers,
            self.connection.header_file.as_deref(),
            &env_var,
        )
        .is_ok_and(|headers| {
            headers
                .iter()
                .any(|(name, _)| *name == reqwest::header::AUTHORIZATION)
        })
    }
}
