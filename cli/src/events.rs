//! `ssegate events`: decode raw SSE bytes and print one JSON line per dispatched event.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use ssegate::sse::DecoderConfig;

use crate::input::{SplitArgs, chunks, read_input};

/// Arguments of `ssegate events`.
#[derive(clap::Args, Debug)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    split: SplitArgs,
    /// Longest line in bytes (default 64 MiB).
    #[arg(long, value_name = "BYTES")]
    max_line: Option<usize>,
    /// Most data bytes in one event (default 64 MiB).
    #[arg(long, value_name = "BYTES")]
    max_event: Option<usize>,
    /// Longest id / event / retry value in bytes (default 4 KiB).
    #[arg(long, value_name = "BYTES")]
    max_field: Option<usize>,
    /// Most wire bytes of one open block: comments, unknown fields and line ends included
    /// (default 80 MiB).
    #[arg(long, value_name = "BYTES")]
    max_block: Option<usize>,
    /// Raw SSE bytes (as `curl -N` saves them); stdin when absent or `-`.
    file: Option<PathBuf>,
}

/// Prints `{"event","data","id"}` per event, then `{"last_event_id","retry"}`. Decode errors go to
/// stderr and make the exit status 1; decoding carries on after each.
pub(crate) fn run(args: &EventsArgs) -> ExitCode {
    let input = match read_input(args.file.as_ref()) {
        Ok(input) => Bytes::from(input),
        Err(e) => {
            eprintln!("ssegate events: cannot read input: {e}");
            return ExitCode::from(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut config = DecoderConfig::default();
    if let Some(n) = args.max_line {
        config.max_line(n);
    }
    if let Some(n) = args.max_event {
        config.max_event(n);
    }
    if let Some(n) = args.max_field {
        config.max_field(n);
    }
    if let Some(n) = args.max_block {
        config.max_block(n);
    }
    let mut decoder = config.build();
    let mut errors = 0u64;
    let result = (|| -> std::io::Result<()> {
        for chunk in chunks(input, &args.split) {
            decoder.feed(chunk);
            while let Some(r) = decoder.next_event() {
                match r {
                    Ok(ev) => writeln!(
                        out,
                        "{{\"event\":{},\"data\":{},\"id\":{}}}",
                        json_str(ev.event_type()),
                        json_str(&ev.data.contiguous()),
                        json_str(&ev.last_event_id)
                    )?,
                    Err(e) => {
                        errors += 1;
                        eprintln!("ssegate events: decode error: {e}");
                    }
                }
            }
        }
        if let Some(p) = decoder.finish() {
            eprintln!(
                "ssegate events: input ended inside an event ({} bytes, {} data bytes{}); not dispatched",
                p.bytes,
                p.data_len,
                p.id.map(|id| format!(", id {}", json_str(&id)))
                    .unwrap_or_default()
            );
        }
        let retry = decoder
            .retry()
            .map_or_else(|| "null".to_owned(), |ms| ms.to_string());
        writeln!(
            out,
            "{{\"last_event_id\":{},\"retry\":{retry}}}",
            json_str(decoder.last_event_id())
        )?;
        out.flush()
    })();
    if let Err(e) = result {
        eprintln!("ssegate events: cannot write output: {e}");
        return ExitCode::from(2);
    }
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A JSON string of `bytes` decoded as UTF-8 with U+FFFD replacement.
fn json_str(bytes: &[u8]) -> String {
    serde_json::to_string(&String::from_utf8_lossy(bytes)).expect("a string always serialises")
}
