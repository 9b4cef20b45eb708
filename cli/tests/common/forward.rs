//! A small HTTP forward proxy on 127.0.0.1 for the tests of `HTTP_PROXY`: a client that uses it
//! sends the first request of each connection in absolute form (`POST http://host:port/mcp
//! HTTP/1.1`); the proxy records that request's head, sends the request on to one fixed upstream
//! (whatever host the URL names: nothing leaves loopback) in origin form, and then copies bytes
//! both ways until either side closes.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 << 10;

pub struct ForwardProxy {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl ForwardProxy {
    /// Starts a proxy whose every connection goes on to `upstream`.
    pub fn start(upstream: SocketAddr) -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let seen = seen2.clone();
                std::thread::spawn(move || forward(conn, upstream, &seen));
            }
        });
        ForwardProxy {
            addr,
            seen,
            stop,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`, for `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The head (request line and headers) of each connection's first request, in the order
    /// they came.
    pub fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// The request line of each connection's first request, in the order they came.
    pub fn seen(&self) -> Vec<String> {
        self.heads()
            .iter()
            .map(|h| h.lines().next().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which sees the flag and ends.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// One client connection: its first request head read, recorded and rewritten, then piped.
fn forward(mut client: TcpStream, upstream: SocketAddr, seen: &Mutex<Vec<String>>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HEAD {
            return;
        }
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let line_end = text.find("\r\n").unwrap_or(text.len());
    let request_line = text[..line_end].to_owned();
    seen.lock().unwrap().push(text.clone());
    // `METHOD http://authority/path VERSION` -> `METHOD /path VERSION`.
    let mut parts = request_line.splitn(3, ' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = target
        .strip_prefix("http://")
        .map(|rest| rest.find('/').map_or("/", |i| &rest[i..]))
        .unwrap_or(target);
    let Ok(mut server) = TcpStream::connect(upstream) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let rewritten = format!("{method} {path} {version}{}", &text[line_end..]);
    if server.write_all(rewritten.as_bytes()).is_err() || server.write_all(&head[end..]).is_err() {
        return;
    }
    let _ = client.set_read_timeout(None);
    let (Ok(mut client2), Ok(mut server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client2, &mut server2);
        let _ = server2.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = up.join();
}
