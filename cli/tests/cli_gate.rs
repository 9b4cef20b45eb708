//! `ssegate gate` through the built binary: one word, the same under every split.

use std::process::Command;

mod common;

/// Runs `ssegate gate ARGS` on `input`; its stdout and stderr, after asserting it succeeded.
fn run_gate(args: &[&str], input: &[u8]) -> (String, String) {
    let out = common::ssegate("gate", args, input);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn gate(args: &[&str], input: &[u8]) -> String {
    run_gate(args, input).0
}

#[test]
fn prints_one_verdict_word_under_every_split() {
    let cases: &[(&[u8], &str)] = &[
        (
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\"b\\"}]}}"#,
            "complete",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"te"#,
            "incomplete",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"res{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "invalid",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc""#,
            "trailing",
        ),
        (b"", "incomplete"),
        (b"42\n", "complete"),
        (b"\xef\xbb\xbf{}", "invalid"),
    ];
    for &(input, want) in cases {
        for args in [
            &[][..],
            &["--split", "1"],
            &["--split", "7"],
            &["--split-random", "42"],
        ] {
            assert_eq!(
                gate(args, input),
                format!("{want}\n"),
                "{args:?} {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}

#[test]
fn reads_a_file() {
    let dir = std::env::temp_dir().join(format!("ssegate-cli-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("msg.json");
    std::fs::write(&path, br#"[1, {"a": [true, null]}]"#).unwrap();
    assert_eq!(gate(&[path.to_str().unwrap()], b""), "complete\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Several files: one line per text, `VERDICT<TAB>FILE`, in the order given; a file that cannot be
/// read is reported on stderr, the others are still judged, and the exit status is 2.
#[test]
fn judges_several_files_each_on_its_own() {
    let dir = std::env::temp_dir().join(format!("ssegate-cli-gate-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let texts: [(&str, &[u8]); 4] = [
        ("a.json", br#"{"a": [1, 2]}"#),
        ("b.json", b"[1, 2"),
        ("c.json", b"[1] [2]"),
        ("d.json", b"[1, }"),
    ];
    let mut paths = Vec::new();
    for (name, text) in texts {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        paths.push(path.to_str().unwrap().to_owned());
    }
    let names: Vec<&str> = paths.iter().map(String::as_str).collect();
    let (stdout, stderr) = run_gate(&[&["-v"], &names[..]].concat(), b"");
    let expected: String = ["complete", "incomplete", "trailing", "invalid"]
        .iter()
        .zip(&paths)
        .map(|(verdict, path)| format!("{verdict}\t{path}\n"))
        .collect();
    assert_eq!(stdout, expected);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("isa: ")).count(), 4);

    let missing = dir.join("missing.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args(["gate", &paths[0], missing.to_str().unwrap(), &paths[1]])
        .output()
        .expect("run ssegate");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("complete\t{}\nincomplete\t{}\n", paths[0], paths[1])
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("cannot read") && stderr.contains("missing.json"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_nesting_limit_and_the_instruction_set_cap_are_options() {
    let input = b"{\"a\":[[{}]]}";
    for isa in ["portable", "neon", "avx2", "avx512"] {
        for split in ["1", "7", "100"] {
            let args = |depth| ["--max-depth", depth, "--max-isa", isa, "--split", split];
            assert_eq!(gate(&args("4"), input), "complete\n", "{isa} {split}");
            assert_eq!(gate(&args("3"), input), "invalid\n", "{isa} {split}");
        }
    }
    assert_eq!(gate(&[], input), "complete\n");
}

/// `--verbose` names the instruction set the gate ran on stderr, and leaves stdout one word: NEON on
/// AArch64 (baseline there), never NEON elsewhere; the cap is honoured.
#[test]
fn verbose_reports_the_instruction_set() {
    let run = |args: &[&str]| run_gate(args, b"[1]");
    let (stdout, stderr) = run(&["-v"]);
    assert_eq!(stdout, "complete\n");
    let isa = stderr
        .lines()
        .find_map(|l| l.strip_prefix("isa: "))
        .expect("an isa line");
    if cfg!(target_arch = "aarch64") {
        assert_eq!(isa, "neon");
    } else {
        assert_ne!(isa, "neon");
    }
    let (_, stderr) = run(&["--verbose", "--max-isa", "portable"]);
    assert!(stderr.contains("isa: portable\n"), "{stderr}");
    let (stdout, stderr) = run(&[]);
    assert_eq!((stdout.as_str(), stderr.as_str()), ("complete\n", ""));
}
