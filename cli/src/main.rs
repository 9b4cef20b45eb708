//! The `ssegate` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod auth;
mod bridge;
mod call;
mod check;
mod client_args;
mod connection;
mod demo;
mod events;
mod gate;
mod input;
mod platform;
mod probe;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "ssegate",
    version,
    about = "SSE decoding, JSON completeness gating and resumption checks for MCP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode raw SSE bytes: one JSON line per dispatched event, then the last event id and retry.
    Events(events::EventsArgs),
    /// Judge one whole JSON text: prints `incomplete`, `complete`, `trailing` or `invalid`.
    Gate(gate::GateArgs),
    /// Report on a captured MCP SSE response: each event's verdict and the guard's decision.
    Check(check::CheckArgs),
    /// Reproduce the resumption failure on loopback and show the guard preventing it.
    #[cfg_attr(not(feature = "demo"), command(about = demo::ABOUT_ABSENT, long_about = None))]
    Demo(demo::DemoArgs),
    /// Probe a live MCP server: how it behaves when a stream is cut and resumed.
    Probe(probe::ProbeArgs),
    /// Call one tool on a live MCP server: the result on stdout; lost streams resumed, or re-issued
    /// only as --retry allows.
    #[command(after_help = call::EXIT_STATUS)]
    Call(call::CallArgs),
    /// Bridge an MCP host that launches servers over stdio to a remote MCP server, every request
    /// through the guarded client: `"command": "ssegate", "args": ["bridge", URL]`.
    #[command(after_help = bridge::after_help())]
    Bridge(bridge::BridgeArgs),
    /// Sign in to a server ahead (`login URL`), sign out (`logout URL`), or show the stored
    /// credentials (`status [URL]`): what `bridge` and `call` use to sign in without the user.
    #[command(after_help = auth::AFTER_HELP)]
    Auth(auth::AuthArgs),
}

fn main() -> ExitCode {
    // Diagnostics on stderr, off unless `RUST_LOG` asks (e.g. `RUST_LOG=ssegate=debug`).
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Events(args) => events::run(&args),
        Command::Gate(args) => gate::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Probe(args) => probe::run(&args),
        Command::Call(args) => call::run(&args),
        Command::Bridge(args) => bridge::run(args),
        Command::Auth(args) => auth::run(&args),
    }
}
