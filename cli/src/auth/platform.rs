//! What differs between platforms, in one place: where credentials live, how their directory and
//! files are made private, and how a URL is opened in the user's browser.
//!
//! | platform | credentials directory |
//! | --- | --- |
//! | Linux, BSD | `$XDG_CONFIG_HOME/ssegate/auth`, else `~/.config/ssegate/auth` |
//! | macOS | `~/Library/Application Support/ssegate/auth` |
//! | Windows | `%APPDATA%\ssegate\auth` |
//!
//! `SSEGATE_AUTH_DIR` overrides it everywhere. On Unix the directory is made `0700` and every file
//! is created `0600` (the mode is given when the file is created, never set after a secret is
//! written); on Windows `%APPDATA%` is already the user's own (its ACL), so nothing is added.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable that names the credentials directory (tests, several profiles).
pub(crate) const AUTH_DIR_ENV: &str = "SSEGATE_AUTH_DIR";

/// The environment variable that names the browser to open URLs with (the usual convention).
pub(crate) const BROWSER_ENV: &str = "BROWSER";

/// The credentials directory, or why there is none (no home directory).
pub(crate) fn auth_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(AUTH_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    config_dir().map(|d| d.join("ssegate").join("auth"))
}

#[cfg(all(unix, not(target_os = "macos")))]
fn config_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Ok(PathBuf::from(dir));
    }
    home().map(|h| h.join(".config"))
}

#[cfg(target_os = "macos")]
fn config_dir() -> Result<PathBuf, String> {
    home().map(|h| h.join("Library").join("Application Support"))
}

#[cfg(unix)]
fn home() -> Result<PathBuf, String> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| format!("HOME is not set (set {AUTH_DIR_ENV} to keep credentials)"))
}

#[cfg(windows)]
fn config_dir() -> Result<PathBuf, String> {
    std::env::var_os("APPDATA")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| format!("APPDATA is not set (set {AUTH_DIR_ENV} to keep credentials)"))
}

#[cfg(not(any(unix, windows)))]
fn config_dir() -> Result<PathBuf, String> {
    Err(format!(
        "no credentials directory on this platform (set {AUTH_DIR_ENV})"
    ))
}

/// Creates `dir` (and its parents) private to the user: `0700` on Unix, also when it was there
/// with a wider mode (a directory holds no secret of its own: its mode can be narrowed after).
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let meta = std::fs::metadata(dir)?;
        if meta.permissions().mode() & 0o777 != 0o700 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Creates a new file that must not exist yet, private to the user from the start (`0600` on
/// Unix), for writing.
pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    private(&mut options);
    options.open(path)
}

/// Opens (creating it if needed, never truncating) a lock file, private to the user.
pub(crate) fn open_lock_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    private(&mut options);
    options.open(path)
}

#[cfg(unix)]
fn private(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.mode(0o600);
}

#[cfg(not(unix))]
fn private(_: &mut OpenOptions) {}

/// Opens `url` in the user's browser: `$BROWSER` when set (its first `:`-separated entry on Unix;
/// `%s` stands for the URL, else the URL is the last argument), else the platform's opener. The
/// opener runs on its own (its exit is awaited on a thread of its own, never by the caller); its
/// stdout is discarded (the bridge's stdout carries JSON-RPC), its stderr is the command's.
pub(crate) fn open_browser(url: &str) -> Result<(), String> {
    let mut command = match std::env::var(BROWSER_ENV)
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        Some(browser) => browser_command(&browser, url)?,
        None => platform_opener(url),
    };
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

/// The command `$BROWSER` names, with `url`.
fn browser_command(browser: &str, url: &str) -> Result<Command, String> {
    #[cfg(unix)]
    let browser = browser
        .split(':')
        .find(|b| !b.trim().is_empty())
        .unwrap_or(browser);
    let mut words = browser.split_whitespace();
    let program = words
        .next()
        .ok_or_else(|| format!("{BROWSER_ENV} is empty"))?;
    let mut command = Command::new(program);
    let mut placed = false;
    for word in words {
        if word.contains("%s") {
            command.arg(word.replace("%s", url));
            placed = true;
        } else {
            command.arg(word);
        }
    }
    if !placed {
        command.arg(url);
    }
    Ok(command)
}

#[cfg(all(unix, not(target_os = "macos")))]
fn platform_opener(url: &str) -> Command {
    let mut command = Command::new("xdg-open");
    command.arg(url);
    command
}

#[cfg(target_os = "macos")]
fn platform_opener(url: &str) -> Command {
    let mut command = Command::new("open");
    command.arg(url);
    command
}

#[cfg(windows)]
fn platform_opener(url: &str) -> Command {
    use std::os::windows::process::CommandExt;
    // `start`'s first quoted argument is the window title; the URL is quoted so that cmd.exe
    // reads its `&` as part of it. A URL holds no `"` (it would be percent-encoded).
    let mut command = Command::new("cmd");
    command.raw_arg(format!("/c start \"\" \"{}\"", url.replace('"', "%22")));
    command
}

#[cfg(not(any(unix, windows)))]
fn platform_opener(url: &str) -> Command {
    let mut command = Command::new("xdg-open");
    command.arg(url);
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_places_the_url_at_percent_s_or_last() {
        let c = browser_command("firefox --new-tab", "http://x/?a=1&b=2").unwrap();
        assert_eq!(c.get_program(), "firefox");
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["--new-tab", "http://x/?a=1&b=2"]);
        let c = browser_command("open -a Safari %s --x", "http://x/").unwrap();
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["-a", "Safari", "http://x/", "--x"]);
    }

    #[cfg(unix)]
    #[test]
    fn browser_takes_the_first_of_a_colon_list() {
        let c = browser_command("w3m:lynx", "http://x/").unwrap();
        assert_eq!(c.get_program(), "w3m");
    }
}
