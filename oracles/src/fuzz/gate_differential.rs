//! `gate_differential`: the gate against an independent reference recogniser and serde_json, its own
//! chunking, and its SIMD kernels against the portable code.
//!
//! - **Reference**: a recursive-descent recogniser written from RFC 8259's grammar (below, sharing no
//!   code with the gate) decides the exact verdict of a text: `Incomplete` only when some continuation
//!   can still make it valid, `Invalid` (with the offset where it stopped being a prefix of JSON) when
//!   none can. The exact gate must give the same verdict and offset, for the whole text and after each
//!   piece.
//! - **Chunking**: verdict and invalid reason (offset included) are the same whole, in the input's
//!   pieces, and in even chunks; `Trailing`/`Invalid` are final.
//! - **Kernels**: every available SIMD kernel (not the portable one itself) gives the portable code's
//!   verdict and reason after every piece, in exact and fast mode.
//! - **serde_json** as a second opinion on complete texts; `check(&Data)` over a rope equals `feed`.
//!
//! Input: the common header (`split_header`). Configuration byte bits 0-2 pick an extra even chunk
//! size; bit 7 expands the payload `rep_lo rep_hi a b rest`: `rest[..a]`, then `rest[a..b]` repeated
//! `rep` times, then `rest[b..]`, up to [`MAX_EXPANDED`] bytes, with the cut points scaled over the
//! expanded text, so a small input explores multi-megabyte texts.

use bytes::Bytes;
use ssegate::gate::{Gate, GateConfig, InvalidReason, Isa, Verdict};
use ssegate::sse::Data;

use super::{pieces, split_header};

/// Largest expanded text.
const MAX_EXPANDED: usize = 8 << 20;
/// Even chunk sizes the configuration byte picks from (bits 0-2; 0: none).
const CHUNKS: [usize; 8] = [0, 1, 3, 63, 64, 65, 4096, 16385];
/// The gate's default depth limit, which the reference applies too.
const MAX_DEPTH: usize = 1024;
/// Above this size the reference judges only the whole text, not every piece's prefix.
const PREFIX_CHECK_MAX: usize = 64 << 10;

/// A verdict with the offset of an invalid one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judged {
    Incomplete,
    Complete,
    Trailing,
    Invalid(u64),
}

fn judged(gate: &Gate) -> Judged {
    match gate.verdict() {
        Verdict::Incomplete => Judged::Incomplete,
        Verdict::Complete => Judged::Complete,
        Verdict::Trailing => Judged::Trailing,
        Verdict::Invalid => Judged::Invalid(
            gate.invalid_reason()
                .map(InvalidReason::offset)
                .expect("Invalid without a reason"),
        ),
    }
}

// ---- the reference recogniser (RFC 8259, UTF-8 only) ----

/// Why the reference stopped.
enum Stop {
    /// The input ended where the grammar needs more: a viable prefix.
    End,
    /// The byte at this offset cannot continue any JSON text (or nests deeper than [`MAX_DEPTH`]).
    Error(usize),
}

struct Reference<'a> {
    b: &'a [u8],
    i: usize,
}

type Step = Result<(), Stop>;

impl Reference<'_> {
    fn peek(&self) -> Result<u8, Stop> {
        self.b.get(self.i).copied().ok_or(Stop::End)
    }

    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn expect(&mut self, want: u8) -> Step {
        if self.peek()? == want {
            self.i += 1;
            Ok(())
        } else {
            Err(Stop::Error(self.i))
        }
    }

    /// value = object / array / string / number / true / false / null
    fn value(&mut self, depth: usize) -> Step {
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => Err(Stop::Error(self.i)),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Step {
        for &c in word {
            self.expect(c)?;
        }
        Ok(())
    }

    /// array = `[` [ value *( `,` value ) ] `]`, whitespace around the structurals.
    fn array(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(Stop::Error(self.i));
        }
        self.i += 1;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b']' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Stop::Error(self.i)),
            }
        }
    }

    /// object = `{` [ member *( `,` member ) ] `}`; member = string `:` value.
    fn object(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(Stop::Error(self.i));
        }
        self.i += 1;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            if self.peek()? != b'"' {
                return Err(Stop::Error(self.i));
            }
            self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Stop::Error(self.i)),
            }
        }
    }

    fn digits(&mut self) -> Step {
        if !self.peek()?.is_ascii_digit() {
            return Err(Stop::Error(self.i));
        }
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        Ok(())
    }

    /// number = [ `-` ] int [ frac ] [ exp ]. The input may end right after any complete part.
    fn number(&mut self) -> Step {
        if self.peek()? == b'-' {
            self.i += 1;
        }
        if self.peek()? == b'0' {
            self.i += 1;
        } else {
            self.digits()?;
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.digits()?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek()?, b'+' | b'-') {
                self.i += 1;
            }
            self.digits()?;
        }
        Ok(())
    }

    /// string = `"` *char `"`: unescaped (>= 0x20, not `"` or `\`, whole UTF-8 characters) or an escape.
    fn string(&mut self) -> Step {
        self.i += 1;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            self.i += 1;
                            for _ in 0..4 {
                                if !self.peek()?.is_ascii_hexdigit() {
                                    return Err(Stop::Error(self.i));
                                }
                                self.i += 1;
                            }
                        }
                        _ => return Err(Stop::Error(self.i)),
                    }
                }
                0..=0x1f => return Err(Stop::Error(self.i)),
                0x20..=0x7f => self.i += 1,
                _ => self.utf8_char()?,
            }
        }
    }

    /// One non-ASCII character, judged by the standard library's UTF-8 validation: the shortest
    /// 2..=4-byte slice that is valid UTF-8 is the character. At the end of the input, a cut sequence is
    /// viable when some continuation byte (then more `0x80`s) would complete it. Errors are reported at
    /// the first byte of the sequence.
    fn utf8_char(&mut self) -> Step {
        let s = self.i;
        for len in 2..=4 {
            if let Some(c) = self.b.get(s..s + len)
                && std::str::from_utf8(c).is_ok()
            {
                self.i += len;
                return Ok(());
            }
        }
        let rest = &self.b[s..];
        if rest.len() < 4 {
            for total in rest.len() + 1..=4 {
                for c in 0x80..=0xBFu8 {
                    let mut candidate = rest.to_vec();
                    candidate.push(c);
                    candidate.resize(total, 0x80);
                    if std::str::from_utf8(&candidate).is_ok() {
                        return Err(Stop::End);
                    }
                }
            }
        }
        Err(Stop::Error(s))
    }
}

/// The reference's verdict on a whole text.
fn reference(text: &[u8]) -> Judged {
    let mut r = Reference { b: text, i: 0 };
    r.ws();
    if r.i == text.len() {
        return Judged::Incomplete;
    }
    match r.value(0) {
        Ok(()) => {
            r.ws();
            if r.i == text.len() {
                Judged::Complete
            } else {
                Judged::Trailing
            }
        }
        Err(Stop::End) => Judged::Incomplete,
        Err(Stop::Error(at)) => Judged::Invalid(at as u64),
    }
}

// ---- serde_json as a second opinion ----

/// What serde_json says about a whole text, reduced to what the gate must agree with.
#[derive(Debug, PartialEq, Eq)]
enum Serde {
    /// Exactly one value: the gate says `Complete`.
    Complete,
    /// One value, then more: the gate says `Trailing`.
    Trailing,
    /// Rejected (syntax error or unexpected end): the gate does not say `Complete`. serde_json's
    /// errors do not separate "invalid" from "incomplete" (`-` is "invalid number"), and `01` is
    /// its "invalid number" but the gate's `Trailing`, so nothing finer is asserted.
    Rejected,
    /// Where RFC 8259 parsers legitimately differ (the `ambiguous` tag of
    /// tests/data/json-test-suite-prefixes.jsonl): serde_json rejects lone surrogate escapes, floats
    /// that overflow and nesting deeper than 128, all of which the grammar (and the gate) accepts.
    Ambiguous,
}

/// (`Value`, not `IgnoredAny`: only the former checks that strings are UTF-8.)
fn serde_verdict(text: &[u8]) -> Serde {
    match serde_json::from_slice::<serde_json::Value>(text) {
        Ok(_) => Serde::Complete,
        Err(e) => {
            let msg = e.to_string();
            if has_surrogate_escape(text)
                || ["surrogate", "number out of range", "recursion limit"]
                    .iter()
                    .any(|m| msg.contains(m))
            {
                Serde::Ambiguous
            } else if msg.contains("trailing characters") {
                Serde::Trailing
            } else {
                Serde::Rejected
            }
        }
    }
}

/// Whether `text` holds a `\\u` escape of a UTF-16 surrogate (`\\uD800`..`\\uDFFF`).
fn has_surrogate_escape(text: &[u8]) -> bool {
    text.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && w[2].eq_ignore_ascii_case(&b'd')
            && matches!(w[3].to_ascii_lowercase(), b'8'..=b'9' | b'a'..=b'f')
    })
}

// ---- input expansion ----

/// The raw `u16` cut points of the header (before they are reduced modulo the payload length).
fn raw_cuts(data: &[u8]) -> Vec<u16> {
    let n = usize::from(data.get(1).copied().unwrap_or(0) % 17);
    let rest = data.get(2..).unwrap_or(&[]);
    let take = (2 * n).min(rest.len() & !1);
    rest[..take]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// The expanded text (configuration bit 7) and its cut points.
fn expand(data: &[u8], payload: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let byte = |k: usize| usize::from(payload.get(k).copied().unwrap_or(0));
    let rep = byte(0) | byte(1) << 8;
    let rest = payload.get(4..).unwrap_or(&[]);
    let a = byte(2).min(rest.len());
    let b = byte(3).clamp(a, rest.len());
    let (head, unit, tail) = (&rest[..a], &rest[a..b], &rest[b..]);
    let room = MAX_EXPANDED.saturating_sub(head.len() + tail.len());
    let rep = if unit.is_empty() {
        0
    } else {
        rep.min(room / unit.len())
    };
    let mut text = Vec::with_capacity(head.len() + unit.len() * rep + tail.len());
    text.extend_from_slice(head);
    for _ in 0..rep {
        text.extend_from_slice(unit);
    }
    text.extend_from_slice(tail);
    let total = text.len() as u64;
    let mut cuts: Vec<usize> = raw_cuts(data)
        .into_iter()
        .map(|c| (u64::from(c) * (total + 1) / 65536) as usize)
        .collect();
    cuts.sort_unstable();
    (text, cuts)
}

// ---- the oracle ----

/// The judgement after each piece, for one engine on one ISA; `None` when the ISA is unavailable.
fn run(exact: bool, isa: Isa, pieces: &[&[u8]]) -> Option<Vec<Judged>> {
    if !isa.is_available() {
        return None;
    }
    // `max_isa` with an available ISA runs exactly its kernels.
    let mut gate = GateConfig::new().exact(exact).max_isa(isa).build();
    debug_assert_eq!(gate.isa(), isa);
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        gate.feed(p);
        out.push(judged(&gate));
    }
    Some(out)
}

/// The `gate_differential` oracle (see the module docs).
pub fn gate_differential(data: &[u8]) {
    let (config, cuts, payload) = split_header(data);
    let expanded;
    let (text, cuts): (&[u8], Vec<usize>) = if config & 0x80 != 0 {
        let (t, c) = expand(data, payload);
        expanded = t;
        (&expanded, c)
    } else {
        (payload, cuts)
    };
    let chunked = pieces(text, &cuts);
    let chunk = match CHUNKS[usize::from(config & 7)] {
        1 if text.len() > PREFIX_CHECK_MAX => 63,
        size => size,
    };
    let even: Vec<&[u8]> = if chunk == 0 {
        Vec::new()
    } else {
        text.chunks(chunk).collect()
    };

    let want = reference(text);
    for exact in [true, false] {
        let portable = run(exact, Isa::Portable, &chunked).expect("portable always runs");
        let whole = run(exact, Isa::Portable, &[text]).expect("portable always runs")[0];
        // Chunking invariance, offsets included.
        assert_eq!(
            portable.last(),
            Some(&whole),
            "exact={exact}: cuts {cuts:?} change the verdict"
        );
        if !even.is_empty() {
            let v = run(exact, Isa::Portable, &even).expect("portable always runs");
            assert_eq!(v.last(), Some(&whole), "exact={exact}: {chunk}-byte chunks");
        }
        // Every SIMD kernel against the portable code, after every piece.
        for isa in Isa::all().iter().copied().filter(|&i| i != Isa::Portable) {
            if let Some(v) = run(exact, isa, &chunked) {
                assert_eq!(
                    v, portable,
                    "exact={exact}: {isa:?} disagrees with portable"
                );
                let w = run(exact, isa, &[text]).expect("available")[0];
                assert_eq!(w, whole, "exact={exact}: {isa:?} whole");
            }
        }
        // Trailing and Invalid are final.
        for w in portable.windows(2) {
            if matches!(w[0], Judged::Trailing | Judged::Invalid(_)) {
                assert_eq!(w[1], w[0], "exact={exact}: a final verdict changed");
            }
        }
        if exact {
            // The exact verdict is the reference's, whole and after every piece.
            assert_eq!(whole, want, "exact gate vs the reference recogniser");
            if text.len() <= PREFIX_CHECK_MAX {
                let mut at = 0;
                for (p, got) in chunked.iter().zip(&portable) {
                    at += p.len();
                    assert_eq!(*got, reference(&text[..at]), "prefix of {at} bytes");
                }
            }
        } else if whole == Judged::Complete {
            // Fast mode's Complete means balanced: never for a text the reference calls incomplete
            // or trailing.
            assert!(
                !matches!(want, Judged::Incomplete | Judged::Trailing),
                "fast Complete for {want:?}"
            );
        } else if matches!(want, Judged::Complete) {
            panic!("fast mode says {whole:?} for a complete text");
        }
    }

    let mut gate = Gate::new();
    gate.feed(text);
    let verdict = gate.verdict();

    // `check` over a rope of the same pieces agrees, in both modes (fast mode falls back to exact
    // whenever it is not Complete, so it is Complete whenever the exact verdict is).
    let mut rope = Data::new();
    for p in &chunked {
        rope.push(Bytes::copy_from_slice(p));
    }
    assert_eq!(gate.check(&rope), verdict, "check(rope) differs from feed");
    let mut fast = GateConfig::new().exact(false).build();
    let fast_verdict = fast.check(&rope);
    if verdict == Verdict::Complete {
        assert_eq!(
            fast_verdict,
            Verdict::Complete,
            "fast check rejects a complete text"
        );
    } else if fast_verdict != Verdict::Complete {
        assert_eq!(
            fast_verdict, verdict,
            "fast check's fallback differs from exact"
        );
    }

    // serde_json as the real parser (it does not stop at the gate's depth limit: skip deep texts).
    if text.iter().filter(|&&b| b == b'[' || b == b'{').count() <= MAX_DEPTH {
        match serde_verdict(text) {
            Serde::Complete => assert_eq!(verdict, Verdict::Complete, "serde_json accepts it"),
            Serde::Trailing => assert_eq!(
                verdict,
                Verdict::Trailing,
                "serde_json: trailing characters"
            ),
            Serde::Rejected => assert_ne!(verdict, Verdict::Complete, "serde_json rejects it"),
            Serde::Ambiguous => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_verdicts() {
        let cases: &[(&[u8], Judged)] = &[
            (b"", Judged::Incomplete),
            (b" [1, {\"a\": [true]}] ", Judged::Complete),
            (b"-", Judged::Incomplete),
            (b"01", Judged::Trailing),
            (b"[01]", Judged::Invalid(2)),
            (b"{\"a\" 1}", Judged::Invalid(5)),
            (b"\"\xd1\xd1", Judged::Invalid(1)),
            (b"\"\xe2\x82", Judged::Incomplete),
            (b"\"\xf4\x90", Judged::Invalid(1)),
            (b"[\"\\u12", Judged::Incomplete),
            (b"[\"\\u12x", Judged::Invalid(6)),
        ];
        for &(text, want) in cases {
            assert_eq!(reference(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }
}
