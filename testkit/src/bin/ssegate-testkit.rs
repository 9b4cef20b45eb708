//! `ssegate-testkit serve`: the test kit's loopback MCP server, and optionally its fault proxy, as a
//! child process that tests in other languages drive with one-line commands on stdin (see
//! [`USAGE`]). The Python package's pytest fixtures (`python/tests/testkit.py`) start it.
#![forbid(unsafe_code)]

use std::io::{self, BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};
use ssegate::replay::BufferConfig;
use ssegate_testkit::auth::{
    AuthServer, AuthServerConfig, IssParameter, MetadataLocation, ProtectedConfig, ProtectedServer,
    RegisteredClient, ResourcePolicy, TokenAuthMethod,
};
use ssegate_testkit::proxy::{Cut, ProxyConfig, RunningProxy};
use ssegate_testkit::server::{
    MCP_PATH, RunningServer, ServerConfig, ServerMode, TaskSupport, expected_result,
};

/// The `--help` text.
const USAGE: &str = "\
ssegate-testkit: the ssegate test kit's loopback MCP server and fault proxy, driven over stdin

usage: ssegate-testkit serve [OPTIONS]
       ssegate-testkit --help | --version

`serve` starts the loopback MCP Streamable HTTP server (and with --proxy the fault proxy in front of
it) on free 127.0.0.1 ports (nothing binds elsewhere) and prints ONE JSON line on stdout:

  {\"url\": URL, \"server\": SERVER_URL, \"proxy\": PROXY_URL or null}

(with --auth, and one more key: \"auth\": AUTH). URL is the endpoint a client should use (the proxy's with --proxy, else the protected endpoint's
with --auth, else the server's), each `http://127.0.0.1:PORT/mcp`. With --auth (or any --auth-*
option) an OAuth 2.1 authorization server and an OAuth-protected endpoint in front of the server
start too (the proxy, if any, goes in front of the protected endpoint), and AUTH is
{\"issuer\", \"metadata\" (RFC 8414 URL), \"protected\" (the protected endpoint, also the
resource identifier), \"resource_metadata\" (RFC 9728 URL), \"redirect_uris\"}. It then reads commands on stdin, one per line (blank lines are
ignored), and answers each with ONE JSON line on stdout. A command that fails answers
{\"error\": \"...\"} and the process keeps running.

  cut N              Arm one cut (needs --proxy): the first connection the proxy accepts from now
                     on whose server-to-client bytes reach N is reset (TCP RST) right after byte N;
                     every later connection passes whole. N counts every byte the proxy forwards
                     from the server to the client on that one TCP connection, from its start: the
                     HTTP status line and headers, the chunked-encoding framing and the SSE body
                     alike, summed over every response of a keep-alive connection (the 1,000th byte
                     of a fresh connection's first response head is byte 1,000). `cut 0` resets at
                     the first response byte. A connection accepted before the command is never
                     cut; a connection that ends before byte N is not cut. `cut N` again re-arms,
                     replacing an unspent cut. Answers {\"armed\": N, \"cuts\": CUTS_SO_FAR}.
  cut off            Disarms. Answers {\"armed\": null, \"cuts\": CUTS_SO_FAR}.
  cuts               Connections the proxy has cut so far: {\"cuts\": n} (0 without --proxy).
  proxy-stats        The proxy's counters: {\"connections\", \"bytes_up\", \"bytes_down\", \"cuts\",
                     \"last_cut\": {\"connection\", \"offset\"} or null, \"armed\": N or null}.
  stats              The server's counters (ServerStats) as one JSON object: \"calls\" (tool runs:
                     tools/call requests with valid arguments, restarts' re-runs, tasks run),
                     \"connections\", \"requests\", \"sessions_opened\", \"sessions_deleted\",
                     \"sessions_expired\", \"sessions_evicted\", \"streams\", \"resumes\",
                     \"replays\", \"misses\", \"restarts\", \"empty_replies\", \"invalid_params\",
                     \"sessions_adopted\", \"store_unavailable\", \"tasks_created\",
                     \"task_reads\", \"tasks_cancelled\".
  expected SIZE SEED Writes the text the big_result tool returns for `size` SIZE and `seed` SEED
                     (its result's content[0].text as a client decodes it, UTF-8; SIZE counts the
                     bytes of the JSON-escaped string on the wire, so the text is a little shorter)
                     to a file removed when the process exits, and answers
                     {\"path\": PATH, \"bytes\": LENGTH, \"sha256\": HEX}. SIZE is at most
                     --max-result-size.
  auth-stats         The authorization server's and the protected endpoint's counters:
                     {\"auth\": {\"metadata_requests\", \"registrations\",
                     \"registrations_refused\", \"authorizations\", \"authorizations_refused\",
                     \"token_requests\", \"code_grants\", \"refresh_grants\",
                     \"client_credentials_grants\", \"token_errors\", \"refreshes_rejected\",
                     \"access_tokens_issued\", \"tokens_accepted\", \"tokens_rejected\"},
                     \"protected\": {\"requests\", \"missing_token\", \"invalid_token\",
                     \"insufficient_scope\", \"admitted\", \"admin_calls\",
                     \"metadata_requests\"}} (needs --auth, as every auth-* command).
  auth-requests      The parameters of every request the authorization server received:
                     {\"authorization\": [{...}], \"token\": [{...}] (no client_secret;
                     client_auth: none, basic or post), \"registration\": [JSON bodies]}.
  authorize URL      The headless browser: GETs the authorization URL without following the
                     redirect and answers {\"redirect\": LOCATION} (the redirect URI with code,
                     state and iss, or error), or {\"error\": ...} when there is no redirect.
  auth-approve on|off  Approve (on, the default) or deny (error=access_denied) authorizations.
  auth-refresh on|off  Accept (on) or refuse with invalid_grant (off) every refresh from now on.
  auth-expire        Expires every access token issued so far: {\"expired\": N}.
  auth-revoke        Revokes every access and refresh token: {\"revoked\": N}.
  auth-ttl MS        The lifetime of access tokens issued from now on: {\"ttl_ms\": MS}.
  auth-token [SCOPE...]  Issues a token without a flow (client `serve`, audience the protected
                     endpoint, scopes `mcp` when none given): {\"access_token\",
                     \"refresh_token\" or null, \"expires_in\", \"scope\"}.
  quit               Stops the proxy and the server, answers {\"stopped\": true} and exits 0. The
                     end of stdin does the same (without the answer).

Server options (the defaults are ServerConfig's):
  --mode MODE                  What a resume (GET + Last-Event-ID) gets: strict, buffered,
                               restart, boundary, empty, resend, stateless (MCP 2026-07-28, no
                               sessions, nothing resumable) or tasks (stateless with the tasks
                               extension) [strict]
  --result-size BYTES          big_result's size when a call gives none [4194304]; `buffered`
                               sizes its replay buffer to hold four results of this size
  --seed N                     big_result's seed when a call gives none [6189819318381838337]
  --progress N                 Progress notifications before each big_result, and the progress
                               tool's default count [3]
  --retry-ms MS                The priming event's `retry:` field [250]
  --retry-after-ms MS          Retry-After of a replay miss (409) [1000]
  --replay-bytes BYTES         Each session's replay byte budget [1048576]
  --replay-event-bytes BYTES   Largest event the replay budget keeps [1048576]
  --replay-events N            Events the replay budget keeps [64]
  --max-result-size BYTES      Largest `size` a call may ask for (larger: -32602) [67108864]
  --max-progress-count N       Largest `count` of the progress tool [10000]
  --max-request-bytes BYTES    Largest request body (larger: 413) [1048576]
  --max-sessions N             Live sessions (the least recently used is evicted) [128]
  --session-idle-ms MS         A session idle this long expires (then 404) [600000]
  --max-calls-per-session N    Calls `restart` remembers per session [8]
  --max-connections N          Connections served at once [256]
  --header-read-timeout-ms MS  Time a client has to send a request head [30000]
  --tools-list-sse             Answer tools/list as an SSE stream instead of JSON
  --tasks off|offer|require    MCP tasks for tool calls [off; offer with --mode tasks]
  --task-work-ms MS            How long a task stays `working` before its tool runs [100]
  --task-ttl-ms MS|none        How long a task is kept [60000]
  --task-poll-ms MS            The polling interval tasks suggest [50]
  --task-reads-sse             Answer task reads as an SSE stream of one event
  --max-tasks N                Tasks kept at once [64]
  --task-failure CODE:MESSAGE  Every task ends `failed` with this JSON-RPC error

Proxy options:
  --proxy                      Start the fault proxy in front of the server (`url` is then its)
  --accept-delay-ms MS         After a cut, hold the proxy's next connection this long [0]
  --upstream HOST:PORT         Implies --proxy: the proxy forwards to this address (another MCP
                               server, e.g. an SDK's) instead of the kit's server; `url` is then
                               the proxy's `/mcp` (the upstream must serve that path), and the
                               server commands (stats, expected) still describe the kit's own
                               server, which nothing reaches through the proxy. Not with --auth

Authorization options (each implies --auth; the defaults are AuthServerConfig's and
ProtectedConfig's):
  --auth                       Start the authorization server and the protected endpoint
  --auth-token-ttl-ms MS       Access token lifetime [3600000]
  --auth-refresh-max-uses N    Refreshes allowed per grant; the next is invalid_grant [unlimited]
  --auth-no-rotate             Keep refresh tokens (a refresh returns none) instead of rotating
  --auth-no-refresh            Issue no refresh tokens
  --auth-offline-access        Refresh tokens only when the scope includes offline_access
  --auth-deny                  Deny every authorization (error=access_denied)
  --auth-pkce s256|plain|none  code_challenge_methods_supported: [\"S256\"], [\"plain\"] or
                               absent [s256]
  --auth-iss sent|none|omitted|wrong  RFC 9207 iss: advertised and sent, neither, advertised
                               and not sent, advertised and another issuer's sent [sent]
  --auth-issuer-mismatch       The metadata's issuer is not the issuer
  --auth-issuer-path PATH      The issuer's path (/tenant) [none]
  --auth-resource check|require|reject|ignore  What RFC 8707 resource parameters get [check]
  --auth-oidc                  Serve OpenID Connect discovery too
  --auth-no-oauth-metadata     No RFC 8414 metadata (with --auth-oidc: OpenID Connect only)
  --auth-no-registration       No dynamic registration
  --auth-client ID[:SECRET[:basic|post]]  A pre-registered client (repeatable): public without
                               a secret, else client_secret_basic unless `post`; its redirect
                               URIs are --auth-redirect-uri's
  --auth-redirect-uri URI      A pre-registered client's redirect URI (repeatable; loopback
                               http URIs match any port) [http://127.0.0.1/callback]
  --auth-scopes SCOPES         scopes_supported, space-separated, of both servers [mcp admin]
  --auth-tool-scope TOOL=SCOPE A tool that needs an extra scope (repeatable) [admin_echo=admin]
  --auth-require-audience      Refuse tokens issued without a resource
  --auth-metadata-at path|root|/PATH  Where the protected-resource metadata is: path-inserted,
                               the root, or a path only the challenge names [path]
  --auth-no-challenge-metadata The 401 challenge names no resource_metadata

Numbers may contain `_` (1_048_576). Exit status: 0 after `quit` or the end of stdin, 2 on a bad
command line, 1 when the server or proxy cannot start.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") if args[1..].iter().any(|a| a == "-h" || a == "--help") => help(),
        Some("serve") => match Options::parse(&args[1..]) {
            Ok(options) => serve(options),
            Err(e) => usage_error(&e),
        },
        Some("-h" | "--help" | "help") => help(),
        Some("-V" | "--version") => {
            println!("ssegate-testkit {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("no command"),
    }
}

fn help() -> ExitCode {
    print!("{USAGE}");
    ExitCode::SUCCESS
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("ssegate-testkit: {message}\nusage: ssegate-testkit serve [OPTIONS] (see --help)");
    ExitCode::from(2)
}

/// The options of `serve` that take a value.
const VALUE_OPTIONS: &[&str] = &[
    "--mode",
    "--result-size",
    "--seed",
    "--progress",
    "--retry-ms",
    "--retry-after-ms",
    "--replay-bytes",
    "--replay-event-bytes",
    "--replay-events",
    "--max-result-size",
    "--max-progress-count",
    "--max-request-bytes",
    "--max-sessions",
    "--session-idle-ms",
    "--max-calls-per-session",
    "--max-connections",
    "--header-read-timeout-ms",
    "--tasks",
    "--task-work-ms",
    "--task-ttl-ms",
    "--task-poll-ms",
    "--max-tasks",
    "--task-failure",
    "--accept-delay-ms",
    "--upstream",
    "--auth-token-ttl-ms",
    "--auth-refresh-max-uses",
    "--auth-pkce",
    "--auth-iss",
    "--auth-issuer-path",
    "--auth-resource",
    "--auth-client",
    "--auth-redirect-uri",
    "--auth-scopes",
    "--auth-tool-scope",
    "--auth-metadata-at",
];

/// The options of `serve` that take no value.
const FLAGS: &[&str] = &[
    "--proxy",
    "--tools-list-sse",
    "--task-reads-sse",
    "--auth",
    "--auth-no-rotate",
    "--auth-no-refresh",
    "--auth-offline-access",
    "--auth-deny",
    "--auth-issuer-mismatch",
    "--auth-oidc",
    "--auth-no-oauth-metadata",
    "--auth-no-registration",
    "--auth-require-audience",
    "--auth-no-challenge-metadata",
];

/// The redirect URI of pre-registered clients when --auth-redirect-uri gives none.
const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// What `serve` was asked to start.
#[derive(Debug)]
struct Options {
    server: ServerConfig,
    /// `Some` with `--proxy`.
    proxy: Option<ProxyConfig>,
    /// `Some` with `--auth` or any `--auth-*` option.
    auth: Option<AuthOptions>,
    /// `Some` with `--upstream`: where the proxy forwards instead of the kit's server.
    upstream: Option<SocketAddr>,
    max_result_size: usize,
}

/// What `--auth*` asked for.
#[derive(Debug)]
struct AuthOptions {
    server: AuthServerConfig,
    protected: ProtectedConfig,
    redirect_uris: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut server = ServerConfig::default();
        let mut replay: Option<BufferConfig> = None;
        let mut proxy = false;
        let mut accept_delay = Duration::ZERO;
        let mut upstream: Option<SocketAddr> = None;
        let mut max_result_size = 64 << 20;
        let mut auth = false;
        let mut auth_server = AuthServerConfig::default();
        let mut protected = ProtectedConfig::default();
        let mut clients: Vec<(String, Option<String>, TokenAuthMethod)> = Vec::new();
        let mut redirect_uris: Vec<String> = Vec::new();
        let mut tool_scopes: Vec<(String, String)> = Vec::new();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
                _ => (arg.as_str(), None),
            };
            if name.starts_with("--auth") {
                auth = true;
            }
            // Flags without a value.
            match name {
                _ if FLAGS.contains(&name) => {
                    if inline.is_some() {
                        return Err(format!("{name} takes no value"));
                    }
                    match name {
                        "--proxy" => proxy = true,
                        "--tools-list-sse" => {
                            server.tools_list_sse(true);
                        }
                        "--task-reads-sse" => {
                            server.task_reads_sse(true);
                        }
                        "--auth-no-rotate" => {
                            auth_server.rotate_refresh_tokens(false);
                        }
                        "--auth-no-refresh" => {
                            auth_server.refresh_tokens(false);
                        }
                        "--auth-offline-access" => {
                            auth_server.offline_access(true);
                        }
                        "--auth-deny" => {
                            auth_server.approve(false);
                        }
                        "--auth-issuer-mismatch" => {
                            auth_server.issuer_mismatch(true);
                        }
                        "--auth-oidc" => {
                            auth_server.oidc_discovery(true);
                        }
                        "--auth-no-oauth-metadata" => {
                            auth_server.oauth_metadata(false);
                        }
                        "--auth-no-registration" => {
                            auth_server.registration(false);
                        }
                        "--auth-require-audience" => {
                            protected.require_audience(true);
                        }
                        "--auth-no-challenge-metadata" => {
                            protected.challenge_metadata(false);
                        }
                        _ => {} // --auth
                    }
                    continue;
                }
                _ if !name.starts_with("--") => {
                    return Err(format!("unexpected argument {arg:?}"));
                }
                _ if !VALUE_OPTIONS.contains(&name) => {
                    return Err(format!("unknown option {name}"));
                }
                _ => {}
            }
            let value = match inline {
                Some(v) => v,
                None => args
                    .next()
                    .ok_or_else(|| format!("{name} needs a value"))?
                    .clone(),
            };
            let v = value.as_str();
            match name {
                "--mode" => {
                    server.mode(v.parse::<ServerMode>().map_err(|e| e.to_string())?);
                }
                "--result-size" => {
                    server.result_size(number(name, v)?);
                }
                "--seed" => {
                    server.seed(number(name, v)?);
                }
                "--progress" => {
                    server.progress_count(number(name, v)?);
                }
                "--retry-ms" => {
                    server.retry_ms(number(name, v)?);
                }
                "--retry-after-ms" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .retry_after(millis(name, v)?);
                }
                "--replay-bytes" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_session_bytes(number(name, v)?);
                }
                "--replay-event-bytes" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_event_bytes(number(name, v)?);
                }
                "--replay-events" => {
                    replay
                        .get_or_insert_with(BufferConfig::default)
                        .max_session_events(number(name, v)?);
                }
                "--max-result-size" => {
                    max_result_size = number(name, v)?;
                    server.max_result_size(max_result_size);
                }
                "--max-progress-count" => {
                    server.max_progress_count(number(name, v)?);
                }
                "--max-request-bytes" => {
                    server.max_request_bytes(number(name, v)?);
                }
                "--max-sessions" => {
                    server.max_sessions(number(name, v)?);
                }
                "--session-idle-ms" => {
                    server.session_idle_timeout(millis(name, v)?);
                }
                "--max-calls-per-session" => {
                    server.max_calls_per_session(number(name, v)?);
                }
                "--max-connections" => {
                    server.max_connections(number(name, v)?);
                }
                "--header-read-timeout-ms" => {
                    server.header_read_timeout(millis(name, v)?);
                }
                "--tasks" => {
                    server.tasks(match v {
                        "off" => TaskSupport::Off,
                        "offer" => TaskSupport::Offer,
                        "require" => TaskSupport::Require,
                        _ => return Err(format!("--tasks {v:?}: expected off, offer or require")),
                    });
                }
                "--task-work-ms" => {
                    server.task_work(millis(name, v)?);
                }
                "--task-ttl-ms" => {
                    server.task_ttl(if v == "none" {
                        None
                    } else {
                        Some(millis(name, v)?)
                    });
                }
                "--task-poll-ms" => {
                    server.task_poll_interval(millis(name, v)?);
                }
                "--max-tasks" => {
                    server.max_tasks(number(name, v)?);
                }
                "--task-failure" => {
                    let (code, message) = v.split_once(':').unwrap_or((v, "task failed"));
                    let code = code
                        .trim()
                        .parse::<i64>()
                        .map_err(|_| format!("--task-failure {v:?}: expected CODE:MESSAGE"))?;
                    server.task_failure(Some((code, message.to_owned())));
                }
                "--accept-delay-ms" => accept_delay = millis(name, v)?,
                "--upstream" => {
                    let addr = std::net::ToSocketAddrs::to_socket_addrs(v)
                        .map_err(|e| format!("{name} {v:?}: expected HOST:PORT ({e})"))?
                        .next()
                        .ok_or_else(|| format!("{name} {v:?}: resolves to no address"))?;
                    upstream = Some(addr);
                    proxy = true;
                }
                "--auth-token-ttl-ms" => {
                    auth_server.access_token_ttl(millis(name, v)?);
                }
                "--auth-refresh-max-uses" => {
                    auth_server.refresh_token_max_uses(Some(number(name, v)?));
                }
                "--auth-pkce" => {
                    auth_server.code_challenge_methods(match v {
                        "s256" => Some(vec!["S256".to_owned()]),
                        "plain" => Some(vec!["plain".to_owned()]),
                        "none" => None,
                        _ => return Err(format!("{name} {v:?}: expected s256, plain or none")),
                    });
                }
                "--auth-iss" => {
                    auth_server.iss(match v {
                        "sent" => IssParameter::Sent,
                        "none" => IssParameter::NotSupported,
                        "omitted" => IssParameter::Omitted,
                        "wrong" => IssParameter::Wrong,
                        _ => {
                            return Err(format!(
                                "{name} {v:?}: expected sent, none, omitted or wrong"
                            ));
                        }
                    });
                }
                "--auth-issuer-path" => {
                    auth_server.issuer_path(v);
                }
                "--auth-resource" => {
                    auth_server.resource_policy(match v {
                        "check" => ResourcePolicy::Check,
                        "require" => ResourcePolicy::Require,
                        "reject" => ResourcePolicy::Reject,
                        "ignore" => ResourcePolicy::Ignore,
                        _ => {
                            return Err(format!(
                                "{name} {v:?}: expected check, require, reject or ignore"
                            ));
                        }
                    });
                }
                "--auth-client" => {
                    let mut parts = v.splitn(3, ':');
                    let id = parts.next().unwrap_or_default();
                    if id.is_empty() {
                        return Err(format!("{name} {v:?}: expected ID[:SECRET[:basic|post]]"));
                    }
                    let secret = parts.next().filter(|s| !s.is_empty()).map(str::to_owned);
                    let method = match (secret.is_some(), parts.next()) {
                        (false, None) => TokenAuthMethod::None,
                        (true, None | Some("basic")) => TokenAuthMethod::ClientSecretBasic,
                        (true, Some("post")) => TokenAuthMethod::ClientSecretPost,
                        _ => {
                            return Err(format!("{name} {v:?}: expected ID[:SECRET[:basic|post]]"));
                        }
                    };
                    clients.push((id.to_owned(), secret, method));
                }
                "--auth-redirect-uri" => redirect_uris.push(v.to_owned()),
                "--auth-scopes" => {
                    let scopes: Vec<String> = v.split_whitespace().map(str::to_owned).collect();
                    if scopes.is_empty() {
                        return Err(format!("{name}: no scope"));
                    }
                    auth_server.scopes_supported(scopes.clone());
                    protected.scopes_supported(scopes);
                }
                "--auth-tool-scope" => {
                    let Some((tool, scope)) = v
                        .split_once('=')
                        .filter(|(t, s)| !t.is_empty() && !s.is_empty())
                    else {
                        return Err(format!("{name} {v:?}: expected TOOL=SCOPE"));
                    };
                    tool_scopes.push((tool.to_owned(), scope.to_owned()));
                }
                "--auth-metadata-at" => {
                    protected.metadata_location(match v {
                        "path" => MetadataLocation::PathInserted,
                        "root" => MetadataLocation::Root,
                        p if p.starts_with('/') => MetadataLocation::Custom(p.to_owned()),
                        _ => {
                            return Err(format!("{name} {v:?}: expected path, root or /PATH"));
                        }
                    });
                }
                _ => return Err(format!("unknown option {name}")),
            }
        }
        if let Some(replay) = replay {
            server.replay(replay);
        }
        if upstream.is_some() && auth {
            return Err("--upstream cannot be combined with --auth".to_owned());
        }
        let proxy = proxy.then(|| {
            let mut config = ProxyConfig::default();
            config.accept_delay(accept_delay);
            config
        });
        let auth = auth.then(|| {
            if redirect_uris.is_empty() {
                redirect_uris.push(DEFAULT_REDIRECT_URI.to_owned());
            }
            for (id, secret, method) in clients {
                auth_server.client(match secret {
                    None => RegisteredClient::public(id, redirect_uris.clone()),
                    Some(secret) => {
                        RegisteredClient::confidential(id, secret, method, redirect_uris.clone())
                    }
                });
            }
            for (tool, scope) in tool_scopes {
                protected.tool_scope(tool, scope);
            }
            AuthOptions {
                server: auth_server,
                protected,
                redirect_uris,
            }
        });
        Ok(Options {
            server,
            proxy,
            auth,
            upstream,
            max_result_size,
        })
    }
}

/// A non-negative integer, `_` allowed between digits.
fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    let digits: String = value.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name} {value:?}: expected a non-negative integer"));
    }
    digits
        .parse()
        .map_err(|_| format!("{name} {value:?}: out of range"))
}

fn millis(name: &str, value: &str) -> Result<Duration, String> {
    number(name, value).map(Duration::from_millis)
}

/// One compact JSON line on stdout, flushed.
fn emit(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()
}

fn serve(options: Options) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ssegate-testkit: cannot start a tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let started = runtime.block_on(async {
        let server = options.server.start(loopback).await?;
        let auth = match options.auth {
            Some(a) => {
                let auth = AuthServer::start(a.server).await?;
                let protected = ProtectedServer::start(server.addr(), &auth, a.protected).await?;
                Some(Auth {
                    server: auth,
                    protected,
                    redirect_uris: a.redirect_uris,
                })
            }
            None => None,
        };
        let front = options
            .upstream
            .unwrap_or_else(|| auth.as_ref().map_or(server.addr(), |a| a.protected.addr()));
        let proxy = match &options.proxy {
            Some(config) => Some(config.start(front).await?),
            None => None,
        };
        Ok::<_, io::Error>((server, proxy, auth))
    });
    let (server, proxy, auth) = match started {
        Ok(started) => started,
        Err(e) => {
            eprintln!("ssegate-testkit: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut kit = Kit {
        server,
        proxy,
        auth,
        runtime: runtime.handle().clone(),
        armed: None,
        max_result_size: options.max_result_size,
        files: None,
    };
    let server_url = kit.server.url();
    let proxy_url = kit
        .proxy
        .as_ref()
        .map(|p| format!("http://{}{MCP_PATH}", p.addr()));
    let auth_hello = kit.auth.as_ref().map(|a| {
        json!({
            "issuer": a.server.issuer(),
            "metadata": a.server.metadata_url(),
            "protected": a.protected.url(),
            "resource_metadata": a.protected.metadata_url(),
            "redirect_uris": a.redirect_uris,
        })
    });
    let front_url = kit
        .auth
        .as_ref()
        .map_or_else(|| server_url.clone(), |a| a.protected.url());
    let mut hello = json!({
        "url": proxy_url.clone().unwrap_or(front_url),
        "server": server_url,
        "proxy": proxy_url,
    });
    if let Some(auth) = auth_hello {
        hello["auth"] = auth;
    }
    let mut quit = false;
    if emit(&hello).is_ok() {
        let mut stdin = io::stdin().lock();
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            let command = text.trim();
            if command.is_empty() {
                continue;
            }
            if matches!(command, "quit" | "exit") {
                quit = true;
                break;
            }
            let answer =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kit.command(command)))
                    .unwrap_or_else(|_| Err("the command panicked (see stderr)".to_owned()))
                    .unwrap_or_else(|e| json!({"error": e}));
            if emit(&answer).is_err() {
                break;
            }
        }
    }
    let Kit {
        server,
        proxy,
        auth,
        files,
        ..
    } = kit;
    runtime.block_on(async {
        if let Some(proxy) = proxy {
            proxy.shutdown().await;
        }
        if let Some(auth) = auth {
            auth.protected.shutdown().await;
            auth.server.shutdown().await;
        }
        server.shutdown().await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Some(dir) = files {
        let _ = std::fs::remove_dir_all(dir);
    }
    if quit {
        let _ = emit(&json!({"stopped": true}));
    }
    ExitCode::SUCCESS
}

/// The authorization server and the protected endpoint of `--auth`.
struct Auth {
    server: AuthServer,
    protected: ProtectedServer,
    redirect_uris: Vec<String>,
}

/// What the commands act on.
struct Kit {
    server: RunningServer,
    proxy: Option<RunningProxy>,
    auth: Option<Auth>,
    /// For the commands that do I/O (`authorize`).
    runtime: tokio::runtime::Handle,
    /// The offset of the cut armed last (`cut N`), until `cut off`.
    armed: Option<u64>,
    max_result_size: usize,
    /// This process's directory of `expected` files, once made.
    files: Option<PathBuf>,
}

impl Kit {
    fn command(&mut self, line: &str) -> Result<Value, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["cut", "off"] => {
                let proxy = self.proxy()?;
                proxy.set_default_cut(Cut::None);
                proxy.set_max_cuts(None);
                let cuts = proxy.stats().cuts;
                self.armed = None;
                Ok(json!({"armed": null, "cuts": cuts}))
            }
            ["cut", n] => {
                let n: u64 = number("cut", n)?;
                let proxy = self.proxy()?;
                // Every connection accepted from now on gets the offset; the budget lets exactly
                // the first to reach it be cut, whichever connection a pooling client uses.
                let cuts = proxy.stats().cuts;
                proxy.set_default_cut(Cut::At(n));
                proxy.set_max_cuts(Some(cuts + 1));
                self.armed = Some(n);
                Ok(json!({"armed": n, "cuts": cuts}))
            }
            ["cuts"] => Ok(json!({"cuts": self.proxy.as_ref().map_or(0, |p| p.stats().cuts)})),
            ["proxy-stats"] => {
                let proxy = self.proxy()?;
                let s = proxy.stats();
                let last = proxy
                    .last_cut()
                    .map(|c| json!({"connection": c.connection, "offset": c.offset}));
                Ok(json!({
                    "connections": s.connections,
                    "bytes_up": s.bytes_up,
                    "bytes_down": s.bytes_down,
                    "cuts": s.cuts,
                    "last_cut": last,
                    "armed": self.armed,
                }))
            }
            ["stats"] => Ok(self.server.stats().to_json()),
            ["expected", size, seed] => {
                let size: usize = number("SIZE", size)?;
                let seed: u64 = number("SEED", seed)?;
                self.expected(size, seed)
            }
            [word, ..] if word.starts_with("auth") => self.auth_command(&words),
            _ => Err(format!(
                "unknown command {line:?} (expected: cut N, cut off, cuts, proxy-stats, stats, \
                 expected SIZE SEED, auth-stats, auth-requests, authorize URL, auth-approve \
                 on|off, auth-refresh on|off, auth-expire, auth-revoke, auth-ttl MS, auth-token \
                 [SCOPE...], quit)"
            )),
        }
    }

    fn auth_command(&self, words: &[&str]) -> Result<Value, String> {
        let auth = self
            .auth
            .as_ref()
            .ok_or_else(|| "no authorization server: start with --auth".to_owned())?;
        let on_off = |v: &str| match v {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err(format!("{v:?}: expected on or off")),
        };
        match words {
            ["auth-stats"] => Ok(json!({
                "auth": auth.server.stats().to_json(),
                "protected": auth.protected.stats().to_json(),
            })),
            ["auth-requests"] => Ok(json!({
                "authorization": auth.server.authorization_requests(),
                "token": auth.server.token_requests(),
                "registration": auth.server.registration_requests(),
            })),
            ["authorize", url] => self
                .runtime
                .block_on(ssegate_testkit::auth::follow(url))
                .map(|redirect| json!({"redirect": redirect}))
                .map_err(|e| e.to_string()),
            ["auth-approve", v] => {
                let on = on_off(v)?;
                auth.server.set_approve(on);
                Ok(json!({"approve": on}))
            }
            ["auth-refresh", v] => {
                let on = on_off(v)?;
                auth.server.set_refresh_rejected(!on);
                Ok(json!({"refresh": on}))
            }
            ["auth-expire"] => Ok(json!({"expired": auth.server.expire_access_tokens()})),
            ["auth-revoke"] => Ok(json!({"revoked": auth.server.revoke_all()})),
            ["auth-ttl", ms] => {
                let ms: u64 = number("MS", ms)?;
                auth.server.set_access_token_ttl(Duration::from_millis(ms));
                Ok(json!({"ttl_ms": ms}))
            }
            ["auth-token", scopes @ ..] => {
                let scopes: Vec<&str> = if scopes.is_empty() {
                    vec!["mcp"]
                } else {
                    scopes.to_vec()
                };
                let resource = auth.protected.url();
                let t = auth.server.issue_token("serve", &scopes, Some(&resource));
                Ok(json!({
                    "access_token": t.access_token,
                    "refresh_token": t.refresh_token,
                    "expires_in": t.expires_in.as_secs(),
                    "scope": t.scopes.join(" "),
                }))
            }
            _ => Err(format!(
                "unknown command {:?} (auth-stats, auth-requests, authorize URL, auth-approve \
                 on|off, auth-refresh on|off, auth-expire, auth-revoke, auth-ttl MS, auth-token \
                 [SCOPE...])",
                words.join(" ")
            )),
        }
    }

    fn proxy(&self) -> Result<&RunningProxy, String> {
        self.proxy
            .as_ref()
            .ok_or_else(|| "no proxy: start with --proxy".to_owned())
    }

    /// Writes the text of `big_result(size, seed)`, as the server sends it, to a file.
    fn expected(&mut self, size: usize, seed: u64) -> Result<Value, String> {
        if size > self.max_result_size {
            return Err(format!(
                "SIZE {size} is over --max-result-size {} (the server refuses such a call)",
                self.max_result_size
            ));
        }
        // The very response the server sends (any request id), decoded as a client decodes it.
        let response = expected_result(&json!(0), size, seed);
        let value: Value = serde_json::from_slice(&response)
            .map_err(|e| format!("big_result's response is not JSON: {e}"))?;
        let text = value["result"]["content"][0]["text"]
            .as_str()
            .ok_or("big_result's response has no text")?;
        let dir = match &self.files {
            Some(dir) => dir.clone(),
            None => {
                let dir =
                    std::env::temp_dir().join(format!("ssegate-testkit-{}", std::process::id()));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                self.files = Some(dir.clone());
                dir
            }
        };
        let path = dir.join(format!("big_result-{size}-{seed}.txt"));
        std::fs::write(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        let sha256: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Ok(json!({
            "path": path.to_string_lossy(),
            "bytes": text.len(),
            "sha256": sha256,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    /// Every option taking a value is handled and described in `--help`.
    #[test]
    fn every_option_parses_and_is_documented() {
        for &name in VALUE_OPTIONS {
            let value = match name {
                "--mode" => "restart",
                "--tasks" => "offer",
                "--task-failure" => "-32000:no",
                "--auth-pkce" => "none",
                "--auth-iss" => "wrong",
                "--auth-issuer-path" => "/tenant",
                "--auth-resource" => "reject",
                "--auth-client" => "id:secret:post",
                "--auth-redirect-uri" => "http://127.0.0.1/cb",
                "--auth-scopes" => "mcp admin",
                "--auth-tool-scope" => "big_result=admin",
                "--auth-metadata-at" => "root",
                "--upstream" => "127.0.0.1:9",
                _ => "1_000",
            };
            parse(&[name, value]).unwrap_or_else(|e| panic!("{name} {value}: {e}"));
            parse(&[&format!("{name}={value}")]).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
            assert!(
                USAGE.contains(&format!("  {name} ")),
                "{name} is not in --help"
            );
        }
        for &flag in FLAGS {
            parse(&[flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
            assert!(
                USAGE.contains(&format!("  {flag} ")),
                "{flag} is not in --help"
            );
        }
        assert!(parse(&["--proxy"]).unwrap().proxy.is_some());
        assert!(parse(&[]).unwrap().proxy.is_none());
        assert!(parse(&[]).unwrap().auth.is_none());
        assert!(parse(&["--auth-deny"]).unwrap().auth.is_some());
        let a = parse(&["--auth-client", "pub"]).unwrap().auth.unwrap();
        assert_eq!(a.redirect_uris, vec![DEFAULT_REDIRECT_URI.to_owned()]);
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for (args, why) in [
            (&["--bogus", "1"][..], "unknown option --bogus"),
            (&["--mode"], "--mode needs a value"),
            (&["--mode", "nope"], "unknown server mode"),
            (&["--progress", "-1"], "non-negative integer"),
            (&["--progress", "99999999999999999999999"], "out of range"),
            (&["--proxy=yes"], "takes no value"),
            (&["stray"], "unexpected argument"),
            (&["--tasks", "maybe"], "expected off, offer or require"),
            (&["--auth-pkce", "md5"], "expected s256, plain or none"),
            (&["--auth-client", "id::nope"], "expected ID[:SECRET"),
            (&["--auth-tool-scope", "admin"], "expected TOOL=SCOPE"),
            (&["--auth=yes"], "takes no value"),
        ] {
            let e = parse(args).expect_err(why);
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }
}
