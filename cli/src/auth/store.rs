//! The command's credential store: one file per server in the user's credentials directory
//! ([`platform::auth_dir`]), implementing the library's (rmcp's) [`CredentialStore`].
//!
//! A server's file is `<host>-<hash>.json`, the hash of its key: the server's canonical resource
//! URI (RFC 8707: scheme and host lowercased, the default port and the fragment dropped), so two
//! endpoints of one host are two files. The file records the URL in clear (for `ssegate auth
//! status`) and everything a later process needs to use or refresh the tokens without the user:
//! the client registration (id, and the secret when the client has one, which rmcp's
//! [`StoredCredentials`] has no field for), the redirect URI it was registered with, the tokens,
//! when they were received, the issuer and the granted scopes.
//!
//! Writes go to a temporary file created `0600` in the same directory, then renamed over the old
//! one: a reader sees the old file or the new one, never half of one. Two lock files per server
//! coordinate processes (OS file locks, released when the process dies): `<stem>.refresh.lock`
//! around a refresh ([`CredentialStore::acquire_refresh_guard`]: two processes never spend one
//! refresh token), `<stem>.signin.lock` around a sign-in ([`FileStore::lock_sign_in`]).

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ssegate::client::auth::{
    CredentialRefreshGuard, CredentialStore, OAuthError, StoredCredentials,
};

use super::platform;

/// The version of the file's format.
const FORMAT: u32 = 1;

/// The longest wait for another process's refresh (one token request).
const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(60);

/// How often a held lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// What a server's credentials are keyed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerKey {
    /// The canonical resource URI.
    resource: String,
    /// The file name without its extension: `<host>-<hash>`.
    stem: String,
    hash: u64,
}

impl ServerKey {
    /// The key of the server at `url` (`http` or `https`).
    pub(crate) fn of(url: &str) -> Result<ServerKey, String> {
        let mut parsed = reqwest::Url::parse(url).map_err(|e| format!("URL {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("URL {url:?}: not http(s)"));
        }
        parsed.set_fragment(None);
        let mut resource = parsed.to_string();
        // `https://host` and `https://host/` are one resource; the form without the slash.
        if parsed.path() == "/" && parsed.query().is_none() {
            resource.pop();
        }
        let hash = fnv1a(resource.as_bytes());
        let host: String = parsed
            .host_str()
            .unwrap_or("server")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let host = match parsed.port() {
            Some(port) => format!("{host}_{port}"),
            None => host,
        };
        Ok(ServerKey {
            stem: format!("{host}-{hash:016x}"),
            resource,
            hash,
        })
    }

    /// The callback port this server's sign-ins listen on by default: fixed per server (so the
    /// redirect URI registered with its authorization server stays the same from run to run), in
    /// 33400–33999 (above the usual development ports, below the ephemeral range).
    pub(crate) fn default_port(&self) -> u16 {
        CALLBACK_PORTS.0 + (self.hash % u64::from(CALLBACK_PORTS.1 - CALLBACK_PORTS.0 + 1)) as u16
    }
}

/// The range of default callback ports, both ends included.
pub(crate) const CALLBACK_PORTS: (u16, u16) = (33400, 33999);

/// FNV-1a, 64 bits: a stable hash for file names (stable across Rust releases and platforms, as
/// std's hashers are not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Why the store could not be read or written: each names the file.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// The file (or its directory) could not be read or written.
    Io { path: PathBuf, source: io::Error },
    /// The file is not a credentials file of this format.
    Corrupt { path: PathBuf, reason: String },
    /// The file holds another server's credentials (a hash collision, or a file copied over).
    Foreign { path: PathBuf, resource: String },
    /// Another process held a lock for too long.
    Busy { path: PathBuf, waited: Duration },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            StoreError::Corrupt { path, reason } => write!(
                f,
                "{}: not a credentials file ({reason}); delete it (ssegate auth logout URL) to sign in again",
                path.display()
            ),
            StoreError::Foreign { path, resource } => write!(
                f,
                "{}: holds the credentials of {resource}, not of this server",
                path.display()
            ),
            StoreError::Busy { path, waited } => write!(
                f,
                "{}: another process held the lock for over {} s",
                path.display(),
                waited.as_secs()
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> OAuthError {
        OAuthError::CredentialStoreError(e.to_string())
    }
}

/// A server's file.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct Record {
    /// [`FORMAT`].
    pub(crate) format: u32,
    /// The server's URL as the user gave it.
    pub(crate) server: String,
    /// The canonical resource URI (the key).
    pub(crate) resource: String,
    /// The client's secret, when it has one (rmcp's [`StoredCredentials`] has no field for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// The client was given with `--client-id` (not registered by ssegate).
    #[serde(default)]
    pub(crate) client_given: bool,
    /// The redirect URI the client was registered (or last signed in) with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) redirect_uri: Option<String>,
    /// When the file was written (seconds since the epoch).
    #[serde(default)]
    pub(crate) saved_at: u64,
    /// What rmcp stores: client id, tokens, when received, granted scopes, issuer.
    pub(crate) credentials: StoredCredentials,
}

impl Record {
    /// The token response as JSON (to read its members without naming oauth2's types).
    fn tokens(&self) -> Option<Value> {
        self.credentials
            .token_response
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
    }

    /// Whether an access token is stored.
    pub(crate) fn has_tokens(&self) -> bool {
        self.credentials.token_response.is_some()
    }

    /// Whether a refresh token is stored.
    pub(crate) fn has_refresh_token(&self) -> bool {
        self.tokens()
            .is_some_and(|t| t["refresh_token"].as_str().is_some_and(|r| !r.is_empty()))
    }

    /// When the access token expires (seconds since the epoch), when the server said.
    pub(crate) fn expires_at(&self) -> Option<u64> {
        let expires_in = self.tokens()?["expires_in"].as_u64()?;
        Some(self.credentials.token_received_at? + expires_in)
    }
}

/// The credentials of one server, in its file.
#[derive(Debug)]
pub(crate) struct FileStore {
    dir: PathBuf,
    key: ServerKey,
    server: String,
    /// A client given with `--client-id` (and its secret): kept with the tokens it gets.
    given: Option<(String, Option<String>)>,
    /// The redirect URI of this process's sign-in: kept with the tokens it gets.
    redirect_uri: std::sync::Mutex<Option<String>>,
}

/// Distinguishes the temporary files of one process.
static TEMP: AtomicU64 = AtomicU64::new(0);

impl FileStore {
    /// The store of the server at `url`, in `dir`. Nothing is created until something is saved or
    /// locked.
    pub(crate) fn new(dir: PathBuf, url: &str) -> Result<FileStore, String> {
        Ok(FileStore {
            dir,
            key: ServerKey::of(url)?,
            server: url.to_owned(),
            given: None,
            redirect_uri: std::sync::Mutex::new(None),
        })
    }

    /// A client given on the command line: its secret is kept with the tokens it gets.
    pub(crate) fn given_client(&mut self, id: String, secret: Option<String>) -> &mut Self {
        self.given = Some((id, secret));
        self
    }

    /// The server's file.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.key.stem))
    }

    fn lock_path(&self, what: &str) -> PathBuf {
        self.dir.join(format!("{}.{what}.lock", self.key.stem))
    }

    /// The server's record, if there is one.
    pub(crate) fn read(&self) -> Result<Option<Record>, StoreError> {
        let path = self.path();
        let Some(record) = read_record(&path)? else {
            return Ok(None);
        };
        if record.resource != self.key.resource {
            return Err(StoreError::Foreign {
                path,
                resource: record.resource,
            });
        }
        Ok(Some(record))
    }

    /// Writes `record` whole (a temporary file, then a rename).
    pub(crate) fn write(&self, record: &Record) -> Result<(), StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        platform::create_private_dir(&self.dir).map_err(io(&self.dir))?;
        let text = serde_json::to_vec_pretty(record).expect("a record serializes");
        let temp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            self.key.stem,
            std::process::id(),
            TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        let written = platform::create_private_file(&temp).and_then(|mut file| {
            file.write_all(&text)?;
            file.write_all(b"\n")?;
            file.sync_all()
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(&temp)(e));
        }
        let path = self.path();
        std::fs::rename(&temp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            io(&path)(e)
        })
    }

    /// Deletes the server's file (tokens and registration): whether there was one.
    pub(crate) fn remove(&self) -> Result<bool, StoreError> {
        let path = self.path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// Records the redirect URI the client signs in with: kept with the tokens the sign-in gets
    /// (and written at once into a record that is there).
    pub(crate) fn note_redirect_uri(&self, uri: &str) -> Result<(), StoreError> {
        *self.redirect_uri.lock().expect("redirect lock") = Some(uri.to_owned());
        if let Some(mut record) = self.read()?
            && record.redirect_uri.as_deref() != Some(uri)
        {
            record.redirect_uri = Some(uri.to_owned());
            record.saved_at = now();
            self.write(&record)?;
        }
        Ok(())
    }

    /// A record for `credentials`, keeping what the old one knew of the same client.
    fn record_for(&self, old: Option<Record>, credentials: StoredCredentials) -> Record {
        let mut record = Record {
            format: FORMAT,
            server: self.server.clone(),
            resource: self.key.resource.clone(),
            client_secret: None,
            client_given: false,
            redirect_uri: None,
            saved_at: now(),
            credentials,
        };
        let id = &record.credentials.client_id;
        if let Some(old) = old.filter(|o| o.credentials.client_id == *id) {
            record.client_secret = old.client_secret;
            record.client_given = old.client_given;
            record.redirect_uri = old.redirect_uri;
        }
        if let Some(uri) = self.redirect_uri.lock().expect("redirect lock").clone() {
            record.redirect_uri = Some(uri);
        }
        if let Some((given, secret)) = &self.given
            && given == id
        {
            record.client_given = true;
            if secret.is_some() {
                record.client_secret.clone_from(secret);
            }
        }
        record
    }

    /// Holds this server's sign-in lock, waiting up to `wait` for another process's sign-in
    /// (`on_wait` is called once if it has to wait): `None` when the wait ran out.
    pub(crate) async fn lock_sign_in(
        &self,
        wait: Duration,
        on_wait: impl FnOnce(),
    ) -> Result<Option<File>, StoreError> {
        lock(&self.dir, &self.lock_path("signin"), wait, on_wait).await
    }

    /// Holds this server's refresh lock (the guard of [`CredentialStore::acquire_refresh_guard`]).
    pub(crate) async fn lock_refresh(&self, wait: Duration) -> Result<Option<File>, StoreError> {
        lock(&self.dir, &self.lock_path("refresh"), wait, || {}).await
    }
}

/// Reads a credentials file: `None` when there is none.
pub(crate) fn read_record(path: &Path) -> Result<Option<Record>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if record.format != FORMAT {
        return Err(corrupt(format!(
            "format {}, this ssegate reads {FORMAT}",
            record.format
        )));
    }
    Ok(Some(record))
}

/// The credentials files in `dir` (sorted), none when it does not exist.
pub(crate) fn list(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StoreError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".json") && !name.starts_with('.') {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Takes the OS lock on `path` (created in `dir` if needed), trying again every [`LOCK_POLL`] for
/// up to `wait`. The lock is the file's: it is released when the returned file is dropped, or
/// when the process dies.
async fn lock(
    dir: &Path,
    path: &Path,
    wait: Duration,
    on_wait: impl FnOnce(),
) -> Result<Option<File>, StoreError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| StoreError::Io { path, source }
    };
    platform::create_private_dir(dir).map_err(io(dir))?;
    let file = platform::open_lock_file(path).map_err(io(path))?;
    let deadline = Instant::now() + wait;
    let mut on_wait = Some(on_wait);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(io(path)(e)),
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        if let Some(f) = on_wait.take() {
            f();
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The same token response (compared as JSON: oauth2's type has no `PartialEq`).
fn same_tokens(a: &StoredCredentials, b: &StoredCredentials) -> bool {
    let json = |c: &StoredCredentials| {
        c.token_response
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
    };
    a.client_id == b.client_id && json(a) == json(b)
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, OAuthError> {
        Ok(self.read()?.map(|r| r.credentials))
    }

    /// Saves what rmcp hands over whole. A refresh answer without a new refresh token is saved
    /// with the old one: rmcp puts it back before saving (`AuthorizationManager::refresh_token`,
    /// RFC 6749 §6), so the store saves what it is given.
    async fn save(&self, credentials: StoredCredentials) -> Result<(), OAuthError> {
        // An unreadable old file is replaced: the new credentials are what counts.
        let old = self.read().ok().flatten();
        let record = self.record_for(old, credentials);
        Ok(self.write(&record)?)
    }

    /// Forgets the server: tokens and registration (rmcp clears when the authorization server's
    /// issuer changed, and a registration belongs to its issuer).
    async fn clear(&self) -> Result<(), OAuthError> {
        self.remove()?;
        Ok(())
    }

    /// Drops the tokens, keeps the registration: the next start signs in once, as the same
    /// client. Credentials replaced since (another process refreshed or signed in) are left.
    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), OAuthError> {
        let Some(mut record) = self.read()? else {
            return Ok(());
        };
        if !same_tokens(&record.credentials, credentials) {
            return Ok(());
        }
        record.credentials =
            StoredCredentials::new(record.credentials.client_id.clone(), None, Vec::new(), None)
                .with_issuer(record.credentials.issuer.clone());
        record.saved_at = now();
        Ok(self.write(&record)?)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, OAuthError> {
        match self.lock_refresh(REFRESH_LOCK_WAIT).await? {
            Some(file) => Ok(Some(CredentialRefreshGuard::new(file))),
            None => Err(StoreError::Busy {
                path: self.lock_path("refresh"),
                waited: REFRESH_LOCK_WAIT,
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A fresh directory under the target's temporary directory.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ssegate-store-{name}-{}-{}",
            std::process::id(),
            TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn credentials(client: &str, access: &str, refresh: Option<&str>) -> StoredCredentials {
        let mut tokens =
            json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600});
        if let Some(r) = refresh {
            tokens["refresh_token"] = json!(r);
        }
        serde_json::from_value(json!({
            "client_id": client,
            "token_response": tokens,
            "granted_scopes": ["read", "write"],
            "token_received_at": 1_700_000_000u64,
            "issuer": "https://as.example",
        }))
        .unwrap()
    }

    #[test]
    fn the_key_is_the_canonical_resource() {
        let a = ServerKey::of("HTTPS://MCP.Example.com:443/mcp#frag").unwrap();
        let b = ServerKey::of("https://mcp.example.com/mcp").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.resource, "https://mcp.example.com/mcp");
        assert!(a.stem.starts_with("mcp.example.com-"), "{}", a.stem);
        assert_eq!(
            ServerKey::of("https://h.example/").unwrap(),
            ServerKey::of("https://h.example").unwrap()
        );
        for other in [
            "https://mcp.example.com/other",
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
            "https://mcp.example.com/mcp?tenant=2",
        ] {
            let k = ServerKey::of(other).unwrap();
            assert_ne!(k.stem, b.stem, "{other}");
        }
        let port = b.default_port();
        assert!((CALLBACK_PORTS.0..=CALLBACK_PORTS.1).contains(&port));
        assert_eq!(
            port,
            ServerKey::of("https://mcp.example.com/mcp")
                .unwrap()
                .default_port()
        );
        assert!(ServerKey::of("ftp://x/").is_err());
        assert!(ServerKey::of("not a url").is_err());
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // The published FNV-1a 64 test vectors: file names must not change between releases.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[tokio::test]
    async fn a_round_trip_keeps_tokens_registration_and_secret() {
        let dir = temp_dir("roundtrip");
        let mut store = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.given_client("cid".into(), Some("s3cret".into()));
        store
            .save(credentials("cid", "at1", Some("rt1")))
            .await
            .unwrap();
        // Another process: a store that was given no client.
        let later = FileStore::new(dir.clone(), "https://mcp.example.com/mcp#x").unwrap();
        let loaded = later.load().await.unwrap().expect("saved");
        assert_eq!(loaded.client_id, "cid");
        assert_eq!(loaded.granted_scopes, ["read", "write"]);
        assert_eq!(loaded.token_received_at, Some(1_700_000_000));
        assert_eq!(loaded.issuer.as_deref(), Some("https://as.example"));
        assert!(same_tokens(
            &loaded,
            &credentials("cid", "at1", Some("rt1"))
        ));
        let record = later.read().unwrap().unwrap();
        assert_eq!(record.server, "https://mcp.example.com/mcp");
        assert_eq!(record.client_secret.as_deref(), Some("s3cret"));
        assert!(record.client_given && record.has_refresh_token());
        assert_eq!(record.expires_at(), Some(1_700_003_600));
        // A refresh saved by a process without the secret keeps it: same client.
        later
            .save(credentials("cid", "at2", Some("rt1")))
            .await
            .unwrap();
        let record = later.read().unwrap().unwrap();
        assert_eq!(record.client_secret.as_deref(), Some("s3cret"));
        // Another client's credentials do not inherit it.
        later.save(credentials("other", "at3", None)).await.unwrap();
        let record = later.read().unwrap().unwrap();
        assert_eq!(record.client_secret, None);
        assert!(!record.client_given && !record.has_refresh_token());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_directory_is_0700_and_files_0600() {
        use std::os::unix::fs::PermissionsExt;
        let root = temp_dir("modes");
        let dir = root.join("ssegate").join("auth");
        // A directory that was there with a wider mode is narrowed.
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        store
            .save(credentials("cid", "at", Some("rt")))
            .await
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&store.path()), 0o600);
        let _lock = store.lock_refresh(Duration::ZERO).await.unwrap().unwrap();
        assert_eq!(mode(&store.lock_path("refresh")), 0o600);
        // Created by the store from nothing: every level it makes is 0700.
        let fresh = root.join("fresh").join("auth");
        let store = FileStore::new(fresh.clone(), "https://mcp.example.com/mcp").unwrap();
        store.save(credentials("cid", "at", None)).await.unwrap();
        assert_eq!(mode(&fresh), 0o700);
        assert_eq!(mode(fresh.parent().unwrap()), 0o700);
        assert_eq!(mode(&store.path()), 0o600);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[tokio::test]
    async fn a_corrupt_file_is_an_error_naming_it() {
        let dir = temp_dir("corrupt");
        let store = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        for bad in [
            &b"{\"format\": 1, \"serv"[..],
            b"[]",
            b"\xff\xfe",
            b"{\"format\": 9}",
        ] {
            std::fs::write(store.path(), bad).unwrap();
            let e = store.load().await.unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, OAuthError::CredentialStoreError(_)), "{e:?}");
            assert!(text.contains(&store.path().display().to_string()), "{text}");
        }
        // An unreadable one (a directory where the file should be) too.
        std::fs::remove_file(store.path()).unwrap();
        std::fs::create_dir(store.path()).unwrap();
        let text = store.load().await.unwrap_err().to_string();
        assert!(text.contains(&store.path().display().to_string()), "{text}");
        // Another server's file under this name.
        std::fs::remove_dir(store.path()).unwrap();
        let other = FileStore::new(dir.clone(), "https://other.example/mcp").unwrap();
        other.save(credentials("cid", "at", None)).await.unwrap();
        std::fs::rename(other.path(), store.path()).unwrap();
        let text = store.load().await.unwrap_err().to_string();
        assert!(text.contains("https://other.example/mcp"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_rejected_refresh_token_drops_the_tokens_and_keeps_the_client() {
        let dir = temp_dir("rejected");
        let mut store = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        store.given_client("cid".into(), Some("s".into()));
        let used = credentials("cid", "at1", Some("rt1"));
        store.save(used.clone()).await.unwrap();
        // Replaced since (another process refreshed): left alone.
        store
            .save(credentials("cid", "at2", Some("rt2")))
            .await
            .unwrap();
        store.on_refresh_token_rejected(&used).await.unwrap();
        assert!(store.read().unwrap().unwrap().has_tokens());
        // The credentials used: the tokens go, the registration stays.
        let current = store.load().await.unwrap().unwrap();
        store.on_refresh_token_rejected(&current).await.unwrap();
        let record = store.read().unwrap().unwrap();
        assert!(!record.has_tokens() && !record.has_refresh_token());
        assert_eq!(record.credentials.client_id, "cid");
        assert_eq!(record.client_secret.as_deref(), Some("s"));
        assert_eq!(
            record.credentials.issuer.as_deref(),
            Some("https://as.example")
        );
        // `clear` forgets everything.
        store.clear().await.unwrap();
        assert!(store.read().unwrap().is_none());
        store.clear().await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_refresh_lock_excludes_a_second_holder_until_dropped() {
        let dir = temp_dir("lock");
        let a = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        let b = FileStore::new(dir.clone(), "https://mcp.example.com/mcp").unwrap();
        let other = FileStore::new(dir.clone(), "https://other.example/mcp").unwrap();
        let guard = a.acquire_refresh_guard().await.unwrap().expect("a guard");
        // A second handle on the same lock file (as another process has): excluded.
        assert!(
            b.lock_refresh(Duration::from_millis(200))
                .await
                .unwrap()
                .is_none()
        );
        // Another server's lock and this server's sign-in lock are other locks.
        assert!(other.lock_refresh(Duration::ZERO).await.unwrap().is_some());
        assert!(
            b.lock_sign_in(Duration::ZERO, || {})
                .await
                .unwrap()
                .is_some()
        );
        // Released with the guard: the waiter gets it.
        let waiter = tokio::spawn(async move { b.lock_refresh(Duration::from_secs(10)).await });
        tokio::time::sleep(Duration::from_millis(120)).await;
        drop(guard);
        assert!(waiter.await.unwrap().unwrap().is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
