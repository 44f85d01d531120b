//! Reading newline-terminated lines with a cap, so a peer that never sends `\n` costs
//! at most the cap in memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A complete line, without its newline.
    Line(Vec<u8>),
    /// A line longer than the cap; it was skipped up to its newline.
    TooLong,
    /// The input ended.
    End,
}

/// The next line of `input`, at most `max` bytes long.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    max: usize,
) -> std::io::Result<Read> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            // A last line without a newline still counts.
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Read::TooLong,
                (false, true) => Read::End,
                (false, false) => Read::Line(line),
            });
        }
        let (chunk, found) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = found.unwrap_or(buffer.len());
        input.consume(used);
        if found.is_some() {
            return Ok(if too_long {
                Read::TooLong
            } else {
                Read::Line(line)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<Read> {
        // A tiny buffer, so lines span several fills.
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let mut reads = Vec::new();
        loop {
            let read = read_line(&mut reader, max).await.unwrap();
            let end = read == Read::End;
            reads.push(read);
            if end {
                return reads;
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_and_skips_long_ones() {
        let reads = all(b"ab\n0123456789\ncd\nlast", 5).await;
        assert_eq!(
            reads,
            [
                Read::Line(b"ab".to_vec()),
                Read::TooLong,
                Read::Line(b"cd".to_vec()),
                Read::Line(b"last".to_vec()),
                Read::End,
            ]
        );
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_cap_fits() {
        assert_eq!(
            all(b"12345\n", 5).await,
            [Read::Line(b"12345".to_vec()), Read::End]
        );
    }
}
