//! The wire contract is written once, in `ssegate::contract` (and the `as_str` words of the
//! engine's enums): the surfaces that answer with it, the command (`cli/src`) and the Python
//! package (`python/src`, `python/ssegate`), must read it, never restate it. This test scans their
//! sources for a restated code (`-32050`...), kind word (`"outcome-unknown"`, `"refused"`...) or
//! default limit (`64 << 20`, 600 s...). Comments, docstrings and `#[cfg(test)]` modules are
//! skipped: docs may name a code, and a test states what it expects as a literal on purpose.
//!
//! It reads the workspace's other members, so it is left out of the library's package
//! (`include` in Cargo.toml).

use std::fs;
use std::path::{Path, PathBuf};

use ssegate::contract::{Code, Kind, Outcome};
use ssegate::message::RpcKind;
use ssegate::resume::{Failure, RefusalKind, Restart, Skip};
use ssegate::sse::DecodeError;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files with one of `exts` under `dir` (relative to the root), recursively.
fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, exts, out);
            } else if path
                .extension()
                .is_some_and(|x| exts.iter().any(|e| x == *e))
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), exts, &mut out);
    out.sort();
    assert!(!out.is_empty(), "no {exts:?} files under {dir}");
    out
}

/// The code lines of a file with `//` and `/* ... */` comments (Rust, JavaScript), comments
/// dropped, up to the first line `stop` accepts.
fn slash_code(text: &str, stop: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if stop(trimmed) {
            break;
        }
        if in_block || trimmed.starts_with("/*") {
            in_block = !line.contains("*/");
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = line.split(" // ").next().unwrap_or(line);
        out.push((n + 1, code.to_owned()));
    }
    out
}

/// The code lines of a Rust file: up to its first `#[cfg(test)]` (a file of tests starts with
/// `#![cfg(test)]`), comments dropped.
fn rust_code(text: &str) -> Vec<(usize, String)> {
    slash_code(text, |line| {
        line.starts_with("#[cfg(test)]") || line.starts_with("#![cfg(test)]")
    })
}

/// The code lines of a JavaScript file: comments (JSDoc included) dropped.
fn js_code(text: &str) -> Vec<(usize, String)> {
    slash_code(text, |_| false)
}

/// The code lines of a Python file or stub: comments and triple-quoted strings dropped.
fn python_code(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_doc = false;
    for (n, line) in text.lines().enumerate() {
        let quotes = line.matches("\"\"\"").count();
        if in_doc {
            in_doc = quotes % 2 == 0;
            continue;
        }
        if quotes > 0 {
            in_doc = quotes % 2 == 1;
            continue;
        }
        let code = line.split(" #").next().unwrap_or(line);
        if code.trim_start().starts_with('#') {
            continue;
        }
        out.push((n + 1, code.to_owned()));
    }
    out
}

/// The words a surface reports, which must come from the library.
fn words() -> Vec<&'static str> {
    let mut words: Vec<&'static str> = Vec::new();
    words.extend(Code::ALL.iter().map(|c| c.as_str()));
    words.extend(Kind::ALL.iter().map(|k| k.as_str()));
    words.extend(Outcome::ALL.iter().map(|o| o.as_str()));
    for list in [
        &RefusalKind::WORDS[..],
        &Failure::WORDS,
        &Restart::WORDS,
        &Skip::WORDS,
        &DecodeError::WORDS,
    ] {
        words.extend(list);
    }
    // Words that are also ordinary JSON keys or values elsewhere ("status", "http", "task", a
    // message's "request"...) cannot be told apart by a scan: the compiler and the enumeration
    // tests guard them. Every word with a hyphen, and these, can.
    let distinctive = [
        "refused",
        "unreachable",
        "unknown",
        "gap",
        "busy",
        "backwards",
    ];
    words.retain(|w| w.contains('-') || distinctive.contains(w));
    words.extend(RpcKind::WORDS.iter().filter(|w| w.contains('-')));
    words.sort_unstable();
    words.dedup();
    words
}

/// A code of ssegate's or of JSON-RPC written as a number: `-32050`, `-32_050`, `-32600`.
fn has_code_literal(code: &str) -> bool {
    let b = code.as_bytes();
    (0..b.len()).any(|i| {
        let rest = &code[i..];
        let digits: String = rest
            .strip_prefix("-32")
            .map(|r| {
                r.chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '_')
                    .collect()
            })
            .unwrap_or_default();
        let preceded_ok = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        preceded_ok && digits.chars().filter(char::is_ascii_digit).count() == 3
    })
}

/// Words of another vocabulary that happen to equal a contract word: (file, word, why).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "cli/src/probe/report.rs",
        "other-stream",
        "a behaviour of `ssegate probe --json`",
    ),
    (
        "cli/src/probe/report.rs",
        "busy",
        "a behaviour of `ssegate probe --json`",
    ),
];

/// Default limits written as numbers.
const DEFAULT_PATTERNS: &[&str] = &[
    "64 << 20",
    "80 << 20",
    "4 << 10",
    "1 << 10",
    "from_secs(600)",
    "from_secs(300)",
    "600.0",
    "= 600",
];

fn findings(
    path: &Path,
    lines: Vec<(usize, String)>,
    words: &[&str],
    quote: &[char],
) -> Vec<String> {
    let rel = path
        .strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut out = Vec::new();
    for (n, code) in lines {
        if has_code_literal(&code) {
            out.push(format!(
                "{rel}:{n}: a JSON-RPC code as a number: {}",
                code.trim()
            ));
        }
        for w in words {
            let allowed = ALLOWED
                .iter()
                .any(|(file, word, _)| rel.ends_with(file) && word == w);
            if !allowed && quote.iter().any(|q| code.contains(&format!("{q}{w}{q}"))) {
                out.push(format!(
                    "{rel}:{n}: the word {w:?} as a literal: {}",
                    code.trim()
                ));
            }
        }
        for p in DEFAULT_PATTERNS {
            let at = code
                .match_indices(p)
                .any(|(i, _)| i == 0 || !code.as_bytes()[i - 1].is_ascii_digit());
            if at {
                out.push(format!(
                    "{rel}:{n}: a default limit ({p}) as a literal: {}",
                    code.trim()
                ));
            }
        }
    }
    out
}

#[test]
fn no_surface_restates_the_contract() {
    let words = words();
    let mut found = Vec::new();
    for dir in ["cli/src", "python/src"] {
        for path in files(dir, &["rs"]) {
            let text = fs::read_to_string(&path).expect("read");
            found.extend(findings(&path, rust_code(&text), &words, &['"']));
        }
    }
    for path in files("python/ssegate", &["py", "pyi"]) {
        let text = fs::read_to_string(&path).expect("read");
        // The stub's `Literal` types list the words, as a type checker needs them; the Python
        // tests check those lists against the library's.
        let stub = path.extension().is_some_and(|x| x == "pyi");
        let words: &[&str] = if stub { &[] } else { &words };
        found.extend(findings(&path, python_code(&text), words, &['"', '\'']));
    }
    // The npm package's hand-written JavaScript (the rest is napi's generated loader).
    for file in ["node/mcp.js", "node/bin/ssegate.js"] {
        let path = root().join(file);
        let text = fs::read_to_string(&path).expect("read");
        found.extend(findings(&path, js_code(&text), &words, &['"', '\'', '`']));
    }
    assert!(
        found.is_empty(),
        "read these from ssegate::contract (Python: ssegate.contract, JavaScript: `contract` of \
         the addon) instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_what_it_looks_for() {
    // The scan itself, on lines that restate the contract and lines that do not.
    let words = words();
    let path = root().join("x.rs");
    let bad = [
        "    let code = -32050;",
        "    Error::new(-32_600, msg)",
        "    data[\"kind\"] = json!(\"outcome-unknown\");",
        "    (\"refused\", \"unknown\", false)",
        "    max_json_body: 64 << 20,",
        "    timeout: Duration::from_secs(600),",
    ];
    for line in bad {
        let lines = rust_code(line);
        assert!(
            !findings(&path, lines, &words, &['"']).is_empty(),
            "missed: {line}"
        );
    }
    let good = [
        "    let code = Code::OutcomeUnknown.value();",
        "    // -32050 is outcome unknown",
        "    let x = a-32050;",
        "    data[KIND] = json!(kind.as_str());",
        "    let status = \"status\";",
    ];
    for line in good {
        let lines = rust_code(line);
        assert!(
            findings(&path, lines, &words, &['"']).is_empty(),
            "flagged: {line}"
        );
    }
    let py = "x = 1\n\"\"\"\n-32050 in a docstring\n\"\"\"\ny = -32051\nz = 'refused'  # a comment -32052\n";
    let found = findings(&root().join("x.py"), python_code(py), &words, &['"', '\'']);
    assert_eq!(found.len(), 2, "{found:#?}");
    let js =
        "/**\n * -32050\n */\nconst a = -32051;\n// 'refused'\nconst b = `not-run`; // -32052\n";
    let found = findings(&root().join("x.js"), js_code(js), &words, &['"', '\'', '`']);
    assert_eq!(found.len(), 2, "{found:#?}");
}
