//! What differs between platforms for the process, in one place: the requests to stop, replacing
//! the running program with itself under another environment, and stdout as a file of its own.
//! (What differs for sign-in, where credentials live and how a browser is opened, is in
//! `auth/platform.rs`.)
//!
//! | concern | Unix (Linux, macOS, BSD) | Windows |
//! | --- | --- | --- |
//! | [`Shutdown`] | `SIGTERM`, `SIGINT` | Ctrl-C, Ctrl-Break |
//! | [`reexec_with_env`] | `exec` of the same program, arguments and `argv[0]` | not done: `Unsupported` |
//! | [`stdout_file`] | a duplicate of descriptor 1 | a duplicate of the standard output handle |

use std::fs::File;
use std::io;

/// The requests to stop the process that the platform delivers: `SIGTERM` and `SIGINT` on Unix,
/// Ctrl-C and Ctrl-Break on Windows. A handler that cannot be installed is left out (its request
/// then ends the process the platform's default way); with none, [`Shutdown::recv`] never
/// resolves.
#[derive(Debug)]
pub(crate) struct Shutdown {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(windows)]
    ctrl_c: Option<tokio::signal::windows::CtrlC>,
    #[cfg(windows)]
    ctrl_break: Option<tokio::signal::windows::CtrlBreak>,
}

impl Shutdown {
    /// Installs the handlers; from now on the requests are held for [`Shutdown::recv`] instead of
    /// ending the process. Must run inside a tokio runtime with its I/O driver.
    pub(crate) fn listen() -> Shutdown {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Shutdown {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows::{ctrl_break, ctrl_c};
            Shutdown {
                ctrl_c: ctrl_c().ok(),
                ctrl_break: ctrl_break().ok(),
            }
        }
        #[cfg(not(any(unix, windows)))]
        {
            Shutdown {}
        }
    }

    /// Resolves at the next request to stop.
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                () = next(self.term.as_mut().map(|s| s.recv())) => {}
                () = next(self.int.as_mut().map(|s| s.recv())) => {}
            }
        }
        #[cfg(windows)]
        {
            tokio::select! {
                () = next(self.ctrl_c.as_mut().map(|s| s.recv())) => {}
                () = next(self.ctrl_break.as_mut().map(|s| s.recv())) => {}
            }
        }
        #[cfg(not(any(unix, windows)))]
        {
            std::future::pending::<()>().await;
        }
    }
}

/// Waits for `recv` (a handler's next request), forever when there is no handler.
#[cfg(any(unix, windows))]
async fn next(recv: Option<impl Future<Output = Option<()>>>) {
    match recv {
        // `None`: the handler's stream ended (it does not, while the runtime runs).
        Some(recv) => {
            if recv.await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Replaces the running program with itself (the same executable, arguments and `argv[0]`), with
/// `name=value` added to its environment: for settings read before `main` (the allocator's).
/// Returns only if that did not happen: on Unix the error of `exec`; elsewhere an error of kind
/// [`io::ErrorKind::Unsupported`] (nothing was tried: Windows has no `exec`, and a child process
/// in its place would stand between the host and its server), so the caller goes on as it is.
pub(crate) fn reexec_with_env(name: &str, value: &str) -> io::Error {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;

        let exe = match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => return e,
        };
        let mut args = std::env::args_os();
        let mut command = std::process::Command::new(exe);
        if let Some(arg0) = args.next() {
            command.arg0(arg0);
        }
        command.args(args).env(name, value).exec()
    }
    #[cfg(not(unix))]
    {
        let _ = (name, value);
        io::Error::new(
            io::ErrorKind::Unsupported,
            "this platform cannot replace a running program",
        )
    }
}

/// The process's stdout as a file of its own (a duplicate of the descriptor or handle), written
/// past `std::io::Stdout`'s line buffer and lock. An error when stdout is closed or absent.
pub(crate) fn stdout_file() -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::AsHandle;
        Ok(File::from(io::stdout().as_handle().try_clone_to_owned()?))
    }
    #[cfg(not(any(unix, windows)))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "stdout as a file is not supported on this platform",
        ))
    }
}
