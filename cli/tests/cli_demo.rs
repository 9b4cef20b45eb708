//! `ssegate demo` through the built binary, small and fast: the JSON rows and the table.

use std::process::Command;

use serde_json::Value;

fn demo(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ssegate"))
        .args([
            "demo",
            "--trials",
            "8",
            "--size",
            "65536",
            "--reconnect-delay-ms",
            "0",
        ])
        .args(extra)
        .output()
        .expect("run ssegate");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn json_rows_have_the_documented_keys_in_order() {
    let text = demo(&["--json"]);
    assert_eq!(text.lines().count(), 1);
    assert!(
        text.starts_with(r#"{"rows":[{"server":"strict","client":"naive","trials":8,"intact":"#)
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 24, "8 server modes x 3 clients");
    // The deployment keys come last in every row: one instance, the in-memory store by default.
    assert_eq!(
        text.matches(r#","instances":1,"store":"memory"}"#).count(),
        24
    );
    for row in rows {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 10);
        assert!(keys.contains(&"instances") && keys.contains(&"store"));
        assert_eq!(
            (&row["instances"], &row["store"]),
            (&Value::from(1), &Value::from("memory"))
        );
        let n = |k: &str| row[k].as_u64().unwrap();
        assert_eq!(n("trials"), 8);
        assert_eq!(
            n("intact") + n("silent_corruption") + n("refused"),
            8,
            "{row}"
        );
        if row["client"] == "guarded" {
            assert_eq!(n("silent_corruption"), 0, "{row}");
            assert_eq!(n("intact"), 8, "{row}");
        }
        if row["client"] == "guarded-once" {
            // A non-idempotent call is never re-issued.
            assert_eq!(n("silent_corruption"), 0, "{row}");
            assert_eq!(n("renegotiated"), 0, "{row}");
        }
        if row["server"] == "tasks" && row["client"] != "naive" {
            // The cut read of the task's result is read again: recovered, nothing ran again.
            assert!(n("resumed") > 0, "{row}");
        }
        if row["server"] == "stateless" {
            // MCP 2026-07-28: nothing is resumed; the naive client runs the tool again.
            assert_eq!(n("resumed"), 0, "{row}");
            if row["client"] == "naive" {
                assert!(n("renegotiated") > 0 && n("intact") == 8, "{row}");
            }
            if row["client"] == "guarded-once" {
                assert!(n("refused") > 0, "{row}");
            }
        }
        if row["server"] == "buffered" && row["client"] != "naive" {
            // The correct server whose budget holds the result: resumed in place, nothing re-run.
            assert_eq!(
                (n("intact"), n("resumed"), n("renegotiated")),
                (8, 8, 0),
                "{row}"
            );
        }
    }
    let naive_corrupt = |server: &str| {
        rows.iter()
            .find(|r| r["server"] == server && r["client"] == "naive")
            .unwrap()["silent_corruption"]
            .as_u64()
            .unwrap()
    };
    assert!(naive_corrupt("restart") > 0 && naive_corrupt("boundary") > 0);
}

#[test]
fn table_and_conclusion() {
    let text = demo(&[]);
    let first = text.lines().next().unwrap();
    for col in [
        "server",
        "client",
        "trials",
        "intact",
        "silent corruption",
        "refused",
        "resumed",
        "renegotiated",
    ] {
        assert!(first.contains(col), "{first}");
    }
    assert!(text.contains("boundary  guarded"), "{text}");
    assert!(text.contains("never delivered a corrupt one"), "{text}");
    assert!(text.contains("buffered  guarded-once"), "{text}");
    assert!(text.contains("the tool ran again"), "{text}");
}

#[test]
fn deployment_arguments_are_checked() {
    for bad in [
        &["--instances", "0"][..],
        &["--instances", "17"],
        &["--store", "postgres://x"],
        &["--store", "redis://"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ssegate"))
            .arg("demo")
            .args(bad)
            .output()
            .expect("run ssegate");
        assert_eq!(out.status.code(), Some(2), "{bad:?} is a usage error");
    }
}

#[test]
fn two_instances_with_memory_stores_renegotiate() {
    let text = demo(&["--instances", "2", "--json"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    for row in v["rows"].as_array().unwrap() {
        assert_eq!(
            (&row["instances"], &row["store"]),
            (&Value::from(2), &Value::from("memory"))
        );
        if row["client"] == "guarded" && row["server"] != "tasks" {
            // The resume lands on the other instance, which holds nothing: never resumed in place.
            assert_eq!(row["resumed"], 0, "{row}");
            assert_eq!(row["intact"], 8, "{row}");
        }
        if row["client"] == "guarded" && row["server"] == "tasks" {
            // A task's reads are POSTs, which the balancer sends to the instance holding it.
            assert!(row["resumed"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(row["intact"], 8, "{row}");
        }
    }
}
