//! The SSE decoder's obviously-right oracle: the whole input at once, split into lines naively,
//! the WHATWG algorithm applied literally with owned buffers. Slow and copying on purpose.

/// What a whole input decodes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// (type, data, last event id) of each dispatched event.
    pub events: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// The last event id when the input ended.
    pub last_event_id: Vec<u8>,
    /// The last valid `retry` value.
    pub retry: Option<u64>,
    /// (bytes, data_len, id) of the block open at the end.
    pub partial: Option<(u64, u64, Option<Vec<u8>>)>,
}

/// Decodes a whole input.
pub fn decode(input: &[u8]) -> Outcome {
    let input = input.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(input);

    // Lines with their terminator lengths; the unterminated tail separately.
    let mut lines: Vec<(&[u8], usize)> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\n' => {
                lines.push((&input[start..i], 1));
                i += 1;
                start = i;
            }
            b'\r' => {
                let term = if input.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                lines.push((&input[start..i], term));
                i += term;
                start = i;
            }
            _ => i += 1,
        }
    }
    let tail = &input[start..];

    let mut out = Outcome {
        events: Vec::new(),
        last_event_id: Vec::new(),
        retry: None,
        partial: None,
    };
    let mut data: Vec<u8> = Vec::new();
    let mut event_type: Vec<u8> = Vec::new();
    let mut id_buffer: Vec<u8> = Vec::new();
    let mut block_bytes: u64 = 0;
    let mut block_id: Option<Vec<u8>> = None;

    for (line, term) in lines {
        if line.is_empty() {
            // Dispatch.
            out.last_event_id = id_buffer.clone();
            if !data.is_empty() {
                if data.last() == Some(&b'\n') {
                    data.pop();
                }
                let ty = if event_type.is_empty() {
                    b"message".to_vec()
                } else {
                    event_type.clone()
                };
                out.events
                    .push((ty, data.clone(), out.last_event_id.clone()));
            }
            data.clear();
            event_type.clear();
            block_bytes = 0;
            block_id = None;
            continue;
        }
        block_bytes += (line.len() + term) as u64;
        if line[0] == b':' {
            continue;
        }
        let (name, value) = split_field(line);
        match name {
            b"event" => event_type = value.to_vec(),
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"id" if !value.contains(&0) => {
                id_buffer = value.to_vec();
                block_id = Some(value.to_vec());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let v = value.iter().fold(0u64, |acc, &c| {
                    acc.saturating_mul(10).saturating_add(u64::from(c - b'0'))
                });
                out.retry = Some(v);
            }
            _ => {}
        }
    }

    if block_bytes > 0 || !tail.is_empty() {
        // The decoder streams an unterminated `data:` line's value (and its LF join) as it arrives.
        let data_len = match tail.iter().position(|&c| c == b':') {
            Some(colon) if &tail[..colon] == b"data" => {
                let (_, value) = split_field(tail);
                (data.len() + value.len()) as u64
            }
            _ => data.len().saturating_sub(1) as u64,
        };
        out.partial = Some((block_bytes + tail.len() as u64, data_len, block_id));
    }
    out
}

fn split_field(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&c| c == b':') {
        Some(colon) => {
            let value = &line[colon + 1..];
            (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
        }
        None => (line, &[][..]),
    }
}
