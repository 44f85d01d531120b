//! Names devices give themselves, cleaned at the door: they end up in the owner's
//! terminal, in pairing requests and in the agent's context, so control characters
//! (a terminal escape can rewrite what `herald devices` shows) and bidirectional
//! overrides (which can make one name read as another) never get in.
//!
//! A crate of its own so the two ends agree on what is unsafe ([`is_unsafe`]): the server
//! drops it from names as they arrive ([`clean`]), and a tool that prints what a server
//! says (the tables of `herald devices`) escapes it, without linking the server.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// `text` without control or bidi-formatting characters, trimmed, at most `max` chars.
pub fn clean(text: &str, max: usize) -> String {
    text.chars()
        .filter(|c| !is_unsafe(*c))
        .collect::<String>()
        .trim()
        .chars()
        .take(max)
        .collect()
}

/// The same for an optional name; one left empty is no name.
pub fn clean_opt(text: Option<&str>, max: usize) -> Option<String> {
    text.map(|t| clean(t, max)).filter(|t| !t.is_empty())
}

/// A character no name may carry: a control character or a bidi control.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Marks, embeddings, overrides and isolates (Unicode's Bidi_Control property).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_overrides_are_dropped_and_length_is_capped() {
        assert_eq!(
            clean("Kitchen\x1b[2J\x1b]0;pwned\x07", 64),
            "Kitchen[2J]0;pwned"
        );
        assert_eq!(clean("evil\u{202E}gpj.exe", 64), "evilgpj.exe");
        assert_eq!(clean("  a\u{2066}b\u{2069}\n", 64), "ab");
        assert_eq!(clean(&"é".repeat(100), 64).chars().count(), 64);
        assert_eq!(
            clean("Привет 👋", 64),
            "Привет 👋",
            "other scripts and emoji stay"
        );
        assert_eq!(clean_opt(Some("\x00\x01"), 64), None);
        assert_eq!(clean_opt(None, 64), None);
    }
}
