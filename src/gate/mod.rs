//! JSON completeness gate: is this message exactly one complete JSON value?
//!
//! A [`Gate`] is fed the bytes of one message in pieces of any size ([`Gate::feed`]) and can say at any
//! moment which [`Verdict`] the input would get if it ended there ([`Gate::verdict`]). It keeps a small
//! carried state, never copies or re-reads the input, and does not allocate per call (only the nesting
//! bit-stack grows, amortised, up to the configured depth limit).
//!
//! ```
//! use ssegate::gate::{Gate, Verdict};
//!
//! let mut gate = Gate::new();
//! gate.feed(br#"{"jsonrpc":"2.0","id":1,"res"#);
//! assert_eq!(gate.verdict(), Verdict::Incomplete);
//! gate.feed(br#"ult":{"text":"hi"}}"#);
//! assert_eq!(gate.verdict(), Verdict::Complete);
//! // The duplicated-prefix signature: a resumed stream appended onto a partial event.
//! gate.feed(br#"{"jsonrpc""#);
//! assert_eq!(gate.verdict(), Verdict::Trailing);
//! ```
//!
//! Two engines live behind the one type:
//!
//! - the **exact recogniser** (default, [`GateConfig::exact`]`(true)`): a JSON grammar pushdown automaton
//!   (RFC 8259, UTF-8 only), incremental, without recursion, that skips string contents with SIMD
//!   scanning. With the vector kernels, whole 64-byte blocks between tokens are validated on their
//!   structural characters, string delimiters and scalar tokens only (simdjson's stage 1 / stage 2
//!   split); whatever that walker cannot prove valid is judged by the byte automaton. Its verdicts are
//!   precise, the same on every instruction set.
//! - the **fast path** ([`GateConfig::exact`]`(false)`): simdjson stage-1 style bracket balancing made
//!   resumable (escape carry, in-string carry, depth, a stack of container kinds), over the structural
//!   masks of AVX-512 / AVX2 kernels picked at run time (NEON on AArch64). Its `Complete` means "one balanced top-level container"; it cannot see
//!   `{"a" 1}`. [`Gate::check`] re-runs the exact recogniser whenever the fast verdict is not `Complete`;
//!   with the incremental [`Gate::feed`] API the fast verdict stands, and a later parse must validate.
//!
//! Neither engine ever says [`Verdict::Complete`] for a proper prefix of a JSON text whose last value is
//! a container or a string (a top-level number is `Complete` as soon as it is a number: `4` of `42`).
//!
//! Escaped lone surrogates (`"\ud800"`) are accepted: RFC 8259's grammar allows any `\uXXXX` escape and
//! the JSONTestSuite-derived conformance data (`tests/data/`) marks them as `complete` (parsers differ on
//! them, so a later parse may still reject the text). Raw bytes that are not UTF-8, including encoded
//! surrogates, and a byte order mark are `Invalid`.
//!
//! An [`InvalidReason`]'s offset does not depend on how the message was cut into pieces.
//!
//! Layout: the crate's `arch` module turns bytes into per-block masks (the only `unsafe` code, one
//! instruction set per file, and the CPU detection behind [`Isa`]); `strings` (string skipping for
//! the exact recogniser), `stage1` (bracket balancing) and `exact` (the grammar automaton and its
//! structural walker) consume those masks. Dependencies point one way, towards `arch`.
#![forbid(unsafe_code)]

mod exact;
mod stage1;
mod strings;

use std::fmt;

use crate::arch::Kernels;
use crate::sse::Data;

pub use crate::arch::Isa;

use exact::Exact;
#[cfg(test)]
pub(crate) use exact::MAX_TOP_KEYS;
pub(crate) use exact::TopKeys;
use stage1::Stage1;

/// What the input seen so far is, if it ended here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A proper prefix of some JSON text (this includes empty and whitespace-only input).
    Incomplete,
    /// Exactly one JSON value, with optional whitespace around it.
    Complete,
    /// One complete JSON value followed by something other than whitespace: the signature of a resumed
    /// stream appended onto a partial event.
    Trailing,
    /// Neither a JSON text nor a prefix of one.
    Invalid,
}

impl Verdict {
    /// The verdict as the lower-case word the CLI prints: `incomplete`, `complete`, `trailing` or
    /// `invalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Incomplete => "incomplete",
            Verdict::Complete => "complete",
            Verdict::Trailing => "trailing",
            Verdict::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the gate said [`Verdict::Invalid`]. Offsets count bytes from the start of the message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The opening bracket at `offset` nests deeper than `limit` ([`GateConfig::max_depth`]).
    TooDeep {
        /// The configured maximum nesting depth.
        limit: usize,
        /// Offset of the bracket that went over the limit.
        offset: u64,
    },
    /// The closing bracket at `offset` does not match the open container (`{]`, `[}`).
    Mismatched {
        /// Offset of the closing bracket.
        offset: u64,
    },
    /// The byte at `offset` cannot continue any JSON text.
    Syntax {
        /// Offset of the offending byte.
        offset: u64,
    },
    /// A raw control character (below U+0020) inside a string at `offset`.
    ControlCharacter {
        /// Offset of the control character.
        offset: u64,
    },
    /// Bytes that are not UTF-8 inside a string, starting at `offset`.
    Utf8 {
        /// Offset of the first byte that cannot be part of a UTF-8 sequence.
        offset: u64,
    },
}

impl InvalidReason {
    /// Offset of the byte where the input stopped being (a prefix of) JSON.
    pub fn offset(&self) -> u64 {
        match *self {
            InvalidReason::TooDeep { offset, .. }
            | InvalidReason::Mismatched { offset }
            | InvalidReason::Syntax { offset }
            | InvalidReason::ControlCharacter { offset }
            | InvalidReason::Utf8 { offset } => offset,
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidReason::TooDeep { limit, offset } => {
                write!(f, "nesting deeper than {limit} levels at byte {offset}")
            }
            InvalidReason::Mismatched { offset } => {
                write!(f, "mismatched closing bracket at byte {offset}")
            }
            InvalidReason::Syntax { offset } => write!(f, "JSON syntax error at byte {offset}"),
            InvalidReason::ControlCharacter { offset } => {
                write!(f, "raw control character in a string at byte {offset}")
            }
            InvalidReason::Utf8 { offset } => write!(f, "invalid UTF-8 at byte {offset}"),
        }
    }
}

impl std::error::Error for InvalidReason {}

/// Configuration for a [`Gate`]; `GateConfig::default()` is what [`Gate::new`] uses.
#[derive(Clone, Debug)]
pub struct GateConfig {
    max_depth: usize,
    exact: bool,
    max_isa: Isa,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            max_depth: crate::contract::DEFAULT_MAX_DEPTH,
            exact: true,
            max_isa: Isa::Avx512,
        }
    }
}

impl GateConfig {
    /// Default configuration: depth limit 1024, exact verdicts.
    pub fn new() -> Self {
        GateConfig::default()
    }

    /// Maximum nesting depth of arrays and objects (default 1024). One more level is
    /// [`InvalidReason::TooDeep`]. The gate's own memory for nesting is one byte per level in use.
    pub fn max_depth(&mut self, max_depth: usize) -> &mut Self {
        self.max_depth = max_depth;
        self
    }

    /// Whether the exact recogniser decides verdicts (default `true`). With `false`, [`Gate::feed`] runs only
    /// the SIMD bracket-balancing fast path, whose `Complete` means "balanced"; [`Gate::check`] still falls
    /// back to the exact recogniser when the fast verdict is not `Complete`.
    pub fn exact(&mut self, exact: bool) -> &mut Self {
        self.exact = exact;
        self
    }

    /// The most capable instruction set [`GateConfig::build`] may pick (default [`Isa::Avx512`], no cap):
    /// the gate runs the best kernels this CPU has up to it. `Isa::Avx2` keeps the gate off AVX-512
    /// (on CPUs that lower their clock for it, or to match another machine's figures);
    /// `Isa::Portable` runs the portable code. Verdicts are the same on every instruction set.
    pub fn max_isa(&mut self, isa: Isa) -> &mut Self {
        self.max_isa = isa;
        self
    }

    /// A gate with this configuration, using the best instruction set this CPU has (up to
    /// [`GateConfig::max_isa`]).
    pub fn build(&self) -> Gate {
        self.build_inner(Kernels::best_up_to(self.max_isa))
    }

    /// A gate forced onto `isa`, or `None` when this CPU (or this build) cannot run it (outside
    /// the crate: [`GateConfig::max_isa`] with an [`Isa::is_available`] one).
    #[cfg(test)]
    pub(crate) fn build_with_isa(&self, isa: Isa) -> Option<Gate> {
        Kernels::new(isa).map(|kernels| self.build_inner(kernels))
    }

    fn build_inner(&self, kernels: Kernels) -> Gate {
        Gate {
            exact_mode: self.exact,
            use_exact: self.exact,
            exact: Exact::new(self.max_depth, kernels),
            fast: Stage1::new(self.max_depth, kernels),
            config: self.clone(),
        }
    }
}

/// The incremental JSON completeness gate. See the [module docs](self).
pub struct Gate {
    config: GateConfig,
    /// `GateConfig::exact`.
    exact_mode: bool,
    /// Whether the exact recogniser is fed the message: in exact mode, or after `check` fell back. (In
    /// fast mode it also takes over a top-level value that is not a container: see
    /// [`Gate::exact_answers`].)
    use_exact: bool,
    exact: Exact,
    fast: Stage1,
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("config", &self.config)
            .field("isa", &self.isa())
            .field("verdict", &self.verdict())
            .field("invalid_reason", &self.invalid_reason())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate with the default [`GateConfig`].
    pub fn new() -> Gate {
        GateConfig::default().build()
    }

    /// The instruction set this gate's kernels use.
    pub fn isa(&self) -> Isa {
        self.exact.isa()
    }

    /// Feeds the next piece of the message. O(`bytes.len()`), no allocation (beyond the amortised growth of
    /// the nesting stack). Once the verdict is `Trailing` or `Invalid` further bytes are ignored.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.exact_answers() {
            self.exact.feed(bytes);
        } else if let Some(start) = self.fast.feed(bytes) {
            // A top-level scalar: bracket balancing has nothing to say about it.
            self.exact.reset();
            let consumed_before = self.fast.consumed() - bytes.len() as u64;
            self.exact.set_offset(consumed_before + start as u64);
            self.exact.feed(&bytes[start..]);
        }
    }

    /// Whether the exact recogniser's state answers: in exact mode, after `check` fell back, or when the
    /// fast path handed it a top-level value that is not a container.
    fn exact_answers(&self) -> bool {
        self.use_exact || self.fast.delegated()
    }

    /// The verdict if the input ended here. Cheap; may be called at any time.
    pub fn verdict(&self) -> Verdict {
        if self.exact_answers() {
            self.exact.verdict()
        } else {
            self.fast.verdict()
        }
    }

    /// Why the verdict is [`Verdict::Invalid`] (`None` for any other verdict).
    pub fn invalid_reason(&self) -> Option<&InvalidReason> {
        if self.exact_answers() {
            self.exact.reason()
        } else {
            self.fast.reason()
        }
    }

    /// The message offsets of the top-level object's keys (their opening quotes), recorded in the same
    /// pass that judged the message; `None` when the fast path judged it (a record with more keys
    /// than it holds says so itself: [`TopKeys::offsets`]). Meaningful once the verdict is `Complete`.
    pub(crate) fn top_keys(&self) -> Option<&TopKeys> {
        self.exact_answers().then(|| self.exact.top_keys())
    }

    /// Forgets the message seen so far, keeping allocations, ready for the next message.
    pub fn reset(&mut self) {
        self.use_exact = self.exact_mode;
        self.exact.reset();
        self.fast.reset();
    }

    /// Resets, feeds every segment of `data`, and returns the verdict. In fast mode
    /// ([`GateConfig::exact`]`(false)`) a verdict other than `Complete` is re-derived by the exact recogniser,
    /// so only `Complete` means "balanced but not validated".
    pub fn check(&mut self, data: &Data) -> Verdict {
        self.check_with(data, |_| {})
    }

    /// [`Gate::check`], handing each segment to `also` right after the gate read it, while it is still
    /// in cache: the guard's content hash rides on the gate's pass instead of reading the message again.
    pub(crate) fn check_with(&mut self, data: &Data, mut also: impl FnMut(&[u8])) -> Verdict {
        self.reset();
        for segment in data.chunks() {
            self.feed(segment);
            also(segment);
        }
        let verdict = self.verdict();
        if !self.use_exact && verdict != Verdict::Complete && !self.fast.delegated() {
            self.use_exact = true;
            self.exact.reset();
            for segment in data.chunks() {
                self.exact.feed(segment);
            }
            return self.exact.verdict();
        }
        verdict
    }
}

/// The verdict for a whole message with the default configuration.
pub fn verdict_of(bytes: &[u8]) -> Verdict {
    let mut gate = Gate::new();
    gate.feed(bytes);
    gate.verdict()
}

/// Whether `b` is JSON whitespace (RFC 8259 `ws`).
#[inline(always)]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_basics_every_isa_and_mode() {
        let cases: &[(&[u8], Verdict)] = &[
            (b"", Verdict::Incomplete),
            (b"{\"a\":[1,2,{\"b\":\"]\\\"\"}]}", Verdict::Complete),
            (b"{\"a\":[1,2,{\"b\":\"]\\\"\"}]", Verdict::Incomplete),
            (b"[1]x", Verdict::Trailing),
            (b"{]", Verdict::Invalid),
            (b"42", Verdict::Complete),
        ];
        for isa in crate::arch::tests::isas_under_test() {
            for exact in [true, false] {
                let mut gate = GateConfig::new().exact(exact).build_with_isa(isa).unwrap();
                for &(input, want) in cases {
                    gate.reset();
                    for b in input {
                        gate.feed(std::slice::from_ref(b));
                    }
                    assert_eq!(gate.verdict(), want, "{isa:?} exact={exact} {input:?}");
                }
            }
        }
        assert_eq!(Verdict::Trailing.as_str(), "trailing");
        assert_eq!(
            InvalidReason::TooDeep {
                limit: 2,
                offset: 5
            }
            .offset(),
            5
        );
    }

    /// `max_isa` caps the detection: the gate runs the most capable available instruction set that
    /// is not above the cap, whatever the CPU (on an AVX-512 machine, `Avx2` picks AVX2; without
    /// AVX2, every cap gives the portable code).
    #[test]
    fn max_isa_caps_the_detection() {
        assert_eq!(Gate::new().isa(), Isa::detect());
        for &cap in Isa::all() {
            let want = Isa::available()
                .rfind(|isa| *isa <= cap)
                .unwrap_or(Isa::Portable);
            let gate = GateConfig::new().max_isa(cap).build();
            assert_eq!(gate.isa(), want, "cap {cap:?}");
        }
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
    }
}
