//! `ssegate events` through the built binary: the output contract, identical under every split.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn events(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .arg("events")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ssegate");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

const INPUT: &[u8] = b"\xEF\xBB\xBF: comment\r\nretry: 2500\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{}}\r\n\r\n\
event: progress\nid: 2\ndata: caf\xC3\xA9 \xFF tab\t \"quoted\" \\ back\n\n\
id\ndata: after reset\r\rid: 3\0\ndata: nul id ignored\n\nid: 4\n\ndata: cut";

const EXPECTED: &str = concat!(
    r#"{"event":"message","data":"{\"jsonrpc\":\"2.0\",\"id\":1,\n\"result\":{}}","id":"1"}"#,
    "\n",
    r#"{"event":"progress","data":"café � tab\t \"quoted\" \\ back","id":"2"}"#,
    "\n",
    r#"{"event":"message","data":"after reset","id":""}"#,
    "\n",
    r#"{"event":"message","data":"nul id ignored","id":""}"#,
    "\n",
    r#"{"last_event_id":"4","retry":2500}"#,
    "\n",
);

#[test]
fn output_contract_and_every_split_mode_agree() {
    let mut modes: Vec<Vec<String>> = vec![vec![]];
    for n in ["1", "2", "3", "7", "64"] {
        modes.push(vec!["--split".into(), n.into()]);
    }
    for seed in 0..10 {
        modes.push(vec!["--split-random".into(), seed.to_string()]);
    }
    for mode in modes {
        let args: Vec<&str> = mode.iter().map(String::as_str).collect();
        let out = events(&args, INPUT);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8(out.stdout).unwrap(), EXPECTED, "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("9 bytes"),
            "partial event reported"
        );
    }
}

#[test]
fn reads_a_file_argument() {
    let path = std::env::temp_dir().join(format!("ssegate-cli-events-{}.sse", std::process::id()));
    std::fs::write(&path, INPUT).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args(["events", "--split-random", "42"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), EXPECTED);
}

#[test]
fn empty_input_prints_only_the_final_line() {
    let out = events(&[], b"");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"last_event_id\":\"\",\"retry\":null}\n"
    );
}

#[test]
fn decode_errors_go_to_stderr_and_decoding_continues() {
    let input = b"id: 1\ndata: a\n\nid: 12345678\ndata: dropped\n\ndata: b\n\n";
    for split in [&["--split", "1"][..], &[][..]] {
        let mut args = vec!["--max-field", "4"];
        args.extend_from_slice(split);
        let out = events(&args, input);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("longer than 4 bytes") && stderr.contains("byte 15"),
            "{stderr}"
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            concat!(
                r#"{"event":"message","data":"a","id":"1"}"#,
                "\n",
                r#"{"event":"message","data":"b","id":"1"}"#,
                "\n",
                r#"{"last_event_id":"1","retry":null}"#,
                "\n"
            )
        );
    }
}
