//! `ssegate gate`: the gate's verdict on whole JSON texts, each fed in the chunks `--split` asks for.

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
    /// Also reports the instruction set the gate ran (`isa: neon`, `isa: avx2`, ...) on stderr,
    /// once per text.
    #[arg(short, long)]
    verbose: bool,
    /// The JSON texts, each judged on its own; stdin when absent or `-`. With more than one, each
    /// verdict is followed by a tab and the file's name.
    files: Vec<PathBuf>,
}

/// Prints exactly one of `incomplete`, `complete`, `trailing`, `invalid` per text (followed by a
/// tab and the file's name when there are several); the exit status is 0 whatever the verdicts, 2
/// when an input cannot be read (the other texts are still judged). With `--verbose`, stderr gets
/// `isa: NAME` per text.
pub(crate) fn run(args: &GateArgs) -> ExitCode {
    let stdin = [PathBuf::from("-")];
    let files = if args.files.is_empty() {
        &stdin[..]
    } else {
        &args.files[..]
    };
    let named = files.len() > 1;
    let mut status = ExitCode::SUCCESS;
    for file in files {
        let input = match read_input(Some(file)) {
            Ok(input) => Bytes::from(input),
            Err(e) => {
                eprintln!("ssegate gate: cannot read {}: {e}", file.display());
                status = ExitCode::from(2);
                continue;
            }
        };
        let mut gate = args.gate.gate().build();
        for chunk in chunks(input, &args.split) {
            gate.feed(&chunk);
        }
        if named {
            println!("{}\t{}", gate.verdict(), file.display());
        } else {
            println!("{}", gate.verdict());
        }
        if args.verbose {
            eprintln!("isa: {}", gate.isa().name());
        }
    }
    status
}
