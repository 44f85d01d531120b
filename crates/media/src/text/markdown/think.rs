//! Reasoning blocks (`<think>`...`</think>`): removed from the raw reply before any Markdown
//! is looked at, including the half-open and half-typed forms a streaming preview produces.

use std::borrow::Cow;

/// Reasoning tags; `<thinking>` too because some models spell it that way.
const THINK_OPEN: [&str; 2] = ["<think>", "<thinking>"];
const THINK_CLOSE: [&str; 2] = ["</think>", "</thinking>"];

/// Length of the tag from `tags` at byte `at`, compared ASCII-case-insensitively.
fn tag_at(bytes: &[u8], at: usize, tags: &[&str]) -> Option<usize> {
    tags.iter()
        .map(|tag| tag.as_bytes())
        .find(|tag| {
            bytes
                .get(at..at + tag.len())
                .is_some_and(|found| found.eq_ignore_ascii_case(tag))
        })
        .map(<[u8]>::len)
}

/// Removes reasoning blocks before any Markdown is looked at, since their content is not for
/// the user whatever it contains. Borrows when there is nothing to remove.
pub(super) fn remove_think(input: &str) -> Cow<'_, str> {
    let bytes = input.as_bytes();
    let mut out = String::new();
    let mut kept_from = 0;
    let mut inside = false;
    let mut seen_tag = false;
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        let lt = at + offset;
        if inside {
            match tag_at(bytes, lt, &THINK_CLOSE) {
                Some(len) => {
                    inside = false;
                    at = lt + len;
                    kept_from = at;
                }
                None => at = lt + 1,
            }
        } else if let Some(len) = tag_at(bytes, lt, &THINK_OPEN) {
            out.push_str(&input[kept_from..lt]);
            inside = true;
            seen_tag = true;
            at = lt + len;
        } else if let Some(len) = tag_at(bytes, lt, &THINK_CLOSE) {
            // A closer with no opener: the model's template opened the block, so everything
            // so far was reasoning.
            if seen_tag {
                out.push_str(&input[kept_from..lt]);
            } else {
                out.clear();
            }
            seen_tag = true;
            at = lt + len;
            kept_from = at;
        } else {
            at = lt + 1;
        }
    }
    if inside {
        // Unterminated: a preview cut mid-reasoning shows nothing of it.
        return Cow::Owned(out);
    }
    let tail = cut_partial_think(&input[kept_from..]);
    if !seen_tag && tail.len() == input.len() {
        return Cow::Borrowed(input);
    }
    out.push_str(tail);
    Cow::Owned(out)
}

/// Drops a think tag cut in half at the very end of a streaming preview (`"Hi <thin"`), so it
/// does not flash on screen before the next delta hides the block.
fn cut_partial_think(text: &str) -> &str {
    let Some(lt) = text.rfind('<') else {
        return text;
    };
    let partial = &text.as_bytes()[lt..];
    let is_prefix = |tag: &str| {
        partial.len() >= 2
            && partial.len() < tag.len()
            && tag.as_bytes()[..partial.len()].eq_ignore_ascii_case(partial)
    };
    if THINK_OPEN
        .iter()
        .chain(THINK_CLOSE.iter())
        .any(|tag| is_prefix(tag))
    {
        &text[..lt]
    } else {
        text
    }
}
