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
