//! How deeply a JSON text nests, checked before a parser sees it.
//!
//! Both Herald protocols refuse frames nested deeper than a small limit, so a hostile
//! frame of a million `[` costs a linear scan instead of a parser's recursion. The scan
//! counts brackets outside strings only, and jumps across each string with `memchr`:
//! frames are mostly long strings (base64 media), so that is where the time would go.
//! It does not validate JSON; the parser that runs next does.
//!
//! [`probe`] is the second step: it finds the frame's type tag without building the rest,
//! so each protocol can parse the body straight into the type the tag names.

#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

extern crate alloc;

pub mod probe;

/// The text nests deeper than allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep;

/// Ok when no object or array in `text` is nested more than `max` deep.
pub fn check(text: &[u8], max: usize) -> Result<(), TooDeep> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'"' => at = string_end(text, at + 1),
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Err(TooDeep);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

/// The index of the quote that closes the string starting at `from` (just after its
/// opening quote), or the end of the text for an unterminated one.
fn string_end(text: &[u8], mut from: usize) -> usize {
    while let Some(offset) = memchr::memchr2(b'"', b'\\', &text[from..]) {
        let found = from + offset;
        if text[found] == b'"' {
            return found;
        }
        // A backslash escapes the next byte, whatever it is.
        from = found + 2;
        if from >= text.len() {
            break;
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::String;

    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn counts_brackets_up_to_the_limit() {
        assert_eq!(check(nested(32).as_bytes(), 32), Ok(()));
        assert_eq!(check(nested(33).as_bytes(), 32), Err(TooDeep));
        assert_eq!(check(br#"{"a":{"b":[1,{"c":[]}]}}"#, 5), Ok(()));
        assert_eq!(check(br#"{"a":{"b":[1,{"c":[]}]}}"#, 4), Err(TooDeep));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!(r#"{{"s":"{}","t":"x"}}"#, "[".repeat(100));
        assert_eq!(check(text.as_bytes(), 1), Ok(()));
        // Escaped quotes and backslashes keep the string open or close it correctly.
        assert_eq!(check(br#"{"s":"a\"[[[[","t":1}"#, 1), Ok(()));
        assert_eq!(check(br#"{"s":"a\\","t":[[1]]}"#, 2), Err(TooDeep));
        assert_eq!(check(br#"{"s":"a\\","t":[[1]]}"#, 3), Ok(()));
    }

    #[test]
    fn odd_input_never_panics() {
        for text in [
            &b""[..],
            b"\"",
            b"\"\\",
            b"[\"\\",
            b"]]]]",
            b"\"abc",
            b"{\"\\\"",
        ] {
            let _ = check(text, 2);
        }
        assert_eq!(check(b"[[[\"unterminated", 2), Err(TooDeep));
    }
}
