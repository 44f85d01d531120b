//! The bridge's line protocol: how herald splits Hermes's stdout into lines, and what it
//! answers to lines it cannot use.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use herald_agents::bridge::fuzzing::{read_line, refusal, Read};
use herald_agents::bridge::MAX_LINE;
use serde_json::Value;
use tokio::io::BufReader;

/// The first byte picks a line cap and a read buffer size, so that over-long lines and
/// lines spanning several reads are common; the rest is what Hermes wrote.
pub fn bridge_line(data: &[u8]) {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let max = usize::from(knobs & 0x3f);
    let capacity = usize::from(knobs >> 6) * 5 + 1;
    assert_eq!(split(input, max, capacity), expected(input, max));

    for read in split(input, MAX_LINE, 8192) {
        if let Read::Line(line) = read {
            check_refusal(&line);
        }
    }
}

/// Every read of `input` by the bridge's reader, up to and including `End`.
fn split(input: &[u8], max: usize, capacity: usize) -> Vec<Read> {
    let mut reader = BufReader::with_capacity(capacity, input);
    let mut reads = Vec::new();
    loop {
        let read = match ready(read_line(&mut reader, max)) {
            Ok(read) => read,
            Err(e) => panic!("reading from memory failed: {e}"),
        };
        let end = read == Read::End;
        reads.push(read);
        if end {
            return reads;
        }
    }
}

/// The same, read plainly: lines end at `\n`, a last line needs none, and a line over
/// `max` bytes is reported as too long.
fn expected(input: &[u8], max: usize) -> Vec<Read> {
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    // Text ending in `\n` (or empty text) has no line after that `\n`.
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    let mut reads: Vec<Read> = pieces
        .into_iter()
        .map(|p| {
            if p.len() <= max {
                Read::Line(p.to_vec())
            } else {
                Read::TooLong
            }
        })
        .collect();
    reads.push(Read::End);
    reads
}

/// Polls a future that cannot wait: reading from memory is always ready.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a read from memory waited"),
    }
}

/// A request herald cannot decode is answered at once, by its id, as `bad_request`.
fn check_refusal(line: &[u8]) {
    let Some(answer) = refusal(line) else {
        return;
    };
    assert!(
        answer.len() <= 2 * line.len() + 2048,
        "answer of {} bytes",
        answer.len()
    );
    let answer: Value = serde_json::from_str(&answer)
        .unwrap_or_else(|e| panic!("answer is not JSON: {e}: {answer}"));
    assert_eq!(answer["type"], "response");
    assert_eq!(answer["ok"], false);
    assert_eq!(answer["error"]["kind"], "bad_request");
    let sent: Option<Value> = serde_json::from_slice(line).ok();
    if let Some(id) = sent.as_ref().and_then(|v| v.get("id")) {
        assert_eq!(&answer["id"], id);
    }
}
