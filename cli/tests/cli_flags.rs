//! The flags that reach a server, shared by `bridge`, `call` and `probe` (`${VAR}` in `--header`,
//! `--header-file`, `--allow-http`, `--connect-timeout`), the proxy variables, and the bridge's
//! `--ignore-tool`: against the test kit's loopback server, a loopback forward proxy (which sees
//! what the command sends) and a loopback listener that never accepts.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use ssegate_testkit::server::{RunningServer, ServerConfig, ServerMode};

use common::forward::ForwardProxy;
use common::host::{Host, tool_names};
use common::{call_with_env, runtime};

// The oracle: JSON-RPC's code for invalid params, stated here independently.
const INVALID_PARAMS: i64 = -32602;

fn server(rt: &tokio::runtime::Runtime) -> RunningServer {
    rt.block_on(async {
        let mut sc = ServerConfig::default();
        sc.mode(ServerMode::Buffered).retry_ms(5);
        sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
    })
}

/// A bridge started with `args` that must exit 2 at once, before reading its host: its stderr.
fn bridge_usage_error(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut host = Host::start_with_env(args, env);
    let (code, _) = host.wait(Duration::from_secs(10));
    let stderr = host.stderr();
    assert_eq!(code, Some(2), "{stderr}");
    stderr
}

#[test]
fn ignore_tool_hides_matching_tools_and_answers_their_calls_itself() {
    let rt = runtime();
    let server = server(&rt);
    let url = server.url();
    let mut host = Host::start(&[&url, "--ignore-tool", "b*", "--ignore-tool", "nothing?"]);
    host.initialize("2025-11-25");
    let tools = host.request(json!(1), "tools/list", json!({}));
    assert_eq!(tool_names(&tools), ["progress"], "{tools}");
    // Every page: a second list (with a cursor the server ignores) is filtered too.
    let again = host.request(json!(2), "tools/list", json!({"cursor": "next"}));
    assert!(
        !tool_names(&again).contains(&"big_result".to_owned()),
        "{again}"
    );

    // Let the bridge's own requests (the notification stream) settle, then count.
    std::thread::sleep(Duration::from_millis(300));
    let before = server.stats();
    let refused = host.request(
        json!(3),
        "tools/call",
        json!({"name": "big_result", "arguments": {"size": 10, "seed": 1}}),
    );
    assert_eq!(refused["error"]["code"], INVALID_PARAMS, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--ignore-tool") && message.contains("big_result"),
        "{message}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let after = server.stats();
    assert_eq!(
        after.requests, before.requests,
        "the server never saw the call"
    );
    assert_eq!(after.calls, 0);

    // Other tools are untouched.
    let ran = host.request(
        json!(4),
        "tools/call",
        json!({"name": "progress", "arguments": {"count": 1}}),
    );
    assert!(ran.get("result").is_some(), "{ran}");
    assert_eq!(server.stats().calls, 1);
    host.close_stdin();
    assert_eq!(host.wait(Duration::from_secs(5)).0, Some(0));
}

#[test]
fn a_2026_07_28_host_gets_the_filtered_list_with_the_members_that_revision_requires() {
    let rt = runtime();
    for mode in [ServerMode::Strict, ServerMode::Stateless] {
        let server = rt.block_on(async {
            let mut sc = ServerConfig::default();
            sc.mode(mode);
            sc.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
        });
        let mut host = Host::start(&[&server.url(), "--ignore-tool", "BIG_?esult"]);
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "host-2026", "version": "1"},
        });
        let discover = host.request(json!(0), "server/discover", json!({"_meta": meta}));
        assert!(discover.get("result").is_some(), "{mode:?}: {discover}");
        let tools = host.request(json!(1), "tools/list", json!({"_meta": meta}));
        let names = tool_names(&tools);
        assert!(
            !names.contains(&"big_result".to_owned()),
            "{mode:?}: {tools}"
        );
        assert!(names.contains(&"progress".to_owned()), "{mode:?}: {tools}");
        let result = &tools["result"];
        assert_eq!(result["resultType"], "complete", "{mode:?}: {tools}");
        assert_eq!(result["ttlMs"], 0, "{mode:?}: {tools}");
        let refused = host.request(
            json!(2),
            "tools/call",
            json!({"name": "big_result", "arguments": {}, "_meta": meta}),
        );
        assert_eq!(
            refused["error"]["code"], INVALID_PARAMS,
            "{mode:?}: {refused}"
        );
        assert_eq!(server.stats().calls, 0);
    }
}

#[test]
fn without_ignore_tool_every_tool_is_listed() {
    let rt = runtime();
    let server = server(&rt);
    let mut host = Host::start(&[&server.url()]);
    host.initialize("2025-11-25");
    let tools = host.request(json!(1), "tools/list", json!({}));
    assert_eq!(tool_names(&tools), ["big_result", "progress"], "{tools}");
}

#[test]
fn headers_take_environment_variables_and_a_header_file_and_reach_the_server() {
    let rt = runtime();
    let server = server(&rt);
    let proxy = ForwardProxy::start(server.addr());
    let dir = std::env::temp_dir().join(format!("ssegate-cli-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("headers");
    std::fs::write(
        &file,
        "# the team's key\n\nX-Team-Key: team-${SSEGATE_TEST_TEAM}\nX-Literal: a $${b}\n",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();
    let url = server.url();
    let proxy_url = proxy.url();
    let mut host = Host::start_with_env(
        &[
            &url,
            "--header",
            "X-Api-Key: Key ${SSEGATE_TEST_KEY}",
            "--header-file",
            file_arg,
        ],
        &[
            ("HTTP_PROXY", &proxy_url),
            ("SSEGATE_TEST_KEY", "k-123"),
            ("SSEGATE_TEST_TEAM", "blue"),
        ],
    );
    host.initialize("2025-11-25");
    let heads = proxy.heads();
    assert!(!heads.is_empty(), "the requests went through the proxy");
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("\r\nx-api-key: key k-123\r\n"), "{head}");
        assert!(lower.contains("\r\nx-team-key: team-blue\r\n"), "{head}");
        assert!(lower.contains("\r\nx-literal: a ${b}\r\n"), "{head}");
    }
    drop(host);

    // An unset variable: exit 2 naming the variable and the flag; nothing sent.
    let sent = proxy.heads().len();
    let env = [("HTTP_PROXY", proxy_url.as_str())];
    let stderr = bridge_usage_error(
        &[&url, "--header", "X-Api-Key: ${SSEGATE_TEST_UNSET}"],
        &env,
    );
    assert!(
        stderr.contains("--header") && stderr.contains("SSEGATE_TEST_UNSET"),
        "{stderr}"
    );
    let run = call_with_env(
        &[
            &url,
            "big_result",
            "--header",
            "X-Api-Key: ${SSEGATE_TEST_UNSET}",
        ],
        &env,
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("SSEGATE_TEST_UNSET"), "{run:?}");
    let probe = common::ssegate(
        "probe",
        &[&url, "--header", "X-Api-Key: ${SSEGATE_TEST_UNSET}"],
        b"",
    );
    assert_eq!(probe.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&probe.stderr).contains("SSEGATE_TEST_UNSET"));

    // A header file's bad line: named with the file.
    std::fs::write(&file, "X-Ok: 1\n# fine\nnot a header\n").unwrap();
    let stderr = bridge_usage_error(&[&url, "--header-file", file_arg], &env);
    assert!(
        stderr.contains(&format!("--header-file {file_arg} line 3")),
        "{stderr}"
    );
    // An Authorization header from the file is a static token, as from --header: no sign-in.
    std::fs::write(&file, "Authorization: Bearer x\n").unwrap();
    let login = common::ssegate("auth", &["login", &url, "--header-file", file_arg], b"");
    assert_eq!(login.status.code(), Some(2), "{login:?}");
    assert!(
        String::from_utf8_lossy(&login.stderr).contains("static token needs no sign-in"),
        "{login:?}"
    );
    std::fs::write(&file, "X-Key: ${SSEGATE_TEST_UNSET}\n").unwrap();
    let run = call_with_env(&[&url, "big_result", "--header-file", file_arg], &env);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("line 1") && run.stderr.contains("SSEGATE_TEST_UNSET"),
        "{run:?}"
    );
    assert_eq!(proxy.heads().len(), sent, "no request for a bad header");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plain_http_to_a_host_that_is_not_loopback_needs_allow_http() {
    let rt = runtime();
    let server = server(&rt);
    // No DNS, no network: the proxy takes every request, whatever host its URL names.
    let proxy = ForwardProxy::start(server.addr());
    let proxy_url = proxy.url();
    let env = [("HTTP_PROXY", proxy_url.as_str())];
    let remote = "http://mcp.example.com/mcp";

    let stderr = bridge_usage_error(&[remote], &env);
    assert!(stderr.contains("--allow-http"), "{stderr}");
    let run = call_with_env(&[remote, "progress"], &env);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--allow-http"), "{run:?}");
    let probe = common::ssegate("probe", &[remote], b"");
    assert_eq!(probe.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&probe.stderr).contains("--allow-http"));
    assert!(proxy.heads().is_empty(), "nothing was sent");

    // With the flag, the same URL is spoken to (through the proxy).
    let mut host = Host::start_with_env(&[remote, "--allow-http"], &env);
    host.initialize("2025-11-25");
    let ran = host.request(
        json!(1),
        "tools/call",
        json!({"name": "progress", "arguments": {"count": 1}}),
    );
    assert!(ran.get("result").is_some(), "{ran}");
    let seen = proxy.seen();
    assert!(
        seen.iter()
            .any(|l| l.starts_with("POST http://mcp.example.com/mcp ")),
        "{seen:?}"
    );
}

#[test]
fn the_proxy_variables_are_honoured_and_no_proxy_bypasses_them() {
    let rt = runtime();
    let server = server(&rt);
    let proxy = ForwardProxy::start(server.addr());
    let url = server.url();
    let proxy_url = proxy.url();
    let absolute = format!("POST {url} ");

    for var in ["HTTP_PROXY", "http_proxy"] {
        let before = proxy.seen().len();
        let mut host = Host::start_with_env(&[&url], &[(var, &proxy_url)]);
        host.initialize("2025-11-25");
        let tools = host.request(json!(1), "tools/list", json!({}));
        assert!(tool_names(&tools).contains(&"big_result".to_owned()));
        let seen = proxy.seen();
        assert!(
            seen[before..].iter().any(|l| l.starts_with(&absolute)),
            "{var}: the bridge's requests went through the proxy: {seen:?}"
        );
    }

    let before = proxy.seen().len();
    for (no, value) in [
        ("NO_PROXY", "127.0.0.1"),
        ("no_proxy", "localhost,127.0.0.0/8"),
    ] {
        let mut host = Host::start_with_env(&[&url], &[("HTTP_PROXY", &proxy_url), (no, value)]);
        host.initialize("2025-11-25");
        let tools = host.request(json!(1), "tools/list", json!({}));
        assert!(tool_names(&tools).contains(&"big_result".to_owned()));
    }
    assert_eq!(
        proxy.seen().len(),
        before,
        "{no:?} covers the host",
        no = "NO_PROXY"
    );
}

#[test]
fn https_proxy_tunnels_https_and_no_proxy_bypasses_it() {
    let rt = runtime();
    let server = server(&rt);
    let (front, tunnels) = rt.block_on(async {
        let front = ssegate_testkit::tls::TlsFront::start(server.addr(), None)
            .await
            .unwrap();
        let tunnels = ssegate_testkit::tls::ConnectProxy::start().await.unwrap();
        (front, tunnels)
    });
    let dir = std::env::temp_dir().join(format!("ssegate-cli-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, front.cert_pem()).unwrap();
    let pem = pem.to_str().unwrap();
    let url = front.url();
    let proxy_url = tunnels.url();

    for (proxy_var, no_proxy, expect_tunnel) in [
        ("HTTPS_PROXY", None, true),
        ("https_proxy", None, true),
        ("ALL_PROXY", None, true),
        ("HTTPS_PROXY", Some("localhost"), false),
    ] {
        let before = tunnels.tunnels();
        let mut env = vec![(proxy_var, proxy_url.as_str())];
        if let Some(hosts) = no_proxy {
            env.push(("NO_PROXY", hosts));
        }
        let mut host = Host::start_with_env(&[&url, "--cacert", pem], &env);
        host.initialize("2025-11-25");
        let tools = host.request(json!(1), "tools/list", json!({}));
        assert!(
            tool_names(&tools).contains(&"progress".to_owned()),
            "{tools}"
        );
        let opened = tunnels.tunnels() - before;
        assert_eq!(opened > 0, expect_tunnel, "{env:?}: {opened} tunnels");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A loopback listener whose accept queue is full: a new connection's SYN is dropped, so a
/// connect to it neither succeeds nor fails until the client gives up. The held connections
/// keep it full.
struct Blackhole {
    addr: SocketAddr,
    _listener: socket2::Socket,
    _held: Vec<TcpStream>,
}

fn blackhole() -> Option<Blackhole> {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let mut held = Vec::new();
    for _ in 0..64 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => {
                return Some(Blackhole {
                    addr,
                    _listener: listener,
                    _held: held,
                });
            }
        }
    }
    None
}

#[test]
fn connect_timeout_ends_a_connect_that_hangs_with_a_typed_error() {
    let Some(hole) = blackhole() else {
        let why = "this system accepted 64 connections past a listen backlog of 0: no blackhole";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("SKIPPED connect_timeout test: {why}");
        return;
    };
    let url = format!("http://{}/mcp", hole.addr);

    // `call`: the connect gives up after 0.5 s (each attempt); the default would be 10 s.
    let started = Instant::now();
    let run = call_with_env(
        &[
            &url,
            "progress",
            "--connect-timeout",
            "0.5",
            "--timeout",
            "60",
            "--no-auth",
        ],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("unreachable"), "{run:?}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {run:?}");

    // The bridge: its host's initialize is answered with the error, in time.
    let started = Instant::now();
    let mut host = Host::start(&[
        &url,
        "--connect-timeout",
        "0.5",
        "--timeout",
        "60",
        "--no-auth",
    ]);
    let response = host.request(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "test-host", "version": "1"}}),
    );
    let took = started.elapsed();
    assert_eq!(
        response["error"]["data"]["kind"], "unreachable",
        "{response}"
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
}
