//! Input handling shared by the subcommands: read a file or stdin, and cut it into chunks the way
//! `--split N` / `--split-random SEED` ask, so every subcommand exercises the same chunking.

use std::io::Read;
use std::path::PathBuf;

use bytes::Bytes;
use ssegate_rng::SplitMix64;

/// How to cut the input into chunks before feeding it.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SplitArgs {
    /// Feed the input in chunks of N bytes.
    #[arg(long, value_name = "N", conflicts_with = "split_random", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) split: Option<u64>,
    /// Feed the input in chunks of random sizes 1..=97 drawn from a PRNG (SplitMix64) seeded with
    /// SEED: the same chunks for the same SEED everywhere.
    #[arg(long, value_name = "SEED")]
    pub(crate) split_random: Option<u64>,
}

/// The gate's settings on the command line (the library's defaults).
#[derive(clap::Args, Debug)]
pub(crate) struct GateSettings {
    /// The deepest nesting of arrays and objects a message may have; deeper is invalid.
    #[arg(long, value_name = "LEVELS", default_value_t = ssegate::contract::DEFAULT_MAX_DEPTH)]
    pub(crate) max_depth: usize,
    /// The most capable instruction set the gate may use (the best this CPU has, up to it).
    #[arg(long, value_enum, default_value_t = IsaArg::Avx512)]
    pub(crate) max_isa: IsaArg,
}

/// An instruction set, as `--max-isa` names it.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum IsaArg {
    Portable,
    /// AArch64 NEON (on x86-64, a cap at `neon` leaves the portable code).
    Neon,
    Avx2,
    Avx512,
}

impl GateSettings {
    /// The gate's configuration these arguments ask for.
    pub(crate) fn gate(&self) -> ssegate::gate::GateConfig {
        let mut config = ssegate::gate::GateConfig::new();
        config.max_depth(self.max_depth).max_isa(self.isa());
        config
    }

    /// The guard's configuration with these gate settings.
    pub(crate) fn guard(&self) -> ssegate::resume::GuardConfig {
        let mut config = ssegate::resume::GuardConfig::default();
        config.max_depth(self.max_depth).max_isa(self.isa());
        config
    }

    fn isa(&self) -> ssegate::gate::Isa {
        use ssegate::gate::Isa;
        match self.max_isa {
            IsaArg::Portable => Isa::Portable,
            IsaArg::Neon => Isa::Neon,
            IsaArg::Avx2 => Isa::Avx2,
            IsaArg::Avx512 => Isa::Avx512,
        }
    }
}

/// Reads FILE, or stdin when FILE is absent or `-`.
pub(crate) fn read_input(file: Option<&PathBuf>) -> std::io::Result<Vec<u8>> {
    match file {
        Some(p) if p.as_os_str() != "-" => std::fs::read(p),
        _ => {
            let mut buf = Vec::new();
            std::io::stdin().lock().read_to_end(&mut buf)?;
            Ok(buf)
        }
    }
}

/// Cuts `input` into the chunks `split` asks for; each chunk is a zero-copy slice of `input`.
pub(crate) fn chunks(input: Bytes, split: &SplitArgs) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut rng = split.split_random.map(SplitMix64::new);
    while at < input.len() {
        let size = match (&mut rng, split.split) {
            (Some(r), _) => 1 + r.below(97),
            (None, Some(n)) => usize::try_from(n).unwrap_or(usize::MAX),
            (None, None) => input.len(),
        };
        let end = at.saturating_add(size).min(input.len());
        out.push(input.slice(at..end));
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// `--max-depth`'s default is the gate's own: at that depth a message is complete, one deeper
    /// is invalid, with the default configuration as with the flag's.
    #[test]
    fn the_max_depth_default_is_the_gates() {
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            gate: GateSettings,
        }
        let flag = Args::parse_from(["x"]).gate.max_depth;
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        for config in [ssegate::gate::GateConfig::new(), {
            let mut c = ssegate::gate::GateConfig::new();
            c.max_depth(flag);
            c
        }] {
            for (depth, complete) in [(flag, true), (flag + 1, false)] {
                let mut gate = config.build();
                gate.feed(nested(depth).as_bytes());
                let verdict = gate.verdict();
                assert_eq!(
                    verdict == ssegate::gate::Verdict::Complete,
                    complete,
                    "depth {depth}: {verdict:?}"
                );
            }
        }
    }

    /// `--split-random 42` cuts as it always has: the chunk sizes are SplitMix64's from seed 42,
    /// stated here as the oracle (1 + each value mod 97).
    #[test]
    fn split_random_chunks_are_the_seeds_sequence() {
        let split = SplitArgs {
            split: None,
            split_random: Some(42),
        };
        let sizes: Vec<usize> = chunks(Bytes::from(vec![b'x'; 300]), &split)
            .iter()
            .map(Bytes::len)
            .collect();
        assert_eq!(sizes, [43, 7, 55, 7, 59, 89, 39, 1]);
    }
}
