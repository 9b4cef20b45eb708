//! `ssegate gate`: the gate's verdict on one whole JSON text, fed in the chunks `--split` asks for.

use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;

use crate::input::{self, SplitArgs, chunks, read_input};

/// Arguments of `ssegate gate`.
#[derive(clap::Args, Debug)]
pub(crate) struct GateArgs {
    #[command(flatten)]
    split: SplitArgs,
    #[command(flatten)]
    gate: input::GateSettings,
    /// Also reports the instruction set the gate ran (`isa: neon`, `isa: avx2`, ...) on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// The JSON text; stdin when absent or `-`.
    file: Option<PathBuf>,
}

/// Prints exactly one of `incomplete`, `complete`, `trailing`, `invalid`; the exit status is 0 whatever
/// the verdict (2 when the input cannot be read). With `--verbose`, stderr gets `isa: NAME`.
pub(crate) fn run(args: &GateArgs) -> ExitCode {
    let input = match read_input(args.file.as_ref()) {
        Ok(input) => Bytes::from(input),
        Err(e) => {
            eprintln!("ssegate gate: cannot read input: {e}");
            return ExitCode::from(2);
        }
    };
    let mut gate = args.gate.gate().build();
    for chunk in chunks(input, &args.split) {
        gate.feed(&chunk);
    }
    println!("{}", gate.verdict());
    if args.verbose {
        eprintln!("isa: {}", gate.isa().name());
    }
    ExitCode::SUCCESS
}
