//! A `redis-server` child process per test, on a free loopback port, without persistence.
//!
//! When `redis-server` is not on `PATH`, [`Server::start`] panics if the environment variable `CI`
//! is set, and otherwise returns `None` after a loud message written to the process's stderr (the
//! test harness does not capture it).

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process on a loopback port; killed on drop.
pub struct Server {
    port: u16,
    child: Option<Child>,
}

fn redis_server_path() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

impl Server {
    /// Starts a server, or returns `None` (after a loud message) when `redis-server` is missing
    /// outside CI. Panics when it is missing under CI.
    pub fn start() -> Option<Server> {
        if redis_server_path().is_none() {
            if std::env::var_os("CI").is_some() {
                panic!("redis-server not found on PATH and CI is set: install redis-server");
            }
            // Straight to the process's stderr: the test harness captures `eprintln!` (and shows
            // it only for failing tests), so a skip would pass silently.
            let _ = writeln!(
                std::io::stderr(),
                "\n!!! SKIPPED: redis-server not found on PATH; the Redis store is NOT tested \
                 (apt-get install redis-server; CI=1 makes this a failure) !!!\n"
            );
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = Server { port, child: None };
        server.restart();
        Some(server)
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server and waits until its port refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Wait until the port refuses connections.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// (Re)starts the server on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new(redis_server_path().expect("checked in start"))
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
