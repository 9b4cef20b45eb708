//! Drives a ResumableStream over plain TCP byte streams, no HTTP and no ssegate transport: a
//! loopback "server" cuts the first connection inside the result and replays it whole when the
//! client reconnects with `Last-Event-ID`. Run: `cargo run --example resume_over_bytes`.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use bytes::Bytes;
use ssegate::message::RpcId;
use ssegate::resume::{Answer, EndCause, Output, ReconnectResponse, ResumableStream};

const RESULT: &str =
    "id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"hello\"}}\n\n";

fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let mut conn = conn.unwrap();
            if n == 0 {
                // First connection: a priming event, then the result cut in its middle.
                let _ = write!(conn, "retry: 100\nid: 1\ndata:\n\n{}", &RESULT[..30]);
            } else {
                let mut last_event_id = String::new();
                BufReader::new(&conn).read_line(&mut last_event_id).unwrap();
                eprintln!("server: resume after {:?}", last_event_id.trim());
                let _ = conn.write_all(RESULT.as_bytes()); // the interrupted event, whole
            }
        }
    });

    let mut stream = ResumableStream::new();
    stream.expect_response(RpcId::Number(1));
    let mut conn = Some(TcpStream::connect(addr)?);
    let mut buf = vec![0; 16 << 10];
    loop {
        while let Some(output) = stream.poll() {
            match output {
                Output::Deliver(d) => println!(
                    "delivered: {}",
                    String::from_utf8_lossy(&d.message.to_bytes())
                ),
                Output::Disconnected(r) => {
                    println!("cut; resume from {:?} in {:?}", r.last_event_id, r.delay)
                }
                Output::Reconnect(r) => {
                    let mut c = TcpStream::connect(addr)?;
                    c.write_all(&r.last_event_id.unwrap_or_default())?;
                    c.write_all(b"\n")?;
                    let answer = stream
                        .reconnect_response(&ReconnectResponse::event_stream(), Instant::now());
                    assert_eq!(answer, Answer::Read, "a 200 event stream is read");
                    conn = Some(c);
                }
                Output::Finished => return Ok(()),
                Output::Failed(f) => panic!("refused: {f}"),
                _ => {}
            }
        }
        match (&mut conn, stream.poll_timeout()) {
            (Some(c), _) if stream.is_open() => match c.read(&mut buf)? {
                0 => {
                    conn = None;
                    stream.connection_ended(EndCause::Eof, Instant::now())
                }
                n => stream.feed(Bytes::copy_from_slice(&buf[..n]), Instant::now()),
            },
            (_, Some(at)) => {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                stream.handle_timeout(Instant::now())
            }
            _ => unreachable!("an open connection or a deadline"),
        }
    }
}
