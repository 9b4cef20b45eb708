//! The gate against oracles: serde_json on every prefix, the JSONTestSuite-derived verdict file, the
//! seed's duplicated-prefix corruption, depth limits, and every SIMD kernel against the portable path.

use std::collections::BTreeSet;
use std::sync::Mutex;

use proptest::prelude::*;
use serde_json::Value;
use ssegate::gate::{Gate, GateConfig, InvalidReason, Isa, Verdict, verdict_of};
use ssegate::sse::Data;

/// The instruction sets the differential tests run: the available ones, `Portable` first.
///
/// One a test cannot run is reported on stderr, once per test and instruction set (written to
/// `std::io::stderr()` directly: libtest captures `eprintln!` of passing tests). With the
/// environment variable `CI` set, an x86-64 host without AVX2 fails the test (every CI machine here
/// has it, and without it no vector kernel is tested); a missing AVX-512 is only reported.
fn isas() -> Vec<Isa> {
    use std::io::Write;
    static REPORTED: Mutex<BTreeSet<(String, Isa)>> = Mutex::new(BTreeSet::new());
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a gate test");
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    let mut run = Vec::new();
    for &isa in Isa::all() {
        if isa.is_available() {
            run.push(isa);
            continue;
        }
        let (why, required) = why_not_available(isa);
        let first = REPORTED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((test.to_owned(), isa));
        if first {
            let _ = writeln!(
                std::io::stderr().lock(),
                "ssegate: {test}: the {} gate is NOT TESTED: {why}",
                isa.name()
            );
        }
        assert!(
            !(ci && required),
            "CI is set and the {} kernels cannot run: {why}",
            isa.name()
        );
    }
    run
}

/// Why `isa` cannot run here, and whether that fails a run under `CI` (only an x86-64 CPU without
/// AVX2 does).
fn why_not_available(isa: Isa) -> (&'static str, bool) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    let cpu_has_avx2 = std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let cpu_has_avx2 = false;
    let x86 = matches!(isa, Isa::Avx2 | Isa::Avx512);
    if !x86 {
        return ("not an instruction set of this target", false);
    }
    if cfg!(not(target_arch = "x86_64")) {
        ("not an x86-64 build", false)
    } else if cfg!(miri) {
        ("Miri runs no vector kernel", false)
    } else if cfg!(ssegate_disable_simd) && cpu_has_avx2 {
        (
            "the ssegate_disable_simd cfg compiles the kernels out",
            false,
        )
    } else if cfg!(ssegate_disable_simd) {
        (
            "the ssegate_disable_simd cfg compiles the kernels out, and this CPU lacks AVX2",
            isa == Isa::Avx2,
        )
    } else if isa == Isa::Avx2 {
        ("this CPU lacks AVX2 or PCLMULQDQ", true)
    } else {
        (
            "this CPU lacks AVX-512F, AVX-512BW, BMI1 or PCLMULQDQ",
            false,
        )
    }
}

/// Every configuration worth checking: each available ISA, exact and (for `check`) fast.
fn gates(max_depth: usize) -> Vec<(String, Gate)> {
    let mut out = Vec::new();
    for isa in isas() {
        for exact in [true, false] {
            let gate = GateConfig::new()
                .max_depth(max_depth)
                .exact(exact)
                .max_isa(isa)
                .build();
            out.push((
                format!("{}/{}", isa.name(), if exact { "exact" } else { "fast" }),
                gate,
            ));
        }
    }
    out
}

fn exact_gates(max_depth: usize) -> Vec<(String, Gate)> {
    gates(max_depth)
        .into_iter()
        .filter(|(n, _)| n.ends_with("exact"))
        .collect()
}

fn feed_pieces(gate: &mut Gate, pieces: &[&[u8]]) -> Verdict {
    gate.reset();
    for p in pieces {
        gate.feed(p);
    }
    gate.verdict()
}

fn data_of(pieces: &[&[u8]]) -> Data {
    let mut d = Data::new();
    for p in pieces {
        d.push(bytes::Bytes::copy_from_slice(p));
    }
    d
}

/// The verdict serde_json implies for `bytes`, which is known to be a prefix of a valid text (or the
/// whole of one): `Complete` when it parses, `Incomplete` otherwise.
fn prefix_oracle(bytes: &[u8]) -> Verdict {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        Verdict::Complete
    } else {
        Verdict::Incomplete
    }
}

/// Checks a valid JSON text: every prefix, the whole, the whole with garbage, several chunkings.
fn check_valid_text(text: &[u8], every_prefix_whole: bool) {
    assert!(
        serde_json::from_slice::<Value>(text).is_ok(),
        "corpus text must be valid JSON: {}",
        String::from_utf8_lossy(text)
    );
    for (name, mut gate) in exact_gates(1024) {
        // Byte-at-a-time: the verdict after each byte is the verdict of that prefix.
        gate.reset();
        assert_eq!(gate.verdict(), Verdict::Incomplete, "{name}: empty");
        for k in 1..=text.len() {
            gate.feed(&text[k - 1..k]);
            let want = if k == text.len() {
                Verdict::Complete
            } else {
                prefix_oracle(&text[..k])
            };
            assert_eq!(
                gate.verdict(),
                want,
                "{name}: prefix {k} of {:?}",
                String::from_utf8_lossy(text)
            );
        }
        if every_prefix_whole {
            for k in 0..text.len() {
                assert_eq!(
                    verdict_of(&text[..k]),
                    prefix_oracle(&text[..k]),
                    "whole prefix {k}"
                );
            }
        }
        for garbage in [&b"x"[..], b"{\"jsonrpc\"", b" ,", b"\n]", b"\"", b"\xff"] {
            let mut t = text.to_vec();
            t.extend_from_slice(garbage);
            assert_eq!(
                feed_pieces(&mut gate, &[&t]),
                Verdict::Trailing,
                "{name}: + {garbage:?}"
            );
        }
        let mut padded = b" \r\n\t".to_vec();
        padded.extend_from_slice(text);
        padded.extend_from_slice(b"\n \t");
        assert_eq!(
            feed_pieces(&mut gate, &[&padded]),
            Verdict::Complete,
            "{name}: whitespace around"
        );
    }
    // Fast mode through `check` (falls back to the exact recogniser when not Complete).
    for (name, mut gate) in gates(1024) {
        for split in [1usize, 7, 63, 64, 65, 4096] {
            let pieces: Vec<&[u8]> = text.chunks(split).collect();
            assert_eq!(
                gate.check(&data_of(&pieces)),
                Verdict::Complete,
                "{name}: check, split {split}"
            );
        }
        let cut = &text[..text.len() - 1];
        assert_eq!(
            gate.check(&data_of(&[cut])),
            prefix_oracle(cut),
            "{name}: check, one byte short"
        );
    }
}

fn big_text(n: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < n {
        s.push_str(&format!(
            "Line {i}: the quick brown fox \"jumps\" over\tthe lazy dog \\ café ☃ 😀.\n"
        ));
        i += 1;
    }
    s
}

fn corpus() -> Vec<Vec<u8>> {
    let mut texts: Vec<String> = vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"rust"}}}"#.into(),
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":0.5,"total":1}}"#.into(),
        r#"[{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}]"#.into(),
        r#"{"a":[1,-2,3.5,-0.0e+10,1E-3,0,true,false,null,"",{},[],[[]],{"":{"":[]}}]}"#.into(),
        r#""\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\uD83D\uDE00\uffff""#.into(),
        "\"unicode: é ☃ 😀 \u{7f} \u{80} \u{7ff} \u{800} \u{ffff} \u{10000} \u{10ffff}\"".into(),
        "42".into(),
        "-0.5e-7".into(),
        "true".into(),
        "null".into(),
        "[ 1 , 2 ,\n 3 ]".into(),
        "{ \"k\" : \"v\" , \"k2\" :\t[ ] }".into(),
        format!("{}{}", "[".repeat(120), "]".repeat(120)),
        format!("{}1{}", "{\"a\":[".repeat(60), "]}".repeat(60)),
        "[\"\\\\\\\\\\\\\\\"\", \"\\\\\", \"\\\"\\\\\"]".into(),
    ];
    let result = serde_json::json!({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":big_text(3000)}],"isError":false}});
    texts.push(serde_json::to_string(&result).unwrap());
    texts.into_iter().map(String::into_bytes).collect()
}

#[test]
fn corpus_every_prefix() {
    for text in corpus() {
        check_valid_text(&text, text.len() < 2000);
    }
}

#[test]
fn big_tool_result_chunked() {
    let result = serde_json::json!({"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":big_text(300_000)}]}});
    let text = serde_json::to_vec(&result).unwrap();
    for (name, mut gate) in gates(1024) {
        for split in [1000usize, 16 * 1024, 64 * 1024 + 7] {
            let pieces: Vec<&[u8]> = text.chunks(split).collect();
            assert_eq!(
                gate.check(&data_of(&pieces)),
                Verdict::Complete,
                "{name}: split {split}"
            );
        }
        // Cut anywhere (sampled): never Complete.
        for k in (1..text.len()).step_by(4099) {
            assert_eq!(
                feed_pieces(&mut gate, &[&text[..k]]),
                Verdict::Incomplete,
                "{name}: cut at {k}"
            );
        }
    }
}

#[test]
fn seed_corruption_truncated_then_whole_is_never_complete() {
    let msgs = [
        serde_json::to_vec(&serde_json::json!({"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"He said \"{\\\"jsonrpc\\\"}\" and [left]."}]}})).unwrap(),
        serde_json::to_vec(&serde_json::json!({"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":big_text(400)}]}})).unwrap(),
        br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b","params":[1,2,{"c":"}]"}]}]"#.to_vec(),
    ];
    for msg in &msgs {
        for (name, mut gate) in gates(1024) {
            for k in 1..=msg.len() {
                let pieces = [&msg[..k], &msg[..]];
                if name.ends_with("exact") {
                    let v = feed_pieces(&mut gate, &pieces);
                    assert_ne!(v, Verdict::Complete, "{name}: cut at {k}");
                }
                let v = gate.check(&data_of(&pieces));
                assert_ne!(v, Verdict::Complete, "{name}: check, cut at {k}");
            }
        }
    }
}

#[test]
fn hand_picked_verdicts() {
    use Verdict::*;
    let cases: &[(&[u8], Verdict)] = &[
        (b"", Incomplete),
        (b"  \n", Incomplete),
        (b"4", Complete),
        (b"42 ", Complete),
        (b"-", Incomplete),
        (b"1.", Incomplete),
        (b"1e", Incomplete),
        (b"1e+", Incomplete),
        (b"01", Trailing),
        (b"[01]", Invalid),
        (b"tru", Incomplete),
        (b"trux", Invalid),
        (b"true1", Trailing),
        (b"{\"a\" 1}", Invalid),
        (b"[1,,2]", Invalid),
        (b"{]", Invalid),
        (b"]", Invalid),
        (b"[1]]", Trailing),
        (b"{}{}", Trailing),
        (b"\xef\xbb\xbf{}", Invalid),
        (b"[\"\x01\"]", Invalid),
        (b"[\"\xed\xa0\x80\"]", Invalid),
        (b"[\"\\ud800\"]", Complete),
        (b"[\"\xe2\x82", Incomplete),
        (b"[\"\xe2\x82\"", Invalid),
        (b"\"\\u12", Incomplete),
        (b"\"\\u12x", Invalid),
        (b"\"\\x\"", Invalid),
        (b"{\"a\":1,}", Invalid),
        (b"{\"a\":1,", Incomplete),
        (b"[,", Invalid),
        (b"[x", Invalid),
        (b"123\x00", Trailing),
    ];
    for (name, mut gate) in exact_gates(1024) {
        for &(input, want) in cases {
            assert_eq!(
                feed_pieces(&mut gate, &[input]),
                want,
                "{name}: {:?}",
                String::from_utf8_lossy(input)
            );
            for k in 0..=input.len() {
                let v = feed_pieces(&mut gate, &[&input[..k], &input[k..]]);
                assert_eq!(
                    v,
                    want,
                    "{name}: split {k} of {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            let v = gate.check(&data_of(&[input]));
            assert_eq!(v, want);
        }
    }
    let mut fast = GateConfig::new().exact(false).build();
    fast.feed(b"{\"a\" 1}");
    assert_eq!(fast.verdict(), Complete, "fast feed says balanced");
    // `check` re-derives only verdicts other than Complete: balanced stays Complete in fast mode.
    assert_eq!(fast.check(&Data::from("{\"a\" 1}")), Complete);
    assert_eq!(
        fast.check(&Data::from("[\"a\" 1")),
        Invalid,
        "check validates what is not Complete"
    );
    assert_eq!(fast.check(&Data::from("[\"x\"]]")), Trailing);
}

#[test]
fn reasons() {
    let mut g = Gate::new();
    g.feed(b"{\"a\":[1]}");
    assert_eq!(g.invalid_reason(), None);
    g.reset();
    g.feed(b"{\"a\":[1}");
    assert_eq!(
        g.invalid_reason(),
        Some(&InvalidReason::Mismatched { offset: 7 })
    );
    g.reset();
    g.feed(b"[\"\xff\"]");
    assert_eq!(g.invalid_reason(), Some(&InvalidReason::Utf8 { offset: 2 }));
    g.reset();
    g.feed(b"[\"a\nb\"]");
    assert_eq!(
        g.invalid_reason(),
        Some(&InvalidReason::ControlCharacter { offset: 3 })
    );
    assert_eq!(
        g.invalid_reason().unwrap().to_string(),
        "raw control character in a string at byte 3"
    );
    for (name, mut gate) in gates(1024) {
        let v = feed_pieces(&mut gate, &[b"[[{\"x\":[]]"]);
        assert_eq!(v, Verdict::Invalid, "{name}");
        assert_eq!(
            gate.invalid_reason(),
            Some(&InvalidReason::Mismatched { offset: 9 }),
            "{name}"
        );
    }
}

/// An invalid UTF-8 sequence is reported at its first byte however the input is cut (the fuzz finding
/// `gate_differential/utf8-offset-cut`: `"\xd1\xd1` said 1 whole and 2 when cut after the first
/// `\xd1`).
#[test]
fn utf8_error_offsets_do_not_depend_on_the_chunking() {
    let cases: &[(&[u8], u64)] = &[
        (b"\"\xd1\xd1", 1),
        (b"[\"ab\xe2\x82\x41\"]", 4),
        (b"[\"ab\xe2\x82\"]", 4),
        (b"[\"\xf4\x90\x80\x80\"]", 2),
        (b"[\"\xf0\x9f\x98\xff\"]", 2),
        (b"[\"\xed\xa0\x80\"]", 2),
        (b"[\"\xc0\xaf\"]", 2),
        (b"[\"ok\x80\"]", 4),
    ];
    for (name, mut gate) in exact_gates(1024) {
        for &(input, offset) in cases {
            let want = Some(InvalidReason::Utf8 { offset });
            let mut splits: Vec<Vec<&[u8]>> = vec![vec![input], input.chunks(1).collect()];
            for k in 0..=input.len() {
                splits.push(vec![&input[..k], &input[k..]]);
            }
            for pieces in &splits {
                assert_eq!(
                    feed_pieces(&mut gate, pieces),
                    Verdict::Invalid,
                    "{name} {pieces:?}"
                );
                assert_eq!(gate.invalid_reason(), want.as_ref(), "{name} {pieces:?}");
            }
        }
    }
}

#[test]
fn depth_limit() {
    let deep = vec![b'['; 1_000_000];
    for (name, mut gate) in gates(1024) {
        assert_eq!(feed_pieces(&mut gate, &[&deep]), Verdict::Invalid, "{name}");
        assert_eq!(
            gate.invalid_reason(),
            Some(&InvalidReason::TooDeep {
                limit: 1024,
                offset: 1024
            }),
            "{name}"
        );
        let ok = format!("{}{}", "[".repeat(1024), "]".repeat(1024));
        assert_eq!(
            gate.check(&Data::from(bytes::Bytes::from(ok))),
            Verdict::Complete,
            "{name}"
        );
    }
    for (name, mut gate) in gates(2_000_000) {
        assert_eq!(
            feed_pieces(&mut gate, &[&deep]),
            Verdict::Incomplete,
            "{name}"
        );
        let mut full = deep.clone();
        full.extend(std::iter::repeat_n(b']', 1_000_000));
        assert_eq!(
            feed_pieces(&mut gate, &[&full]),
            Verdict::Complete,
            "{name}"
        );
    }
    let mut g = GateConfig::new().max_depth(0).build();
    g.feed(b"[]");
    assert_eq!(g.verdict(), Verdict::Invalid);
    g.reset();
    g.feed(b"\"scalars need no depth\"");
    assert_eq!(g.verdict(), Verdict::Complete);
}

// ---- JSONTestSuite-derived conformance data ----

fn b64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 byte {c}"),
        }
    };
    let mut out = Vec::new();
    for quad in s.trim_end_matches('=').as_bytes().chunks(4) {
        let mut acc = 0u32;
        for (k, &c) in quad.iter().enumerate() {
            acc |= val(c) << (18 - 6 * k);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..quad.len()]);
    }
    out
}

#[test]
fn json_test_suite_prefixes() {
    // Part of the repository (see tests/data/README.md): a missing file is a failure, never a skip.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/json-test-suite-prefixes.jsonl"
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the JSONTestSuite conformance data {path} must exist: {e}"));
    assert_eq!(b64("WzEyMy40NTZlLTc4OV0="), b"[123.456e-789]");
    let (mut ran, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let ambiguous = case
            .get("ambiguous")
            .is_some_and(|a| !a.is_null() && a != &Value::Array(vec![]));
        if ambiguous {
            skipped += 1;
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let input = b64(case["input_b64"].as_str().unwrap());
        let want = match case["verdict"].as_str().unwrap() {
            "incomplete" => Verdict::Incomplete,
            "complete" => Verdict::Complete,
            "trailing" => Verdict::Trailing,
            "invalid" => Verdict::Invalid,
            v => panic!("unknown verdict {v}"),
        };
        let needs_parser = case["needs_parser"].as_bool().unwrap();
        // The deep-nesting cases are about prefixes of 100 000 levels: judge them without the default limit.
        let deep = case["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "deep-nesting");
        let max_depth = if deep { 1 << 20 } else { 1024 };
        for (gname, mut gate) in gates(max_depth) {
            let fast = gname.ends_with("fast");
            let mut got = vec![(
                "whole",
                if fast {
                    gate.check(&data_of(&[&input]))
                } else {
                    feed_pieces(&mut gate, &[&input])
                },
            )];
            if !fast {
                let bytewise: Vec<&[u8]> = input.chunks(1).collect();
                got.push(("bytewise", feed_pieces(&mut gate, &bytewise)));
                if input.len() < 4096 {
                    for k in 0..=input.len() {
                        let v = feed_pieces(&mut gate, &[&input[..k], &input[k..]]);
                        if v != want {
                            got.push(("split", v));
                            break;
                        }
                    }
                }
            } else if needs_parser {
                // Bracket balancing alone cannot get these right; `check` only re-derives non-Complete.
                continue;
            }
            for (how, v) in got {
                if v != want {
                    failures.push(format!("{name} [{gname} {how}]: got {v}, want {want}"));
                }
            }
        }
        ran += 1;
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("json-test-suite-prefixes: {ran} cases passed, {skipped} ambiguous skipped");
    assert!(ran > 1000);
}

// ---- property tests ----

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "(\\PC|[\"\\\\\n\t\u{1}\u{7f}é😀{}\\[\\]:,]){0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec(("[a-z\"\\\\{}]{0,6}", inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn generated_values_every_prefix(v in arb_json(), pretty in any::<bool>(), seed in any::<u64>()) {
        let text = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
        let mut gate = Gate::new();
        for k in 1..=text.len() {
            gate.feed(&text[k - 1..k]);
            let want = if k == text.len() { Verdict::Complete } else { prefix_oracle(&text[..k]) };
            prop_assert_eq!(gate.verdict(), want, "prefix {}", k);
        }
        // Arbitrary chunking, every engine.
        let mut cuts = vec![];
        let mut s = seed;
        let mut at = 0;
        while at < text.len() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let step = 1 + (s >> 33) as usize % 97;
            cuts.push(&text[at..(at + step).min(text.len())]);
            at += step;
        }
        for (name, mut g) in gates(1024) {
            prop_assert_eq!(g.check(&data_of(&cuts)), Verdict::Complete, "{}", name);
            let mut t = text.clone();
            t.extend_from_slice(b"{\"jsonrpc\"");
            prop_assert_eq!(feed_pieces(&mut g, &[&t]), Verdict::Trailing, "{}", name);
        }
    }

    /// Structure-dense JSON (what the exact recogniser's structural walker takes) with one random edit
    /// at a random place: every kernel gives the portable verdict and reason, whole and in random
    /// pieces, and an unedited text is Complete.
    #[test]
    fn dense_json_kernels_match_portable(
        v in arb_json(),
        wrap in 0usize..4,
        edit in prop_oneof![
            Just(&b""[..]), Just(&b":"[..]), Just(&b","[..]), Just(&b"]"[..]), Just(&b"}"[..]),
            Just(&b"\""[..]), Just(&b"\\"[..]), Just(&b"1"[..]), Just(&b"-"[..]), Just(&b"e"[..]),
            Just(&b"."[..]), Just(&b" "[..]), Just(&b"t"[..]), Just(&b"\xc3"[..]), Just(&b"\x01"[..]),
            Just(&b"[{"[..]),
        ],
        at_seed in any::<u64>(),
        remove in any::<bool>(),
        split_seed in any::<u64>(),
    ) {
        let inner = serde_json::to_vec(&v).unwrap();
        // Repeat the value in an array so that whole blocks of structure reach the walker.
        let mut text = b"[".to_vec();
        for k in 0..=wrap * 8 {
            if k > 0 {
                text.push(b',');
            }
            text.extend_from_slice(&inner);
        }
        text.push(b']');
        let unedited = edit.is_empty() && !remove;
        let at = (at_seed % (text.len() as u64 + 1)) as usize;
        if remove && at < text.len() {
            text.remove(at);
        }
        text.splice(at..at, edit.iter().copied());
        let mut reference = GateConfig::new().max_isa(Isa::Portable).build();
        let whole = feed_pieces(&mut reference, &[&text]);
        let whole_reason = reference.invalid_reason().cloned();
        if unedited {
            prop_assert_eq!(whole, Verdict::Complete);
        }
        let mut s = split_seed;
        let mut cuts: Vec<&[u8]> = vec![];
        let mut from = 0;
        while from < text.len() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let step = 1 + (s >> 33) as usize % 300;
            cuts.push(&text[from..(from + step).min(text.len())]);
            from += step;
        }
        for isa in isas().into_iter().filter(|&i| i != Isa::Portable) {
            let mut g = GateConfig::new().max_isa(isa).build();
            prop_assert_eq!(g.isa(), isa, "an available ISA as the cap runs exactly its kernels");
            prop_assert_eq!(feed_pieces(&mut g, &[&text]), whole, "{:?} whole", isa);
            prop_assert_eq!(g.invalid_reason(), whole_reason.as_ref(), "{:?} whole", isa);
            reference.reset();
            g.reset();
            for c in &cuts {
                reference.feed(c);
                g.feed(c);
                prop_assert_eq!(g.verdict(), reference.verdict(), "{:?} pieces", isa);
                prop_assert_eq!(g.invalid_reason(), reference.invalid_reason(), "{:?} pieces", isa);
            }
        }
    }

    #[test]
    fn kernels_match_portable(
        tokens in prop::collection::vec(prop_oneof![
            8 => Just(&b"\""[..]), 4 => Just(&b"\\"[..]), 4 => Just(&b"{"[..]), 4 => Just(&b"["[..]),
            4 => Just(&b"}"[..]), 4 => Just(&b"]"[..]), 2 => Just(&b":"[..]), 2 => Just(&b","[..]),
            2 => Just(&b" "[..]), 2 => Just(&b"a"[..]), 2 => Just(&b"\\\\"[..]), 2 => Just(&b"\\\""[..]),
            2 => Just(&b"\xc3\xa9"[..]), 1 => Just(&b"\x01"[..]), 1 => Just(&b"\xff"[..]),
            1 => Just(&b"0123456789012345678901234567890123456789012345678901234567890123456789"[..]),
        ], 0..120),
        align in 0usize..64,
        open in prop_oneof![Just(&b"["[..]), Just(&b"{"[..]), Just(&b"[\""[..]), Just(&b""[..])],
        split_seed in any::<u64>(),
    ) {
        let mut buf = vec![b' '; align];
        buf.extend_from_slice(open);
        for t in &tokens { buf.extend_from_slice(t); }
        let input = &buf[align..];
        let mut s = split_seed;
        let mut cuts: Vec<&[u8]> = vec![];
        let mut at = 0;
        while at < input.len() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let step = 1 + (s >> 33) as usize % 130;
            cuts.push(&input[at..(at + step).min(input.len())]);
            at += step;
        }
        for exact in [true, false] {
            let mut reference = GateConfig::new().max_depth(16).exact(exact).max_isa(Isa::Portable).build();
            // Each SIMD kernel against the portable code (not the portable code against itself).
            for isa in isas().into_iter().filter(|&i| i != Isa::Portable) {
                let mut g = GateConfig::new().max_depth(16).exact(exact).max_isa(isa).build();
                reference.reset();
                // After every piece, the same verdict and reason.
                for c in &cuts {
                    reference.feed(c);
                    g.feed(c);
                    prop_assert_eq!(g.verdict(), reference.verdict(), "{:?} exact={}", isa, exact);
                    prop_assert_eq!(g.invalid_reason(), reference.invalid_reason(), "{:?} exact={}", isa, exact);
                }
                // Whole input, and every two-piece split: the same verdict and reason (offsets do not
                // depend on the chunking).
                let whole = feed_pieces(&mut reference, &[input]);
                let whole_reason = reference.invalid_reason().cloned();
                prop_assert_eq!(feed_pieces(&mut g, &[input]), whole);
                prop_assert_eq!(g.invalid_reason(), whole_reason.as_ref());
                for k in 0..=input.len() {
                    prop_assert_eq!(feed_pieces(&mut g, &[&input[..k], &input[k..]]), whole, "{:?} split {}", isa, k);
                    prop_assert_eq!(g.invalid_reason(), whole_reason.as_ref(), "{:?} split {}", isa, k);
                    prop_assert_eq!(feed_pieces(&mut reference, &[&input[..k], &input[k..]]), whole, "portable split {}", k);
                    prop_assert_eq!(reference.invalid_reason(), whole_reason.as_ref(), "portable split {}", k);
                }
            }
        }
    }
}

// ---- the block grammar check against the byte automaton ----

/// A small deterministic generator (the test draws only its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n
    }

    fn pick<'a>(&mut self, from: &[&'a [u8]]) -> &'a [u8] {
        from[self.below(from.len())]
    }
}

/// Whitespace between tokens: usually none, as servers send it.
fn gap(r: &mut Rng, out: &mut Vec<u8>) {
    if r.below(4) == 0 {
        out.extend_from_slice(r.pick(&[b" ", b"\n", b"  ", b"\r\n\t", b" \n  "]));
    }
}

/// MCP-shaped JSON the block check takes whole: objects and arrays of plain strings, numbers
/// (signs, zeros, fractions, a few exponents) and literals, with whitespace here and there.
fn plain_json(r: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    let kind = if depth >= 6 {
        2 + r.below(3)
    } else {
        r.below(5)
    };
    match kind {
        0 | 1 => {
            let (open, close) = if kind == 0 {
                (b'{', b'}')
            } else {
                (b'[', b']')
            };
            out.push(open);
            gap(r, out);
            for k in 0..r.below(7) {
                if k > 0 {
                    gap(r, out);
                    out.push(b',');
                    gap(r, out);
                }
                if kind == 0 {
                    out.extend_from_slice(r.pick(&[
                        b"\"id\"",
                        b"\"v\"",
                        b"\"type\"",
                        b"\"\"",
                        b"\"isError\"",
                    ]));
                    gap(r, out);
                    out.push(b':');
                    gap(r, out);
                }
                plain_json(r, depth + 1, out);
            }
            gap(r, out);
            out.push(close);
        }
        2 => out.extend_from_slice(r.pick(&[
            b"0",
            b"-0",
            b"7",
            b"12345",
            b"-42",
            b"3.25",
            b"0.5",
            b"-0.125",
            b"10.0",
            b"1e5",
            b"2E-3",
            b"-1.5e+10",
            b"99999999999999999999",
        ])),
        3 if r.below(64) == 0 => out.extend_from_slice(r.pick(&[
            b"1.2.3", b"01", b"-", b"1.", b".5", b"-01", b"1e", b"1e+", b"--1", b"1-2", b"0x1",
            b"1.5e3.2", b"-a", b"+1", b"tru", b"nul", b"falsey", b"truex", b"nulll", b"True",
        ])),
        3 => out.extend_from_slice(r.pick(&[b"true", b"false", b"null"])),
        _ => {
            out.push(b'"');
            for _ in 0..r.below(24) {
                out.extend_from_slice(
                    r.pick(&[b"a", b"text ", b"{", b"]", b":", b",", b"x7", b"-1"]),
                );
            }
            if r.below(16) == 0 {
                out.extend_from_slice(r.pick(&[b"\\n", b"\\\"", b"\xc3\xa9"]));
            }
            out.push(b'"');
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The exact gate's block grammar check (whole 64-byte blocks judged with mask arithmetic)
    /// against the portable byte automaton, and the whole-text verdict against serde_json: plain
    /// MCP-shaped JSON, repeated so that many blocks go through the check, with up to three random
    /// one-byte edits (insert, delete, replace) from the bytes the grammar turns on. Whole and in
    /// random pieces, every kernel gives the portable verdict and reason after every piece.
    #[test]
    fn block_grammar_matches_portable(seed in any::<u64>(), edits in 0usize..4, align in 0usize..64) {
        let mut r = Rng(seed);
        let mut text = vec![b' '; align];
        text.push(b'[');
        let size = align + 200 + r.below(800);
        while text.len() < size {
            if text.len() > align + 1 {
                text.push(b',');
            }
            plain_json(&mut r, 1, &mut text);
        }
        text.push(b']');
        for _ in 0..edits {
            let at = r.below(text.len() + 1);
            let byte = r.pick(&[b"{", b"}", b"[", b"]", b":", b",", b"\"", b"0", b"5", b"-", b".", b"e", b"t", b" ", b"\\"])[0];
            match r.below(3) {
                0 => text.insert(at, byte),
                1 if at < text.len() => { text.remove(at); }
                _ if at < text.len() => text[at] = byte,
                _ => {}
            }
        }
        // A tight depth limit now and then, so that blocks go over it.
        let max_depth = if r.below(4) == 0 { 2 + r.below(6) } else { 128 };
        let depth_ok = max_depth == 128 && text.iter().filter(|&&b| b == b'[' || b == b'{').count() < 120;
        let mut reference = GateConfig::new().exact(true).max_depth(max_depth).max_isa(Isa::Portable).build();
        let whole = feed_pieces(&mut reference, &[&text]);
        let whole_reason = reference.invalid_reason().cloned();
        if depth_ok {
            // serde_json skips the UTF-8 check of strings it ignores: check the text first.
            let parses = std::str::from_utf8(&text).is_ok()
                && serde_json::from_slice::<serde::de::IgnoredAny>(&text).is_ok();
            prop_assert_eq!(whole == Verdict::Complete, parses, "serde_json disagrees: {:?}", String::from_utf8_lossy(&text));
        }
        let mut cuts: Vec<&[u8]> = vec![];
        let mut from = 0;
        while from < text.len() {
            let step = 1 + r.below(200);
            cuts.push(&text[from..(from + step).min(text.len())]);
            from += step;
        }
        for isa in isas().into_iter().filter(|&i| i != Isa::Portable) {
            let mut g = GateConfig::new().exact(true).max_depth(max_depth).max_isa(isa).build();
            prop_assert_eq!(feed_pieces(&mut g, &[&text]), whole, "{:?} whole", isa);
            prop_assert_eq!(g.invalid_reason(), whole_reason.as_ref(), "{:?} whole", isa);
            reference.reset();
            g.reset();
            for (k, c) in cuts.iter().enumerate() {
                reference.feed(c);
                g.feed(c);
                prop_assert_eq!(g.verdict(), reference.verdict(), "{:?} piece {}", isa, k);
                prop_assert_eq!(g.invalid_reason(), reference.invalid_reason(), "{:?} piece {}", isa, k);
            }
        }
    }
}
