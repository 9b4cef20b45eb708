//! `ssegate auth`, and signing in from `call` and `bridge`: real processes on loopback.
//!
//! The end-to-end tests run the kit's authorization server and protected MCP endpoint
//! (`ssegate_testkit::auth`) in this process and the command as a child, each with a credentials
//! directory of its own (`SSEGATE_AUTH_DIR`) and this test binary as its `$BROWSER`: the
//! [`headless_browser`] test, which visits the authorization URL (the kit's `follow`) and then the
//! redirect it gets, the command's callback.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use ssegate_testkit::auth::{
    AuthServer, AuthServerConfig, BrowserError, ProtectedConfig, ProtectedServer, follow,
};
use ssegate_testkit::server::{RunningServer, ServerConfig};

use common::host::Host;
use common::runtime;

/// Set in the command's environment: the test binary run as `$BROWSER` acts as one.
const BROWSER_ROLE: &str = "SSEGATE_TEST_HEADLESS_BROWSER";

/// How long the headless browser takes before its visit, in milliseconds (a user reading the
/// page): a sign-in long enough for every process started with it to meet it.
const BROWSER_DELAY: &str = "SSEGATE_TEST_BROWSER_DELAY_MS";

/// Set in the command's environment: the headless browser opens nothing (the user walked away),
/// so the sign-in never completes.
const BROWSER_AWAY: &str = "SSEGATE_TEST_BROWSER_AWAY";

/// The headless browser, run by the command as `$BROWSER` (this test, the URL last): visits the
/// authorization URL, then the command's callback it was redirected to. Does nothing in a test
/// run.
#[test]
fn headless_browser() {
    if std::env::var_os(BROWSER_ROLE).is_none() || std::env::var_os(BROWSER_AWAY).is_some() {
        return;
    }
    let url = std::env::args().next_back().expect("the URL");
    if let Some(ms) = std::env::var(BROWSER_DELAY)
        .ok()
        .and_then(|d| d.parse().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    runtime().block_on(async {
        let callback = follow(&url)
            .await
            .expect("the authorization server redirects");
        // The command's callback server answers with a page, no redirect.
        match follow(&callback).await {
            Err(BrowserError::NotRedirected { status: 200, .. }) => {}
            other => panic!("the callback: {other:?}"),
        }
    });
}

static DIRS: AtomicU64 = AtomicU64::new(0);

/// A fresh credentials directory (not created: the command creates it).
fn auth_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ssegate-cli-auth-{name}-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("auth")
}

/// The environment of a command that signs in with the headless browser into `dir`.
fn env(dir: &Path) -> Vec<(String, String)> {
    let me = std::env::current_exe().expect("the test binary");
    vec![
        ("SSEGATE_AUTH_DIR".into(), dir.display().to_string()),
        (
            "BROWSER".into(),
            format!(
                "{} headless_browser --exact --quiet --nocapture",
                me.display()
            ),
        ),
        (BROWSER_ROLE.into(), "1".into()),
    ]
}

/// Runs `ssegate ARGS` with the environment `env`.
fn ssegate(args: &[&str], env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run ssegate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A credentials file written by hand, as the command writes them.
fn write_record(path: &Path, server: &str, refresh: bool) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut tokens =
        json!({"access_token": "AT-SECRET-1", "token_type": "Bearer", "expires_in": 3600});
    if refresh {
        tokens["refresh_token"] = json!("RT-SECRET-2");
    }
    let record = json!({
        "format": 1,
        "server": server,
        "resource": server,
        "client_secret": "CS-SECRET-3",
        "client_given": true,
        "saved_at": now,
        "credentials": {
            "client_id": "client-42",
            "token_response": tokens,
            "granted_scopes": ["mcp", "files:read"],
            "token_received_at": now,
            "issuer": "http://127.0.0.1:9/as",
        },
    });
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec(&record).unwrap()).unwrap();
}

/// The file `ssegate auth status URL` names for a server with nothing stored.
fn file_of(dir: &Path, url: &str) -> PathBuf {
    let env = [("SSEGATE_AUTH_DIR".to_owned(), dir.display().to_string())];
    let out = ssegate(&["auth", "status", url], &env);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    let start = stderr.find('(').expect("the file in parentheses") + 1;
    let end = stderr.rfind(')').unwrap();
    PathBuf::from(&stderr[start..end])
}

#[test]
fn status_shows_what_is_stored_and_never_a_secret_and_logout_deletes_it() {
    let dir = auth_dir("status");
    let env = [("SSEGATE_AUTH_DIR".to_owned(), dir.display().to_string())];
    let url = "https://mcp.example.com/mcp";
    // Nothing stored yet: status says so (every server: 0; this one: 1).
    let out = ssegate(&["auth", "status"], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text(&out.stderr).contains("no credentials stored"),
        "{out:?}"
    );
    let path = file_of(&dir, url);
    assert!(path.starts_with(&dir), "{path:?}");
    write_record(&path, url, true);
    for args in [&["auth", "status", url][..], &["auth", "status"]] {
        let out = ssegate(args, &env);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let stdout = text(&out.stdout);
        for shown in [
            url,
            "http://127.0.0.1:9/as",
            "client-42",
            "mcp files:read",
            "refresh token: yes",
            "expires in",
        ] {
            assert!(stdout.contains(shown), "{shown}: {stdout}");
        }
        for secret in ["AT-SECRET", "RT-SECRET", "CS-SECRET"] {
            assert!(!stdout.contains(secret) && !text(&out.stderr).contains(secret));
        }
    }
    let out = ssegate(&["auth", "status", "--json", url], &env);
    let status: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(status["server"], url);
    assert_eq!(status["clientId"], "client-42");
    assert_eq!(status["refreshToken"], true);
    assert_eq!(status["clientSecret"], true);
    assert!(!text(&out.stdout).contains("SECRET"), "{out:?}");
    // Another server is not this one.
    let out = ssegate(&["auth", "status", "https://mcp.example.com/other"], &env);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // Signing out deletes the file; twice is fine.
    let out = ssegate(&["auth", "logout", url], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stderr).contains("signed out"), "{out:?}");
    assert!(!path.exists());
    let out = ssegate(&["auth", "logout", url], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stderr).contains("nothing stored"), "{out:?}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_corrupt_credentials_file_is_an_error_naming_it_never_a_panic() {
    let dir = auth_dir("corrupt");
    let env = [("SSEGATE_AUTH_DIR".to_owned(), dir.display().to_string())];
    let url = "https://mcp.example.com/mcp";
    let path = file_of(&dir, url);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&path, b"{\"format\": 1, \"server\": ").unwrap();
    for args in [&["auth", "status", url][..], &["auth", "status"]] {
        let out = ssegate(args, &env);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(stderr.contains("not a credentials file"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // `call` on it: the store's error, typed, no panic, nothing sent to a server that is not
    // there... the call fails on the server, but never on the file.
    let out = ssegate(&["auth", "logout", url], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn sign_in_flags_are_checked_before_anything_is_sent() {
    let url = "http://127.0.0.1:9/mcp";
    for (args, says) in [
        (
            &["call", url, "t", "--no-auth", "--client-id", "x"][..],
            "--no-auth",
        ),
        (&["call", url, "t", "--client-secret", "s"], "--client-id"),
        (
            &["call", url, "t", "--client-id", "x", "--client-credentials"],
            "--client-credentials",
        ),
        (
            &[
                "call",
                url,
                "t",
                "--client-id",
                "x",
                "--client-secret-env",
                "SSEGATE_TEST_UNSET_VAR",
            ],
            "SSEGATE_TEST_UNSET_VAR",
        ),
        (&["call", url, "t", "--auth-timeout", "0"], "--auth-timeout"),
        (&["bridge", url, "--callback-port", "0"], "--callback-port"),
        (&["auth", "login", url, "--no-auth"], "--no-auth"),
        (
            &["auth", "login", url, "--header", "Authorization: Bearer x"],
            "Authorization",
        ),
    ] {
        let out = ssegate(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(text(&out.stderr).contains(says), "{args:?}: {out:?}");
    }
    // Every command that speaks to a server lists the sign-in flags.
    for command in [
        &["call", "--help"][..],
        &["bridge", "--help"],
        &["auth", "login", "--help"],
    ] {
        let help = text(&ssegate(command, &[]).stdout);
        for flag in [
            "--client-id",
            "--client-secret",
            "--client-secret-env",
            "--scope",
            "--callback-port",
            "--no-resource",
            "--auth-timeout",
            "--client-credentials",
            "--no-auth",
        ] {
            assert!(help.contains(flag), "{command:?} {flag}");
        }
    }
}

// End to end: the library's sign-in, the kit's authorization server, the command's store and
// callback.

/// The kit's MCP server behind its protected endpoint, and the authorization server.
struct Protected {
    _mcp: RunningServer,
    auth: AuthServer,
    protected: ProtectedServer,
}

fn protected(rt: &tokio::runtime::Runtime, config: AuthServerConfig) -> Protected {
    rt.block_on(async {
        let mcp = ServerConfig::default()
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let auth = AuthServer::start(config).await.unwrap();
        let protected = ProtectedServer::start(mcp.addr(), &auth, ProtectedConfig::default())
            .await
            .unwrap();
        Protected {
            _mcp: mcp,
            auth,
            protected,
        }
    })
}

/// `ssegate call URL big_result` with the headless browser, signing in into `dir`.
fn call(url: &str, dir: &Path, extra: &[&str]) -> Output {
    // A browser that never comes back ends the test in 30 s, with the auth error.
    let mut args = vec![
        "call",
        url,
        "big_result",
        "--args",
        r#"{"size": 64}"#,
        "--auth-timeout",
        "30",
    ];
    args.extend_from_slice(extra);
    ssegate(&args, &env(dir))
}

#[test]
fn the_first_call_signs_in_once_and_the_next_reuses_the_stored_credentials() {
    let rt = runtime();
    let s = protected(&rt, AuthServerConfig::default());
    let url = s.protected.url();
    let dir = auth_dir("first");
    let out = call(&url, &dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text(&out.stderr).contains("Open this URL to sign in to"),
        "{out:?}"
    );
    let stats = s.auth.stats();
    assert_eq!(
        (stats.authorizations, stats.code_grants),
        (1, 1),
        "{stats:?}"
    );
    // What was stored, private to the user.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(
            files
                .iter()
                .any(|f| f.extension().is_some_and(|x| x == "json")),
            "{files:?}"
        );
        for f in &files {
            assert_eq!(mode(f), 0o600, "{f:?}");
        }
    }
    let out = ssegate(&["auth", "status", "--json", &url], &env(&dir));
    let status: Value = serde_json::from_slice(&out.stdout).expect("status");
    assert_eq!(status["accessToken"], true, "{status}");
    assert_eq!(status["issuer"], s.auth.issuer(), "{status}");
    // A second start: no sign-in, no browser.
    let out = call(&url, &dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!text(&out.stderr).contains("Open this URL"), "{out:?}");
    let stats = s.auth.stats();
    assert_eq!(
        (stats.authorizations, stats.code_grants),
        (1, 1),
        "{stats:?}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn two_bridges_started_together_sign_in_once() {
    let rt = runtime();
    let s = protected(&rt, AuthServerConfig::default());
    let url = s.protected.url();
    let dir = auth_dir("together");
    let mut env = env(&dir);
    // The first sign-in takes a second and a half: the other bridge meets it (its request is
    // refused too, and it waits for the sign-in instead of starting its own).
    env.push((BROWSER_DELAY.to_owned(), "1500".to_owned()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut hosts: Vec<Host> = (0..2)
        .map(|_| Host::start_with_env(&[&url, "--auth-timeout", "30"], &env))
        .collect();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "h", "version": "1"}}});
    for host in &mut hosts {
        host.send(&init);
    }
    for host in &mut hosts {
        let response = host.response(&json!(0));
        assert!(response.get("result").is_some(), "{response}");
        let tools = host.request(json!(1), "tools/list", json!({}));
        assert!(tools["result"]["tools"].is_array(), "{tools}");
    }
    let stats = s.auth.stats();
    assert_eq!(stats.authorizations, 1, "{stats:?}");
    // Both were refused at first: the second waited for the first's sign-in.
    assert!(stats.tokens_accepted >= 4, "{stats:?}");
    let stderr = hosts[0].stderr() + &hosts[1].stderr();
    assert!(stderr.contains("another ssegate is signing in"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn an_expired_token_is_refreshed_by_the_next_start_without_the_user() {
    let rt = runtime();
    let mut config = AuthServerConfig::default();
    config.access_token_ttl(Duration::from_secs(2));
    let s = protected(&rt, config);
    let url = s.protected.url();
    let dir = auth_dir("refresh");
    let out = call(&url, &dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::thread::sleep(Duration::from_secs(3));
    // A later process, the token expired: refreshed with the stored refresh token.
    let out = ssegate(
        &["call", &url, "big_result", "--args", r#"{"size": 64}"#],
        &[("SSEGATE_AUTH_DIR".to_owned(), dir.display().to_string())],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stats = s.auth.stats();
    assert_eq!(stats.authorizations, 1, "{stats:?}");
    assert!(stats.refresh_grants >= 1, "{stats:?}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_refused_sign_in_is_the_auth_error_saying_what_to_do() {
    let rt = runtime();
    let mut config = AuthServerConfig::default();
    config.approve(false);
    let s = protected(&rt, config);
    let url = s.protected.url();
    let dir = auth_dir("refused");
    let out = call(&url, &dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let last = text(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(last.starts_with("ssegate call: auth: "), "{last}");
    assert!(
        last.contains(&format!("ssegate auth login {url}")),
        "{last}"
    );
    // The bridge: each request that waited for the sign-in gets the error, the bridge goes on.
    let env = env(&dir);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut host = Host::start_with_env(&[&url, "--auth-timeout", "30"], &env);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "h", "version": "1"}});
    host.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}));
    host.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}));
    for id in [0, 1] {
        let response = host.response(&json!(id));
        let error = &response["error"];
        assert_eq!(error["code"], ssegate::contract::UNAVAILABLE, "{response}");
        assert_eq!(error["data"]["kind"], "auth", "{response}");
        assert_eq!(error["data"]["outcome"], "not-run", "{response}");
        let reason = error["data"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("ssegate auth login {url}")),
            "{reason}"
        );
    }
    // Both waited for one sign-in: two authorizations in all, the call's and the bridge's.
    assert_eq!(s.auth.stats().authorizations, 2, "{:?}", s.auth.stats());
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn login_signs_in_ahead_status_shows_it_and_logout_forgets_it() {
    let rt = runtime();
    let s = protected(&rt, AuthServerConfig::default());
    let url = s.protected.url();
    let dir = auth_dir("login");
    let out = ssegate(&["auth", "login", &url], &env(&dir));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text(&out.stderr).contains(&format!("signed in to {url}")),
        "{out:?}"
    );
    assert!(text(&out.stdout).contains("refresh token: yes"), "{out:?}");
    assert_eq!(s.auth.stats().authorizations, 1);
    // A bridge started afterwards: no sign-in.
    let env = [("SSEGATE_AUTH_DIR".to_owned(), dir.display().to_string())];
    let out = ssegate(
        &["call", &url, "big_result", "--args", r#"{"size": 8}"#],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(s.auth.stats().authorizations, 1);
    let out = ssegate(&["auth", "logout", &url], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = ssegate(&["auth", "status", &url], &env);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // `--no-auth`: the server's 401 is an error, no sign-in.
    let out = ssegate(&["call", &url, "big_result", "--no-auth"], &env);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(s.auth.stats().authorizations, 1);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn a_process_killed_mid_sign_in_does_not_block_the_next_one() {
    let rt = runtime();
    let s = protected(&rt, AuthServerConfig::default());
    let url = s.protected.url();
    let dir = auth_dir("killed");
    // The first start waits for a user who never comes back (its browser opens nothing), holding
    // the sign-in lock; it is killed (SIGKILL: nothing of its own runs) while it waits.
    let mut env = env(&dir);
    env.push((BROWSER_AWAY.to_owned(), "1".to_owned()));
    let mut first = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args([
            "call",
            url.as_str(),
            "big_result",
            "--args",
            r#"{"size": 64}"#,
            "--auth-timeout",
            "60",
        ])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ssegate");
    let stderr = first.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // "Open this URL" is said after the lock is taken (`SignIn::exclusive` comes first).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut said: Vec<String> = Vec::new();
    while !said
        .iter()
        .any(|l| l.contains("Open this URL to sign in to"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => said.push(line),
            Err(e) => panic!("the first start never asked for a sign-in ({e}): {said:?}"),
        }
    }
    first.kill().expect("kill the first start");
    first.wait().unwrap();
    // It left its lock file behind: a lock that lived in the file's existence would block now.
    let locks: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".signin.lock"))
        .collect();
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(s.auth.stats().authorizations, 0, "{:?}", s.auth.stats());

    // The next start signs in at once (the OS released the killed process's lock).
    let started = Instant::now();
    let out = call(&url, &dir, &[]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Open this URL to sign in to"), "{out:?}");
    assert!(!stderr.contains("another ssegate is signing in"), "{out:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {out:?}");
    let stats = s.auth.stats();
    assert_eq!(
        (stats.authorizations, stats.code_grants),
        (1, 1),
        "{stats:?}"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}
