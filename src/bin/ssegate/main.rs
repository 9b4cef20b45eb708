//! The `ssegate` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod input;

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
enum Command {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {}
}
