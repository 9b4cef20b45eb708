//! Sign-in for the commands that speak to a live server, and `ssegate auth`.
//!
//! `bridge`, `call` and `auth login` sign in when the server asks (`401` with a challenge), with
//! no flag: the library runs MCP authorization (OAuth 2.1 with PKCE); the command gives it a
//! [`FileStore`] (the user's tokens and client registration, one file per server,
//! [`platform::auth_dir`]) and a [`BrowserSignIn`] (the URL printed and opened in the browser,
//! the redirect caught on loopback). Several processes of one server sign in once (a lock per
//! server) and never spend one refresh token twice (another lock). `--no-auth` turns it off; a
//! static `--header 'Authorization: ...'` needs none.

mod platform;
mod signin;
mod store;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use ssegate::client::auth::AuthConfig;
use ssegate::client::{Client, ClientConfig, ClientError};

use crate::client_args::{AuthFlags, Remote};
pub(crate) use signin::BrowserSignIn;
pub(crate) use store::FileStore;
use store::Record;
#[cfg(test)]
use store::StoreError;

/// How a command signs in to `remote`, set on `config`: nothing with `--no-auth` or a static
/// `Authorization` header. `who` prefixes what the sign-in says on stderr. Returns the server's
/// store when there is one (none: no credentials directory; tokens are then kept in memory).
pub(crate) fn configure(
    config: &mut ClientConfig,
    remote: &Remote,
    flags: &AuthFlags,
    who: &'static str,
) -> Result<Option<Arc<FileStore>>, String> {
    if flags.no_auth || remote.has_authorization_header() {
        return Ok(None);
    }
    let secret = flags.client_secret()?;
    let mut auth = AuthConfig::default();
    auth.scopes(flags.scopes())
        .send_resource(!flags.no_resource)
        .sign_in_timeout(Duration::from_secs_f64(flags.auth_timeout));
    let store = match platform::auth_dir() {
        Ok(dir) => {
            let mut store = FileStore::new(dir, &remote.url)?;
            if let Some(id) = &flags.client_id {
                store.given_client(id.clone(), secret.clone());
            }
            Some(Arc::new(store))
        }
        Err(why) => {
            note(who, &format!("credentials will not be kept: {why}"));
            None
        }
    };
    // The client: given now, else one given before (kept with its tokens, and its secret).
    let stored = store
        .as_ref()
        .and_then(|s| s.read().ok().flatten())
        .filter(|r| r.client_given);
    match (&flags.client_id, stored) {
        (Some(id), _) => {
            auth.client(id.clone(), secret.clone());
        }
        (None, Some(r)) => {
            auth.client(r.credentials.client_id.clone(), r.client_secret);
        }
        (None, None) => {}
    }
    if flags.client_credentials {
        if flags.client_id.is_none() {
            return Err("--client-credentials: needs --client-id and its secret".to_owned());
        }
        if secret.is_none() {
            return Err(
                "--client-credentials: needs --client-secret or --client-secret-env".to_owned(),
            );
        }
        auth.client_credentials(true);
    }
    if let Some(store) = &store {
        auth.store(store.clone());
    }
    if !flags.client_credentials {
        let timeout = Duration::from_secs_f64(flags.auth_timeout);
        let sign_in = BrowserSignIn::new(
            who,
            &remote.url,
            store.clone(),
            flags.callback_port,
            timeout,
        )?;
        auth.sign_in(Arc::new(sign_in));
    }
    config.auth(auth);
    Ok(store)
}

/// What a failed sign-in tells the user to do.
pub(crate) fn hint(url: &str, flags: &AuthFlags) -> String {
    let mut line = format!("to sign in, run: ssegate auth login {url}");
    if let Some(id) = &flags.client_id {
        line.push_str(&format!(" --client-id {id}"));
        if let Some(name) = &flags.client_secret_env {
            line.push_str(&format!(" --client-secret-env {name}"));
        } else if flags.client_secret.is_some() {
            line.push_str(" --client-secret ...");
        }
    }
    for scope in flags.scopes() {
        line.push_str(&format!(" --scope {scope}"));
    }
    if let Some(port) = flags.callback_port {
        line.push_str(&format!(" --callback-port {port}"));
    }
    if flags.no_resource {
        line.push_str(" --no-resource");
    }
    line
}

/// `e`'s words, with what to do when it is a failed sign-in.
pub(crate) fn explain(e: &ClientError, url: &str, flags: &AuthFlags) -> String {
    match e {
        ClientError::Auth(_) => format!("{e}; {}", hint(url, flags)),
        _ => e.to_string(),
    }
}

fn note(who: &str, text: &str) {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let _ = writeln!(std::io::stderr().lock(), "{who}: {line}");
}

/// `ssegate auth`: sign in ahead, sign out, show what is stored.
#[derive(clap::Args, Debug)]
pub(crate) struct AuthArgs {
    #[command(subcommand)]
    command: AuthCommand,
}

#[derive(clap::Subcommand, Debug)]
enum AuthCommand {
    /// Sign in to a server now (before a host starts `ssegate bridge`): connects as `bridge` and
    /// `call` do and signs in if the server asks; stored credentials that still work are used.
    Login(Box<LoginArgs>),
    /// Sign out of a server: deletes its stored tokens and client registration (the
    /// authorization server is not told).
    Logout(LogoutArgs),
    /// Show what is stored, for one server or every one: the server, issuer, client id, scopes,
    /// when the access token expires, whether a refresh token is kept (never a token or secret).
    Status(StatusArgs),
}

#[derive(clap::Args, Debug)]
struct LoginArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(flatten)]
    auth: AuthFlags,
}

#[derive(clap::Args, Debug)]
struct LogoutArgs {
    /// The server's MCP endpoint, as given to `bridge` or `call`.
    url: String,
}

#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// The server's MCP endpoint (default: every server with stored credentials).
    url: Option<String>,
    /// One JSON object per server, one a line.
    #[arg(long)]
    json: bool,
}

/// What `ssegate auth --help` says after the options.
pub(crate) const AFTER_HELP: &str = "\
Credentials are kept per user, one file per server (0600, in a 0700 directory on Unix):
  Linux    $XDG_CONFIG_HOME/ssegate/auth, else ~/.config/ssegate/auth
  macOS    ~/Library/Application Support/ssegate/auth
  Windows  %APPDATA%\\ssegate\\auth
SSEGATE_AUTH_DIR names another directory.

Exit status: 0 done; 1 the sign-in failed, a file could not be read, or (status URL) nothing is
stored for the server; 2 usage.";

const WHO: &str = "ssegate auth";

pub(crate) fn run(args: &AuthArgs) -> ExitCode {
    match &args.command {
        AuthCommand::Login(a) => login(a),
        AuthCommand::Logout(a) => logout(a),
        AuthCommand::Status(a) => status(a),
    }
}

fn usage(text: &str) -> ExitCode {
    note(WHO, &format!("usage: {text}"));
    ExitCode::from(2)
}

fn failure(text: &str) -> ExitCode {
    note(WHO, text);
    ExitCode::FAILURE
}

/// The credentials directory, or the exit for its absence.
fn dir() -> Result<PathBuf, ExitCode> {
    platform::auth_dir().map_err(|why| failure(&format!("no credentials directory: {why}")))
}

fn login(args: &LoginArgs) -> ExitCode {
    if args.auth.no_auth {
        return usage("--no-auth: there is nothing to sign in to");
    }
    if args.remote.has_authorization_header() {
        return usage(
            "--header or --header-file sets Authorization: a static token needs no sign-in",
        );
    }
    let url = &args.remote.url;
    let mut config = match args.remote.config() {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let store = match configure(&mut config, &args.remote, &args.auth, WHO) {
        Ok(Some(store)) => store,
        Ok(None) => return failure("no credentials directory: set SSEGATE_AUTH_DIR"),
        Err(e) => return usage(&e),
    };
    let before = store.read().ok().flatten().map(|r| r.saved_at);
    config.client_name("ssegate-auth");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return failure(&format!("cannot start the runtime: {e}")),
    };
    let connected = runtime.block_on(async {
        let client = Client::connect(url, config).await?;
        let _ = tokio::time::timeout(Duration::from_secs(5), client.close()).await;
        Ok::<_, ClientError>(())
    });
    runtime.shutdown_background();
    if let Err(e) = connected {
        return failure(&format!(
            "{}: {}",
            e.kind().as_str(),
            explain(&e, url, &args.auth)
        ));
    }
    match store.read() {
        Ok(Some(record)) if record.has_tokens() => {
            let fresh = before != Some(record.saved_at);
            note(
                WHO,
                &format!(
                    "signed in to {url}{}",
                    if fresh { "" } else { " (stored credentials)" }
                ),
            );
            print_status(&store.path(), &record);
            ExitCode::SUCCESS
        }
        Ok(_) => {
            note(WHO, &format!("{url} asked for no sign-in: nothing stored"));
            ExitCode::SUCCESS
        }
        Err(e) => failure(&e.to_string()),
    }
}

fn logout(args: &LogoutArgs) -> ExitCode {
    let dir = match dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let store = match FileStore::new(dir, &args.url) {
        Ok(s) => s,
        Err(e) => return usage(&e),
    };
    match store.remove() {
        Ok(true) => {
            note(
                WHO,
                &format!(
                    "signed out of {}: deleted {}",
                    args.url,
                    store.path().display()
                ),
            );
            ExitCode::SUCCESS
        }
        Ok(false) => {
            note(WHO, &format!("nothing stored for {}", args.url));
            ExitCode::SUCCESS
        }
        Err(e) => failure(&e.to_string()),
    }
}

fn status(args: &StatusArgs) -> ExitCode {
    let dir = match dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let paths = match &args.url {
        Some(url) => match FileStore::new(dir.clone(), url) {
            Ok(store) => vec![store.path()],
            Err(e) => return usage(&e),
        },
        None => match store::list(&dir) {
            Ok(paths) => paths,
            Err(e) => return failure(&e.to_string()),
        },
    };
    let mut failed = false;
    let mut shown = 0;
    for path in &paths {
        match store::read_record(path) {
            Ok(Some(record)) => {
                if args.json {
                    println!("{}", status_json(path, &record));
                } else {
                    print_status(path, &record);
                }
                shown += 1;
                failed |= args.url.is_some() && !record.has_tokens();
            }
            Ok(None) => {}
            Err(e) => {
                note(WHO, &e.to_string());
                failed = true;
            }
        }
    }
    if shown == 0 && !failed {
        match &args.url {
            Some(url) => {
                let file = paths.first().map(|p| p.display().to_string());
                note(
                    WHO,
                    &format!("nothing stored for {url} ({})", file.unwrap_or_default()),
                );
                failed = true;
            }
            None => note(WHO, &format!("no credentials stored in {}", dir.display())),
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// A record as `status --json` prints it: nothing secret.
fn status_json(path: &std::path::Path, r: &Record) -> Value {
    json!({
        "server": r.server,
        "resource": r.resource,
        "file": path.display().to_string(),
        "issuer": r.credentials.issuer,
        "clientId": r.credentials.client_id,
        "clientGiven": r.client_given,
        "clientSecret": r.client_secret.is_some(),
        "redirectUri": r.redirect_uri,
        "scopes": r.credentials.granted_scopes,
        "accessToken": r.has_tokens(),
        "expiresAt": r.expires_at(),
        "refreshToken": r.has_refresh_token(),
        "savedAt": r.saved_at,
    })
}

/// `seconds` as `1h 2m`, `3m 4s`, `5s`.
fn span(seconds: u64) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m"),
    }
}

fn print_status(path: &std::path::Path, r: &Record) {
    let c = &r.credentials;
    let client = match (r.client_given, r.client_secret.is_some()) {
        (true, true) => "given with --client-id, secret stored",
        (true, false) => "given with --client-id",
        (false, true) => "registered by ssegate, secret stored",
        (false, false) => "registered by ssegate",
    };
    let token = if !r.has_tokens() {
        "none (the next start signs in)".to_owned()
    } else {
        match r.expires_at() {
            Some(at) if at > now() => format!("expires in {} (unix time {at})", span(at - now())),
            Some(at) => format!("expired {} ago (unix time {at})", span(now() - at)),
            None => "no expiry given".to_owned(),
        }
    };
    let scopes = if c.granted_scopes.is_empty() {
        "(none named)".to_owned()
    } else {
        c.granted_scopes.join(" ")
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}\n  file:          {}\n  issuer:        {}\n  client id:     {} ({client})\n  \
         scopes:        {scopes}\n  access token:  {token}\n  refresh token: {}",
        r.server,
        path.display(),
        c.issuer.as_deref().unwrap_or("(unknown)"),
        c.client_id,
        if r.has_refresh_token() { "yes" } else { "no" },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_repeats_the_sign_in_flags_but_no_secret() {
        let mut flags = AuthFlags {
            client_id: Some("cid".into()),
            client_secret: Some("s3cret".into()),
            scopes: vec!["a b".into(), "c".into()],
            callback_port: Some(4000),
            no_resource: true,
            ..AuthFlags::default()
        };
        let h = hint("https://x/mcp", &flags);
        assert_eq!(
            h,
            "to sign in, run: ssegate auth login https://x/mcp --client-id cid --client-secret ... \
             --scope a --scope b --scope c --callback-port 4000 --no-resource"
        );
        flags.client_secret = None;
        flags.client_secret_env = Some("SECRET".into());
        assert!(hint("u", &flags).contains("--client-secret-env SECRET"));
        assert_eq!(
            hint("u", &AuthFlags::default()),
            "to sign in, run: ssegate auth login u"
        );
    }

    #[test]
    fn spans_read_as_hours_minutes_seconds() {
        assert_eq!(span(5), "5s");
        assert_eq!(span(185), "3m 5s");
        assert_eq!(span(3720), "1h 2m");
    }

    #[test]
    fn a_store_error_names_the_file() {
        let e = StoreError::Corrupt {
            path: PathBuf::from("/x/y.json"),
            reason: "eof".into(),
        };
        assert!(e.to_string().starts_with("/x/y.json: "), "{e}");
    }
}
