//! `gate_differential`: the gate's verdict does not depend on the chunking, agrees with serde_json
//! on complete texts, is never `Complete` for a proper prefix of a text whose value is a container,
//! string or literal, and every SIMD kernel gives exactly the portable kernel's verdicts.

use bytes::Bytes;
use ssegate::gate::{Config, Gate, Isa, Verdict};
use ssegate::sse::Data;

use super::{pieces, split_header};

/// The verdict after each piece, for one engine on one ISA; `None` when the ISA is unavailable.
fn verdicts(exact: bool, isa: Isa, pieces: &[&[u8]]) -> Option<Vec<Verdict>> {
    let mut gate = Config::new().exact(exact).build_with_isa(isa)?;
    let mut out = Vec::with_capacity(pieces.len());
    for p in pieces {
        gate.feed(p);
        out.push(gate.verdict());
        if out.last() == Some(&Verdict::Invalid) {
            assert!(gate.invalid_reason().is_some(), "Invalid without a reason");
        }
    }
    Some(out)
}

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
    /// Where RFC 8259 parsers legitimately differ (the `ambiguous` tag of tests/data/json-test-suite-prefixes.jsonl):
    /// serde_json rejects lone surrogate escapes, floats that overflow and nesting deeper than 128,
    /// all of which the grammar (and the gate) accepts.
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

/// The `gate_differential` oracle (see the module docs).
pub fn gate_differential(data: &[u8]) {
    let (_config, cuts, text) = split_header(data);
    let chunked = pieces(text, &cuts);

    // Chunking invariance and kernel agreement, for both engines.
    for exact in [true, false] {
        let portable = verdicts(exact, Isa::Portable, &chunked).expect("portable always runs");
        let whole = verdicts(exact, Isa::Portable, &[text]).expect("portable always runs");
        assert_eq!(
            portable.last(),
            whole.last(),
            "exact={exact}: cuts {cuts:?} change the verdict"
        );
        for isa in Isa::ALL {
            if let Some(v) = verdicts(exact, isa, &chunked) {
                assert_eq!(
                    v, portable,
                    "exact={exact}: {isa:?} disagrees with portable"
                );
            }
        }
        // Trailing and Invalid are final.
        for w in portable.windows(2) {
            if matches!(w[0], Verdict::Trailing | Verdict::Invalid) {
                assert_eq!(w[1], w[0], "exact={exact}: a final verdict changed");
            }
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
    let mut fast = Config::new().exact(false).build();
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

    // serde_json as the real parser.
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
    if verdict == Verdict::Invalid {
        assert_ne!(serde_verdict(text), Serde::Complete);
    }

    // No proper prefix of a complete text is Complete, unless the value is a number (`4` of `42`).
    if verdict == Verdict::Complete {
        let start = text
            .iter()
            .position(|b| !b" \t\r\n".contains(b))
            .unwrap_or(0);
        let end = text
            .iter()
            .rposition(|b| !b" \t\r\n".contains(b))
            .map_or(0, |i| i + 1);
        let number = matches!(text.get(start), Some(b'-' | b'0'..=b'9'));
        let mut gate = Gate::new();
        let mut at = 0;
        for p in &chunked {
            gate.feed(p);
            at += p.len();
            if at < end {
                let v = gate.verdict();
                if number {
                    assert!(
                        matches!(v, Verdict::Incomplete | Verdict::Complete),
                        "prefix {at}: {v:?}"
                    );
                } else {
                    assert_eq!(v, Verdict::Incomplete, "proper prefix of {at} bytes");
                }
            }
        }
    }
}
