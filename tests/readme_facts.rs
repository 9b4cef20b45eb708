//! The facts the README and the docs state by hand, checked against the manifests and the code:
//! the MSRV, the rmcp requirement and the other dependency versions they name, the feature names
//! (the README's feature table, every "feature `x`" and `--features x`), the crate names, versions
//! and features in `cargo add` / `cargo install` lines, the client's defaults in the README, the
//! defaults of docs/LIMITS.md's table and docs/DESIGN.md's timing rules (against the
//! configurations' `Default`, read through their `Debug` form), and the protocol versions
//! cli/README.md offers.
//!
//! It reads the workspace's files (README.md, cli/README.md, testkit/README.md, docs/*.md and the
//! three published manifests), so it is left out of the library's package (`include` in
//! Cargo.toml): the unpacked crate has none of them.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every hand-written document the test checks, as (path relative to the root, text).
fn docs() -> Vec<(String, String)> {
    let mut paths = vec![
        "README.md".to_owned(),
        "cli/README.md".to_owned(),
        "testkit/README.md".to_owned(),
    ];
    let mut md: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    md.sort();
    assert!(!md.is_empty(), "no docs/*.md found");
    paths.extend(md);
    paths
        .into_iter()
        .map(|p| {
            let text = read(&root().join(&p));
            (p, text)
        })
        .collect()
}

// --- A small reader for the parts of Cargo.toml this test needs -------------------------------

/// The lines of a TOML table (`[name]`), up to the next table header, comments removed.
fn table<'a>(toml: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    let mut lines = toml.lines().map(|l| match l.find(" #") {
        Some(i) if !l[..i].contains('"') || l[..i].matches('"').count() % 2 == 0 => &l[..i],
        _ => l,
    });
    let mut out = Vec::new();
    if lines.by_ref().any(|l| l.trim() == header) {
        for l in lines {
            if l.trim_start().starts_with('[') && l.trim_end().ends_with(']') && !l.contains('=') {
                break;
            }
            let t = l.trim();
            if !t.is_empty() && !t.starts_with('#') {
                out.push(t);
            }
        }
    }
    out
}

/// The first string value of `key = "value"` (or `key = { version = "value", .. }`) in a table.
fn value(lines: &[&str], key: &str) -> Option<String> {
    lines.iter().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let v = v.trim();
        let v = match v.strip_prefix('{') {
            Some(inline) => inline.split_once("version")?.1.split_once('=')?.1,
            None => v,
        };
        Some(v.trim().strip_prefix('"')?.split('"').next()?.to_owned())
    })
}

struct Manifest {
    name: String,
    version: String,
    /// Every feature but `default` and the private `__*` ones.
    features: BTreeSet<String>,
    default_features: String,
    /// (dependency key, package name, version requirement) of [dependencies] and
    /// [dev-dependencies].
    deps: Vec<(String, String, String)>,
}

fn manifest(path: &str) -> Manifest {
    let toml = read(&root().join(path));
    let package = table(&toml, "package");
    let features_table = table(&toml, "features");
    let mut features = BTreeSet::new();
    let mut default_features = String::new();
    for l in &features_table {
        if let Some((k, v)) = l.split_once('=') {
            let k = k.trim();
            if k == "default" {
                default_features = v.trim().to_owned();
            } else if !k.starts_with("__") && !k.starts_with(']') && !k.starts_with('"') {
                features.insert(k.to_owned());
            }
        }
    }
    let workspace = read(&root().join("Cargo.toml"));
    let workspace_deps = table(&workspace, "workspace.dependencies");
    let mut deps = Vec::new();
    for t in ["dependencies", "dev-dependencies"] {
        for l in table(&toml, t) {
            let Some((k, v)) = l.split_once('=') else {
                continue;
            };
            let key = k.trim().trim_end_matches(".workspace").to_owned();
            let package = v
                .split_once("package")
                .and_then(|(_, p)| p.split_once('"'))
                .and_then(|(_, p)| p.split_once('"'))
                .map_or_else(|| key.clone(), |(p, _)| p.to_owned());
            let req = if k.trim().ends_with(".workspace") || v.contains("workspace = true") {
                value(&workspace_deps, &key)
            } else {
                value(&[l], k.trim())
            };
            if let Some(req) = req {
                deps.push((key, package, req));
            }
        }
    }
    Manifest {
        name: value(&package, "name").expect("package name"),
        version: value(&package, "version").expect("package version"),
        features,
        default_features,
        deps,
    }
}

fn library() -> Manifest {
    manifest("Cargo.toml")
}

fn published() -> Vec<Manifest> {
    vec![
        library(),
        manifest("cli/Cargo.toml"),
        manifest("testkit/Cargo.toml"),
        manifest("rng/Cargo.toml"),
    ]
}

/// Whether a version written in a doc names the requirement: the same, or its first components
/// (`0.2` for `0.2.6`, the same semver-compatible series). `=3.11.0` for `3.11` does not.
fn names_requirement(stated: &str, req: &str) -> bool {
    let req = req.trim_start_matches('^');
    stated == req || req.starts_with(&format!("{stated}."))
}

/// The words right after each occurrence of `word`, backticks, brackets and trailing punctuation
/// removed: `rmcp 3.11 (server)` and "`rmcp` =3.11.0" give `3.11` and `=3.11.0`.
fn after<'a>(text: &'a str, word: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find(word) {
            let before = rest[..i].chars().next_back();
            let tail = &rest[i + word.len()..];
            rest = tail;
            // A whole word: not `rmcp-server` or `ssegate::rmcp`.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == ':') {
                continue;
            }
            let tail = tail.trim_start_matches('`');
            if tail.starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_') {
                continue;
            }
            let next = tail.split_whitespace().next().unwrap_or("");
            let trim = |w: &'a str| w.trim_matches(|c: char| "`()[],;:.".contains(c));
            // `rmcp 3.11's`: the possessive is not part of the version.
            let next = trim(trim(next).trim_end_matches("'s"));
            out.push((n + 1, next));
        }
    }
    out
}

fn is_version(word: &str) -> bool {
    let w = word.trim_start_matches(['=', '^', '~']);
    let parts: Vec<&str> = w.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

// --- The checks ------------------------------------------------------------------------------

/// "Rust 1.89 or newer" and any other "Rust 1.x" in the docs: the workspace's `rust-version`.
#[test]
fn msrv_is_the_manifests_rust_version() {
    let workspace = read(&root().join("Cargo.toml"));
    let msrv =
        value(&table(&workspace, "workspace.package"), "rust-version").expect("rust-version");
    let readme = read(&root().join("README.md"));
    assert!(
        readme.contains(&format!("Rust {msrv} or newer")),
        "README.md must say `Rust {msrv} or newer` (the workspace's rust-version)"
    );
    let mut wrong = Vec::new();
    for (path, text) in docs() {
        for (line, v) in after(&text, "Rust") {
            if v.starts_with("1.") && is_version(v) && v != msrv {
                wrong.push(format!("{path}:{line}: Rust {v}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "MSRV is {msrv} (rust-version), the docs say:\n{}",
        wrong.join("\n")
    );
    // The published members inherit it rather than state their own.
    for path in ["cli/Cargo.toml", "testkit/Cargo.toml"] {
        assert!(
            read(&root().join(path)).contains("rust-version.workspace = true"),
            "{path} must inherit rust-version from the workspace"
        );
    }
}

/// Every version written after a dependency's name (`rmcp 3.11`, "`redis` 1.8", `sse-stream 0.3`)
/// names a requirement the manifests have for that crate. The rmcp requirement must be one.
#[test]
fn dependency_versions_match_the_manifests() {
    let manifests = published();
    let mut reqs: Vec<(String, String)> = Vec::new();
    for m in &manifests {
        for (_, package, req) in &m.deps {
            reqs.push((package.clone(), req.clone()));
        }
    }
    let rmcp: BTreeSet<&str> = reqs
        .iter()
        .filter(|(p, _)| p == "rmcp")
        .map(|(_, r)| r.as_str())
        .collect();
    assert_eq!(
        rmcp.len(),
        1,
        "the published manifests disagree on rmcp's requirement: {rmcp:?}"
    );
    let names: BTreeSet<&str> = reqs.iter().map(|(p, _)| p.as_str()).collect();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (path, text) in docs() {
        for name in &names {
            for (line, v) in after(&text, name) {
                if !is_version(v) {
                    // `rmcp 3.x`: the major version only.
                    if let Some(major) = v.strip_suffix(".x")
                        && !reqs
                            .iter()
                            .any(|(p, r)| p == name && r.starts_with(&format!("{major}.")))
                    {
                        wrong.push(format!("{path}:{line}: {name} {v}"));
                    }
                    continue;
                }
                checked += 1;
                let ok = reqs
                    .iter()
                    .any(|(p, r)| p == name && names_requirement(v, r));
                if !ok {
                    let have: Vec<&str> = reqs
                        .iter()
                        .filter(|(p, _)| p == name)
                        .map(|(_, r)| r.as_str())
                        .collect();
                    wrong.push(format!(
                        "{path}:{line}: {name} {v} (the manifests: {have:?})"
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "versions in the docs that no manifest requires:\n{}",
        wrong.join("\n")
    );
    // The README names the rmcp requirement (a guard against the scan finding nothing).
    let rmcp = rmcp.into_iter().next().unwrap();
    assert!(
        read(&root().join("README.md")).contains(&format!("rmcp {rmcp}")),
        "README.md must name rmcp's requirement, rmcp {rmcp}"
    );
    assert!(
        checked >= 3,
        "only {checked} versions found in the docs: the scan is broken"
    );
}

/// The README's feature table lists exactly the library's features, and says no feature is on by
/// default only while that is so.
#[test]
fn readme_feature_table_is_the_manifests() {
    let lib = library();
    let readme = read(&root().join("README.md"));
    let section = readme
        .split("\n## Features\n")
        .nth(1)
        .expect("README.md has a `## Features` section");
    let section = section.split("\n## ").next().unwrap();
    let table: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .collect();
    assert_eq!(
        table, lib.features,
        "README.md's feature table against Cargo.toml's [features] (left: README)"
    );
    if section.contains("No feature is on by default") {
        assert_eq!(
            lib.default_features, "[]",
            "README.md says no feature is on by default; Cargo.toml's default is {}",
            lib.default_features
        );
    }
}

/// Every "feature `x`", "features `x`" and `--features x` in the docs names a feature of the
/// library (or, in a command with `-p <member>`, of that member).
#[test]
fn feature_names_in_the_docs_exist() {
    let manifests = published();
    let lib = library();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (path, text) in docs() {
        for (n, line) in text.lines().enumerate() {
            let mut names = Vec::new();
            for marker in ["feature `", "features `"] {
                let mut rest = line;
                while let Some(i) = rest.find(marker) {
                    rest = &rest[i + marker.len()..];
                    if let Some((name, _)) = rest.split_once('`') {
                        names.push(name.to_owned());
                    }
                }
            }
            let mut rest = line;
            while let Some(i) = rest.find("--features") {
                rest = &rest[i + "--features".len()..];
                let list = rest.trim_start_matches(['=', ' ']);
                let list = list.split_whitespace().next().unwrap_or("");
                // Up to a closing quote or backtick (`--features demo`, in prose).
                let quote = |c: char| "`'\"".contains(c);
                let list = list
                    .trim_start_matches(quote)
                    .split(quote)
                    .next()
                    .unwrap_or("");
                names.extend(list.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
            }
            // `-p ssegate-testkit --features ...` names that member's features; a line that names
            // the command's crate (`cargo install ssegate-cli --features demo`), and every line of
            // the command's own docs (cli/), may name the command's features too.
            let features = manifests
                .iter()
                .find(|m| line.contains(&format!("-p {} ", m.name)) && m.name != lib.name)
                .map_or(&lib.features, |m| &m.features);
            let cli = manifests
                .iter()
                .find(|m| m.name == "ssegate-cli")
                .expect("the command's manifest");
            let command_features =
                (line.contains("ssegate-cli") || path.starts_with("cli/")).then_some(&cli.features);
            for name in names {
                checked += 1;
                if !features.contains(&name) && !command_features.is_some_and(|f| f.contains(&name))
                {
                    wrong.push(format!("{path}:{}: feature `{name}`", n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "features the manifests do not have ({:?}):\n{}",
        lib.features,
        wrong.join("\n")
    );
    assert!(
        checked >= 5,
        "only {checked} feature names found in the docs: the scan is broken"
    );
}

/// `cargo add` / `cargo install` lines: the crate exists in the workspace under that name, a
/// version given (`name@1.2`, `--version 1.2`) is its version, and its features exist. Also
/// `ssegate = "x"` / `ssegate = { version = "x" ... }` lines of a manifest snippet.
#[test]
fn install_lines_name_real_crates_versions_and_features() {
    let manifests = published();
    let mut wrong = Vec::new();
    let mut found = 0;
    for (path, text) in docs() {
        for (n, line) in text.lines().enumerate() {
            let at = format!("{path}:{}", n + 1);
            let line = line.split(" # ").next().unwrap().trim();
            for command in ["cargo add ", "cargo install "] {
                let Some(i) = line.find(command) else {
                    continue;
                };
                // In prose, the command is inline code: it ends at the closing backtick.
                let tail = &line[i + command.len()..];
                let tail = if line[..i].ends_with('`') {
                    tail.split('`').next().unwrap_or(tail)
                } else {
                    tail
                };
                let words: Vec<&str> = tail.split_whitespace().collect();
                let mut crates = Vec::new();
                let mut version = None;
                let mut features = Vec::new();
                let mut w = words.iter().peekable();
                while let Some(word) = w.next() {
                    match *word {
                        "--path" | "--root" | "--git" | "--branch" | "--rev" | "--tag" => {
                            w.next();
                        }
                        "--version" => version = w.next().map(|v| v.to_string()),
                        "--features" | "-F" => {
                            if let Some(list) = w.next() {
                                features.extend(list.split(',').map(str::to_owned));
                            }
                        }
                        word if word.starts_with('-') => {}
                        word => {
                            let word = word.trim_matches('`');
                            match word.split_once('@') {
                                Some((name, v)) => {
                                    crates.push(name.to_owned());
                                    version = Some(v.to_owned());
                                }
                                None => crates.push(word.to_owned()),
                            }
                        }
                    }
                }
                if tail.contains("--path") {
                    continue;
                }
                for name in &crates {
                    let Some(m) = manifests.iter().find(|m| &m.name == name) else {
                        // Another crate (a peer in a comparison): not ours to check.
                        continue;
                    };
                    found += 1;
                    if let Some(v) = &version
                        && !names_requirement(v.trim_start_matches(['=', '^']), &m.version)
                    {
                        wrong.push(format!("{at}: {name} {v}, but {name} is {}", m.version));
                    }
                    for f in &features {
                        if !m.features.contains(f) {
                            wrong.push(format!("{at}: {name} has no feature `{f}`"));
                        }
                    }
                }
            }
            for m in &manifests {
                let key = format!("{} = ", m.name);
                if let Some(rest) = line.strip_prefix(&key) {
                    found += 1;
                    match value(&[line], &m.name) {
                        Some(v) if names_requirement(&v, &m.version) => {}
                        v => wrong.push(format!(
                            "{at}: {}{rest}: {v:?}, but {} is {}",
                            key, m.name, m.version
                        )),
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "install lines that do not match the manifests:\n{}",
        wrong.join("\n")
    );
    assert!(
        found >= 2,
        "only {found} install lines found: the scan is broken"
    );
}

/// The README's one-line summary of the client's defaults ("a call's deadline 600 s, idle timeout
/// 300 s, reconnect floor 250 ms ..., error bodies read up to 1 KiB, ..., SSE events up to 64 MiB")
/// against the crate's own constants and defaults.
#[test]
fn readme_defaults_are_the_codes() {
    let readme = read(&root().join("README.md"));
    let secs = |d: std::time::Duration| format!("{} s", d.as_secs());
    let mut facts = vec![
        format!(
            "idle timeout {}",
            secs(ssegate::resume::DEFAULT_IDLE_TIMEOUT)
        ),
        format!(
            "reconnect floor {} ms",
            ssegate::resume::DEFAULT_MIN_DELAY.as_millis()
        ),
    ];
    // The decoder's event limit, through its Debug form (its fields are private).
    let decoder = format!("{:?}", ssegate::sse::DecoderConfig::default());
    let max_event: u64 = decoder
        .split("max_event: ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no max_event in {decoder}"));
    assert_eq!(
        max_event % (1 << 20),
        0,
        "max_event {max_event} is not whole MiB"
    );
    facts.push(format!("SSE events up to {} MiB", max_event >> 20));
    #[cfg(feature = "client")]
    {
        facts.push(format!(
            "a call's deadline {}",
            secs(ssegate::client::DEFAULT_CALL_TIMEOUT)
        ));
        let body = ssegate::client::DEFAULT_MAX_ERROR_BODY;
        assert_eq!(
            body % 1024,
            0,
            "DEFAULT_MAX_ERROR_BODY {body} is not whole KiB"
        );
        facts.push(format!("error bodies read up to {} KiB", body / 1024));
    }
    // The README wraps lines: compare with every run of whitespace as one space.
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let missing: Vec<&String> = facts
        .iter()
        .filter(|f| !flat.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not state these defaults as the code has them: {missing:?}"
    );
}

/// The scanners themselves, on made-up text: they must catch what the checks rely on.
#[test]
fn scanners_find_what_they_should() {
    assert_eq!(
        after(
            "`rmcp` =3.11.0 (client), rmcp 3.11's and rmcp-server, ssegate::rmcp x",
            "rmcp"
        ),
        vec![(1, "=3.11.0"), (1, "3.11")]
    );
    assert!(names_requirement("0.2", "0.2.6"));
    assert!(is_version("=3.11.0") && is_version("1.89") && !is_version("3.x") && !is_version("1"));
    assert!(names_requirement("3.11", "3.11"));
    assert!(!names_requirement("=3.11.0", "3.11"));
    assert!(!names_requirement("3.1", "3.11"));
    let toml = "[a]\nx = \"1\" # one\n[b]\nrmcp = { version = \"3.11\", optional = true }\n";
    assert_eq!(value(&table(toml, "a"), "x").as_deref(), Some("1"));
    assert_eq!(value(&table(toml, "b"), "rmcp").as_deref(), Some("3.11"));
    let lib = library();
    assert_eq!(lib.name, "ssegate");
    assert!(lib.features.contains("rmcp") && !lib.features.contains("__testing"));
    assert!(
        lib.deps
            .iter()
            .any(|(k, p, _)| k == "sse-stream-02" && p == "sse-stream")
    );
}

/// The protocol versions cli/README.md lists for `ssegate call --protocol` are the client's:
/// `auto`, then the stateless and the `initialize` versions, newest first.
#[cfg(feature = "client")]
#[test]
fn cli_readme_protocol_versions_are_the_clients() {
    let readme = read(&root().join("cli/README.md"));
    let list = readme
        .split("`--protocol ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .expect("cli/README.md names `--protocol ...`");
    let stated: Vec<&str> = list.split("\\|").collect();
    let mut real = vec!["auto"];
    real.extend(ssegate::client::STATELESS_VERSIONS);
    real.extend(ssegate::client::INITIALIZE_VERSIONS);
    assert_eq!(
        stated, real,
        "cli/README.md's --protocol values (left) against the client's"
    );
}

/// A quantity written in a doc, in the unit the crate's `Debug` output uses: bytes for B, KiB and
/// MiB, milliseconds for s and ms, the number itself otherwise.
#[derive(Debug, PartialEq)]
enum Quantity {
    Bytes(u64),
    Millis(u64),
    Plain(u64),
}

/// The quantities in a piece of prose, in order: `64 MiB`, `250 ms`, `4096`. Not percentages
/// (`+50 %`) nor exponents (`2^n`).
fn quantities(text: &str) -> Vec<Quantity> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let w = word
            .trim_start_matches(['(', '`'])
            .trim_end_matches([',', ')', ';', ':', '`']);
        let Ok(n) = w.parse::<u64>() else { continue };
        let unit = words
            .get(i + 1)
            .map_or("", |u| u.trim_end_matches([',', ')', ';', ':']));
        out.push(match unit {
            "%" => continue,
            "B" => Quantity::Bytes(n),
            "KiB" => Quantity::Bytes(n << 10),
            "MiB" => Quantity::Bytes(n << 20),
            "s" => Quantity::Millis(n * 1000),
            "ms" => Quantity::Millis(n),
            _ => Quantity::Plain(n),
        });
    }
    out
}

/// A field's value in a `Debug` form (`max_event: 67108864`, `max_delay: 60s`,
/// `idle_timeout: Some(300s)`), as a quantity of the kind `like` asks for; `None` when the field
/// is not there or is not one number.
fn debug_field(debug: &str, field: &str, like: &Quantity) -> Option<Quantity> {
    let key = format!("{field}: ");
    let i = debug
        .match_indices(&key)
        .find(|(i, _)| debug[..*i].ends_with(['{', ' ']))?
        .0;
    let rest = &debug[i + key.len()..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    let v = rest[..end].trim();
    let v = v
        .strip_prefix("Some(")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or(v);
    Some(match like {
        Quantity::Millis(_) => {
            if let Some(ms) = v.strip_suffix("ms") {
                Quantity::Millis(ms.parse().ok()?)
            } else {
                let s: f64 = v.strip_suffix('s')?.parse().ok()?;
                Quantity::Millis((s * 1000.0).round() as u64)
            }
        }
        Quantity::Bytes(_) => Quantity::Bytes(v.parse().ok()?),
        Quantity::Plain(_) => Quantity::Plain(v.parse().ok()?),
    })
}

/// The configurations whose defaults docs/LIMITS.md and docs/DESIGN.md state, by the name the
/// docs give them, in their `Debug` form (the defaults as the code has them).
fn default_configs() -> Vec<(&'static str, String)> {
    // Without the `client` feature nothing is pushed below.
    #[allow(unused_mut)]
    let mut configs = vec![
        (
            "sse::DecoderConfig",
            format!("{:?}", ssegate::sse::DecoderConfig::default()),
        ),
        (
            "gate::GateConfig",
            format!("{:?}", ssegate::gate::GateConfig::default()),
        ),
        (
            "guard::GuardConfig",
            format!("{:?}", ssegate::guard::GuardConfig::default()),
        ),
        (
            "resume::StreamConfig",
            format!("{:?}", ssegate::resume::StreamConfig::default()),
        ),
        (
            "replay::BufferConfig",
            format!("{:?}", ssegate::replay::BufferConfig::default()),
        ),
    ];
    #[cfg(feature = "client")]
    configs.push((
        "client::ClientConfig",
        format!("{:?}", ssegate::client::ClientConfig::default()),
    ));
    configs
}

/// docs/LIMITS.md's table: every "`field` (default ..." of a configuration row whose field the
/// configuration's `Debug` shows must be the default the code has.
#[test]
fn limits_table_defaults_are_the_codes() {
    let limits = read(&root().join("docs/LIMITS.md"));
    let configs = default_configs();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (n, line) in limits.lines().enumerate() {
        let Some(first) = line.strip_prefix("| ").and_then(|l| l.split(" | ").next()) else {
            continue;
        };
        let Some((name, debug)) = configs
            .iter()
            .find(|(name, _)| first.starts_with(&format!("`{name}`")))
        else {
            continue;
        };
        let cells = &line[2 + first.len()..];
        let mut rest = cells;
        while let Some(i) = rest.find("` (") {
            let field = rest[..i].rsplit('`').next().unwrap();
            rest = &rest[i + 3..];
            let stated = rest.split([',', ')', ';', ':']).next().unwrap();
            let Some(q) = quantities(stated).into_iter().next() else {
                continue;
            };
            let Some(real) = debug_field(debug, field, &q) else {
                continue;
            };
            checked += 1;
            if real != q {
                wrong.push(format!(
                    "docs/LIMITS.md:{}: {name} `{field}` ({stated}): the code's default is {real:?}",
                    n + 1
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "defaults in docs/LIMITS.md that the code does not have:\n{}",
        wrong.join("\n")
    );
    assert!(
        checked >= 20,
        "only {checked} defaults found in docs/LIMITS.md: the scan is broken"
    );
}

/// docs/DESIGN.md's timing-rules table: each row's default against the `resume::StreamConfig`
/// settings it names.
#[test]
fn design_timing_defaults_are_the_codes() {
    let design = read(&root().join("docs/DESIGN.md"));
    let stream = format!("{:?}", ssegate::resume::StreamConfig::default());
    let section = design
        .split("## Timing rules")
        .nth(1)
        .expect("docs/DESIGN.md has its timing rules")
        .split("\n## ")
        .next()
        .unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let [_, default, setting] = cells[..] else {
            continue;
        };
        let fields: Vec<&str> = setting
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.rsplit("::").next().unwrap())
            .collect();
        if fields.is_empty() {
            continue;
        }
        let stated = quantities(default);
        assert!(
            stated.len() >= fields.len(),
            "docs/DESIGN.md: `{line}`: fewer defaults than settings"
        );
        for (field, q) in fields.iter().zip(stated) {
            checked += 1;
            match debug_field(&stream, field, &q) {
                Some(real) if real == q => {}
                real => wrong.push(format!(
                    "{field}: the doc says {q:?}, the code has {real:?}"
                )),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/DESIGN.md's timing rules against StreamConfig::default():\n{}",
        wrong.join("\n")
    );
    assert!(
        checked >= 8,
        "only {checked} timing defaults found: the scan is broken"
    );
}

#[test]
fn quantity_scanner_reads_units() {
    assert_eq!(
        quantities("250 ms x 2^n, 6 attempts, up to +50 %, 64 MiB (4 KiB"),
        vec![
            Quantity::Millis(250),
            Quantity::Plain(6),
            Quantity::Bytes(64 << 20),
            Quantity::Bytes(4096)
        ]
    );
    let debug = "S { a: 10s, b: Some(300s), c: 250ms, d: 67108864, e: G { d: 1 } }";
    assert_eq!(
        debug_field(debug, "a", &Quantity::Millis(0)),
        Some(Quantity::Millis(10_000))
    );
    assert_eq!(
        debug_field(debug, "b", &Quantity::Millis(0)),
        Some(Quantity::Millis(300_000))
    );
    assert_eq!(
        debug_field(debug, "c", &Quantity::Millis(0)),
        Some(Quantity::Millis(250))
    );
    assert_eq!(
        debug_field(debug, "d", &Quantity::Bytes(0)),
        Some(Quantity::Bytes(64 << 20))
    );
    assert_eq!(debug_field(debug, "x", &Quantity::Plain(0)), None);
}
