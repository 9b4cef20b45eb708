//! Data-driven WHATWG conformance for `sse::Decoder`: every case in `tests/sse_conformance/*.case`
//! (format in `tests/sse_conformance/README.txt`) under the whole input, 1-byte chunks, every
//! 2-way split and 200 seeded random splits.

use std::path::Path;

use bytes::Bytes;
use ssegate::sse::Decoder;

#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    events: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    last: Vec<u8>,
    retry: Option<u64>,
    partial: Option<(u64, u64, Option<Vec<u8>>)>,
}

#[derive(Debug)]
struct Case {
    name: String,
    input: Vec<u8>,
    expected: Outcome,
}

/// Splits a line into tokens: quoted strings (escapes decoded) and bare words.
fn tokens(line: &str, file: &str, lineno: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let bad = |why: &str| -> ! { panic!("{file}:{lineno}: {why}: {line}") };
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut s = Vec::new();
            loop {
                match chars.next() {
                    None => bad("unterminated string"),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('r') => s.push(b'\r'),
                        Some('n') => s.push(b'\n'),
                        Some('t') => s.push(b'\t'),
                        Some('0') => s.push(0),
                        Some('\\') => s.push(b'\\'),
                        Some('"') => s.push(b'"'),
                        Some('x') => {
                            let hex: String = chars.by_ref().take(2).collect();
                            s.push(
                                u8::from_str_radix(&hex, 16)
                                    .unwrap_or_else(|_| bad("bad \\x escape")),
                            );
                        }
                        _ => bad("unknown escape"),
                    },
                    Some(c) => s.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            out.push(s);
        } else {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                w.push(c);
                chars.next();
            }
            out.push(w.into_bytes());
        }
    }
    out
}

fn number(t: &[u8]) -> u64 {
    std::str::from_utf8(t).unwrap().parse().unwrap()
}

fn parse(file: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(file).unwrap();
    let fname = file.display().to_string();
    let mut cases: Vec<Case> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix("== ") {
            cases.push(Case {
                name: format!("{fname}: {name}"),
                input: Vec::new(),
                expected: Outcome::default(),
            });
            continue;
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("{fname}:{}: line before the first case", i + 1));
        let t = tokens(line, &fname, i + 1);
        let e = &mut case.expected;
        match (t[0].as_slice(), &t[1..]) {
            (b"in", [s]) => case.input.extend_from_slice(s),
            (b"ev", [ty, data, id]) => e.events.push((ty.clone(), data.clone(), id.clone())),
            (b"last", [id]) => e.last = id.clone(),
            (b"retry", [ms]) => e.retry = (ms.as_slice() != b"-").then(|| number(ms)),
            (b"partial", [bytes, data_len, id]) => {
                e.partial = Some((
                    number(bytes),
                    number(data_len),
                    (id.as_slice() != b"-").then(|| id.clone()),
                ))
            }
            _ => panic!("{fname}:{}: cannot parse: {line}", i + 1),
        }
    }
    cases
}

fn run(input: &[u8], cuts: &[usize]) -> Outcome {
    let whole = Bytes::copy_from_slice(input);
    let mut d = Decoder::new();
    let mut out = Outcome::default();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        d.feed(whole.slice(at..cut));
        at = cut;
        while let Some(r) = d.next_event() {
            let ev = r.unwrap();
            let mut data = Vec::new();
            ev.data.copy_to(&mut data);
            out.events
                .push((ev.event_type().to_vec(), data, ev.last_event_id.to_vec()));
        }
    }
    out.partial = d
        .finish()
        .map(|p| (p.bytes, p.data_len, p.id.map(|i| i.to_vec())));
    out.last = d.last_event_id().to_vec();
    out.retry = d.retry();
    out
}

/// SplitMix64, for reproducible random splits.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn conformance() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sse_conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    files.sort();
    let mut count = 0;
    for file in files {
        for case in parse(&file) {
            count += 1;
            let n = case.input.len();
            assert_eq!(
                run(&case.input, &[]),
                case.expected,
                "{} (whole input)",
                case.name
            );
            let bytewise: Vec<usize> = (1..n).collect();
            assert_eq!(
                run(&case.input, &bytewise),
                case.expected,
                "{} (1-byte chunks)",
                case.name
            );
            for cut in 0..=n {
                assert_eq!(
                    run(&case.input, &[cut]),
                    case.expected,
                    "{} (split at {cut})",
                    case.name
                );
            }
            let mut rng = count as u64;
            for _ in 0..200 {
                let mut cuts: Vec<usize> = (0..next(&mut rng) % 8)
                    .map(|_| (next(&mut rng) % (n as u64 + 1)) as usize)
                    .collect();
                cuts.sort_unstable();
                assert_eq!(
                    run(&case.input, &cuts),
                    case.expected,
                    "{} (cuts {cuts:?})",
                    case.name
                );
            }
        }
    }
    assert!(count >= 70, "only {count} conformance cases found");
}
