//! docs/BRIDGE.md states the defaults and error codes `ssegate bridge --help` has. (Left out of the
//! package: it reads the repository's docs.)

mod common;

use std::collections::BTreeMap;

/// Each option's default, as `--help` prints it (`--flag <VALUE>` ... `[default: D]`).
fn help_defaults() -> BTreeMap<String, String> {
    let out = common::ssegate("bridge", &["--help"], b"");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut defaults = BTreeMap::new();
    let mut flag = None;
    for line in help.lines() {
        // clap writes an option on one line or several, its default in either.
        if let Some(rest) = line.trim().strip_prefix("--") {
            flag = rest.split_whitespace().next().map(|f| format!("--{f}"));
        }
        if let (Some(i), Some(f)) = (line.find("[default: "), &flag) {
            let rest = &line[i + "[default: ".len()..];
            let end = rest.find(']').unwrap_or(rest.len());
            defaults.insert(f.clone(), rest[..end].to_owned());
        }
    }
    defaults
}

fn docs() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/BRIDGE.md");
    std::fs::read_to_string(path).expect("docs/BRIDGE.md")
}

#[test]
fn the_options_table_states_every_default_of_the_command() {
    let defaults = help_defaults();
    assert!(defaults.len() >= 5, "{defaults:?}");
    let docs = docs();
    for (flag, default) in &defaults {
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{flag}")))
            .unwrap_or_else(|| panic!("docs/BRIDGE.md has no row for {flag}"));
        // Cells split at the pipes that are not escaped (`never\|safe`).
        let row = row.replace("\\|", "/");
        let stated = row.split('|').nth(2).unwrap_or_default();
        assert!(
            stated.contains(&format!("`{default}`")) || stated.contains(&format!(" {default} ")),
            "{flag}: --help says {default}, docs/BRIDGE.md says {stated:?}"
        );
    }
}

#[test]
fn the_error_codes_of_the_help_are_the_docs() {
    let out = common::ssegate("bridge", &["--help"], b"");
    let help = String::from_utf8(out.stdout).unwrap();
    let docs = docs();
    let codes: Vec<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("-32") && w[1..].chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert!(codes.len() >= 5, "{codes:?}");
    for code in codes {
        assert!(
            docs.contains(&format!("| `{code}` |")),
            "error code {code} is not in docs/BRIDGE.md's table"
        );
    }
}
