//! `ssegate demo` in a build without the `demo` feature (the default, what `cargo install
//! ssegate-cli` builds): a clear message saying how to get the demo, exit 2, whatever the
//! arguments. With the feature (`cargo test --all-features`), tests/cli_demo.rs runs the demo
//! instead and this file checks that `demo --help` describes the demo.

mod common;

#[cfg(not(feature = "demo"))]
#[test]
fn demo_without_the_feature_says_how_to_get_it() {
    for args in [
        &[][..],
        &["--trials", "1", "--json"][..],
        &["--no-such-flag"][..],
    ] {
        let out = common::ssegate("demo", args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("cargo install ssegate-cli --features demo"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // `ssegate --help` lists it, and says it is not in this build.
    let help = String::from_utf8(common::ssegate("--help", &[], b"").stdout).unwrap();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("demo "))
        .unwrap_or_else(|| panic!("{help}"));
    assert!(line.contains("Not in this build"), "{line}");
}

#[cfg(feature = "demo")]
#[test]
fn demo_with_the_feature_is_the_demo() {
    let out = common::ssegate("demo", &["--help"], b"");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--trials"), "{help}");
    assert!(!help.contains("Not in this build"), "{help}");
}
