//! Input handling shared by the subcommands: read a file or stdin, and cut it into chunks the way
//! `--split N` / `--split-random SEED` ask, so every subcommand exercises the same chunking.

use std::io::Read;
use std::path::PathBuf;

use bytes::Bytes;

/// How to cut the input into chunks before feeding it.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SplitArgs {
    /// Feed the input in chunks of N bytes.
    #[arg(long, value_name = "N", conflicts_with = "split_random", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) split: Option<u64>,
    /// Feed the input in chunks of random sizes 1..=97 drawn from a PRNG seeded with SEED.
    #[arg(long, value_name = "SEED")]
    pub(crate) split_random: Option<u64>,
}

/// The gate's settings on the command line (the library's defaults).
#[derive(clap::Args, Debug)]
pub(crate) struct GateSettings {
    /// The deepest nesting of arrays and objects a message may have; deeper is invalid.
    #[arg(long, value_name = "LEVELS", default_value_t = 1024)]
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

/// SplitMix64: a tiny, well-known seeded PRNG, so `--split-random SEED` is reproducible everywhere.
#[derive(Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Cuts `input` into the chunks `split` asks for; each chunk is a zero-copy slice of `input`.
pub(crate) fn chunks(input: Bytes, split: &SplitArgs) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut rng = split.split_random.map(SplitMix64::new);
    while at < input.len() {
        let size = match (&mut rng, split.split) {
            (Some(r), _) => 1 + (r.next_u64() % 97) as usize,
            (None, Some(n)) => usize::try_from(n).unwrap_or(usize::MAX),
            (None, None) => input.len(),
        };
        let end = at.saturating_add(size).min(input.len());
        out.push(input.slice(at..end));
        at = end;
    }
    out
}
