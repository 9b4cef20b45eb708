//! The command's CHANGELOG (shipped in its package) names every subcommand `ssegate --help` lists.

mod common;

/// The subcommands `ssegate --help` lists (without `help`).
fn subcommands() -> Vec<String> {
    let out = common::ssegate("--help", &[], b"");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
        } else if in_commands && !line.starts_with("  ") {
            break;
        } else if in_commands && !line.starts_with("   ") {
            // `  name  what it does` (a wrapped description is indented further).
            if let Some(name) = line.split_whitespace().next()
                && name != "help"
            {
                names.push(name.to_owned());
            }
        }
    }
    names
}

#[test]
fn the_changelog_names_every_subcommand() {
    let names = subcommands();
    assert!(names.len() >= 7, "{names:?}");
    assert!(names.iter().any(|n| n == "bridge"), "{names:?}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/CHANGELOG.md");
    let changelog = std::fs::read_to_string(path).expect("CHANGELOG.md");
    for name in names {
        assert!(
            changelog.contains(&format!("`{name}`")),
            "cli/CHANGELOG.md does not name `{name}`"
        );
    }
}
