//! `ssegate demo`: the field failure reproduced on loopback, and the guard preventing it. The
//! demo runs the test kit's servers, fault proxy and clients, so it is built only with the
//! feature `demo` (`cargo install ssegate-cli --features demo`); without it, `ssegate demo`
//! says how to get it and exits 2.

#[cfg(feature = "demo")]
mod harness;
#[cfg(feature = "demo")]
pub(crate) use harness::{DemoArgs, run};

/// How to get a build with the demo.
pub(crate) const INSTALL_WITH_DEMO: &str = "cargo install ssegate-cli --features demo";

/// Without the feature: whatever follows `demo` is taken and ignored, so every invocation of
/// the full command gets the same answer.
#[cfg(not(feature = "demo"))]
#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    _ignored: Vec<std::ffi::OsString>,
}

/// Without the feature: the message, exit 2 (a usage error: this build has no such command).
#[cfg(not(feature = "demo"))]
pub(crate) fn run(_: &DemoArgs) -> std::process::ExitCode {
    eprintln!("{}", absent());
    std::process::ExitCode::from(2)
}

/// What `ssegate demo` answers in a build without the demo.
#[cfg_attr(feature = "demo", allow(dead_code))]
fn absent() -> String {
    format!(
        "ssegate demo: this build of ssegate has no demo (it is the cargo feature `demo`, off by \
         default); install it with `{INSTALL_WITH_DEMO}`"
    )
}

/// `ssegate demo`'s line in `ssegate --help` in a build without the demo.
#[cfg(not(feature = "demo"))]
pub(crate) const ABOUT_ABSENT: &str = "Not in this build: reproduce the resumption failure on loopback (`cargo install ssegate-cli --features demo`)";

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_says_how_to_get_the_demo() {
        assert!(super::absent().contains(super::INSTALL_WITH_DEMO));
    }
}
