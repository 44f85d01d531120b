//! Markdown to plain text.
//!
//! Not a Markdown renderer: the aim is text that reads naturally on a 25-column screen, from
//! input that is often cut mid-construct (streaming previews are cumulative prefixes of the
//! reply). So the parser is deliberately small:
//!
//! - Blocks are decided one line at a time (fences, quotes, headings, rules, tables, lists);
//!   the only look-ahead is one line, to spot a table header by the separator under it.
//! - Inline markup is tokenised per line, then emphasis markers are paired with a simplified
//!   form of CommonMark's delimiter rules (flanking, no intraword `_`), so `snake_case`,
//!   `2 * 3` and `2**10` survive while `**bold**` loses its stars.
//! - Every look-ahead is bounded (link syntax stops at the next `[`, tags at the next `<`,
//!   URLs at whitespace, and code spans remember which backtick lengths have no closer), so
//!   hostile input such as a line of ten thousand `[` costs linear time, not quadratic.
//!
//! Unfinished constructs degrade towards hiding markup: an unclosed `` ` `` or a lone `**` is
//! dropped rather than shown, because a stray symbol on a tiny screen is pure noise.
//!
//! This file owns the block level (one line at a time: fences, quotes, headings, rules,
//! tables, lists); [`think`] removes reasoning first and [`inline`] renders what is inside a line.

mod inline;
mod think;

#[cfg(test)]
mod tests;

use inline::Inline;
use think::remove_think;

/// Turns agent Markdown into plain text for a small screen.
///
/// Keeps what a reader needs: code (without fences or backticks), link text, image alt
/// text, list numbering, table cells (joined with `" - "`). Drops what only styles: heading,
/// quote and emphasis markers, rules, link targets, table pipes. Bullets become `* item` and
/// `<br>`-like tags line breaks.
///
/// Reasoning never reaches the screen: `<think>` blocks are removed, an unclosed one hides
/// everything after it (a preview cut mid-reasoning), and a `</think>` with no opener hides
/// everything before it (models whose chat template opens the block emit only the closer).
pub fn strip_markdown(input: &str) -> String {
    let text = remove_think(input);
    let mut out = String::with_capacity(text.len());
    let mut inline = Inline::default();
    let mut fence: Option<Fence> = None;
    let mut in_table = false;
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .peekable();

    while let Some(raw) = lines.next() {
        let line_start = out.len();
        if let Some(open) = &fence {
            let body = if open.quoted { strip_quote(raw).0 } else { raw };
            if open.is_closed_by(body) {
                fence = None;
            } else {
                out.push_str(dedent(body, open.indent));
                out.push('\n');
            }
            continue;
        }

        let (line, quoted) = strip_quote(raw);
        if let Some(open) = Fence::open(line, quoted) {
            fence = Some(open);
            in_table = false;
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            in_table = false;
            out.push('\n');
            continue;
        }

        if is_table_separator(trimmed) {
            in_table = true;
            continue;
        }
        if trimmed.contains('|')
            && (in_table
                || trimmed.starts_with('|')
                || lines
                    .peek()
                    .is_some_and(|next| is_table_separator(strip_quote(next).0.trim())))
        {
            in_table = true;
            table_row(trimmed, &mut inline, &mut out);
            finish_line(&mut out, line_start);
            continue;
        }
        in_table = false;

        if is_rule(trimmed) {
            out.push('\n');
            continue;
        }
        if is_setext_underline(trimmed) || is_link_definition(trimmed) {
            continue;
        }
        if let Some(title) = heading(trimmed) {
            inline.render(title, &mut out);
            finish_line(&mut out, line_start);
            continue;
        }

        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if let Some(item) = bullet(body) {
            out.push_str(indent);
            out.push_str("* ");
            inline.render(item, &mut out);
        } else if is_ordered_item(body) {
            out.push_str(indent);
            inline.render(body.trim_end(), &mut out);
        } else {
            inline.render(trimmed, &mut out);
        }
        finish_line(&mut out, line_start);
    }
    // Each kept line ended with '\n'; the input's last line had none.
    out.pop();
    out
}

/// Ends an output line, first dropping what inline rendering left trailing (spaces, a final
/// `<br>`), which would otherwise become a spurious blank line.
fn finish_line(out: &mut String, line_start: usize) {
    let kept = out[line_start..].trim_end_matches([' ', '\t', '\n']).len();
    out.truncate(line_start + kept);
    out.push('\n');
}

/// Removes blockquote markers (`>`, `> >`, `>>`), reporting whether there were any. A `>`
/// must be followed by a space, another `>` or the line end, so `>= 5` stays text.
fn strip_quote(line: &str) -> (&str, bool) {
    let mut rest = line;
    let mut quoted = false;
    loop {
        let body = rest.trim_start_matches([' ', '\t']);
        let Some(after) = body.strip_prefix('>') else {
            break;
        };
        if !(after.is_empty() || after.starts_with([' ', '\t', '>'])) {
            break;
        }
        rest = after.strip_prefix([' ', '\t']).unwrap_or(after);
        quoted = true;
    }
    if quoted {
        (rest, true)
    } else {
        (line, false)
    }
}

/// An open fenced code block.
struct Fence {
    marker: u8,
    len: usize,
    indent: usize,
    /// Opened inside a blockquote, so its lines carry `>` markers to strip.
    quoted: bool,
}

impl Fence {
    /// Recognises an opening fence; the info string (language tag) is simply dropped.
    fn open(line: &str, quoted: bool) -> Option<Fence> {
        let body = line.trim_start_matches([' ', '\t']);
        let marker = *body.as_bytes().first()?;
        if marker != b'`' && marker != b'~' {
            return None;
        }
        let len = run_len(body.as_bytes(), 0, marker);
        // "```ls```" on one line is inline code, not a fence.
        if len < 3 || (marker == b'`' && body[len..].contains('`')) {
            return None;
        }
        Some(Fence {
            marker,
            len,
            indent: line.len() - body.len(),
            quoted,
        })
    }

    fn is_closed_by(&self, line: &str) -> bool {
        let body = line.trim_start_matches([' ', '\t']);
        let len = run_len(body.as_bytes(), 0, self.marker);
        len >= self.len && body[len..].trim().is_empty()
    }
}

/// Removes up to `indent` leading spaces, the fence's own indentation inside a list item.
fn dedent(line: &str, indent: usize) -> &str {
    let spaces = line.bytes().take(indent).take_while(|&b| b == b' ').count();
    &line[spaces..]
}

/// Length of the run of `byte` starting at `at`.
fn run_len(bytes: &[u8], at: usize, byte: u8) -> usize {
    bytes
        .get(at..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| b == byte).count())
}

/// `|---|:--:|` or `---|---`: carries no content, so it is dropped.
fn is_table_separator(line: &str) -> bool {
    line.contains('|')
        && line.contains('-')
        && line
            .bytes()
            .all(|b| matches!(b, b'|' | b'-' | b':' | b' ' | b'\t'))
}

/// Table cells are joined with this rather than a double space, because the whitespace
/// collapse that follows would turn a double space into one and merge the columns.
const CELL_SEPARATOR: &str = " - ";

fn table_row<'a>(row: &'a str, inline: &mut Inline<'a>, out: &mut String) {
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = match row.strip_suffix('|') {
        Some(rest) if !rest.ends_with('\\') => rest,
        _ => row,
    };
    let mut first = true;
    let mut cell_start = 0;
    let bytes = row.as_bytes();
    for at in 0..=bytes.len() {
        let boundary =
            at == bytes.len() || (bytes[at] == b'|' && (at == 0 || bytes[at - 1] != b'\\'));
        if !boundary {
            continue;
        }
        let cell = row[cell_start..at].trim();
        cell_start = at + 1;
        if cell.is_empty() {
            continue;
        }
        let mark = out.len();
        if !first {
            out.push_str(CELL_SEPARATOR);
        }
        let content = out.len();
        inline.render(cell, out);
        // GFM escapes pipes even inside code in a cell; the code span kept its backslash.
        if out[content..].contains("\\|") {
            let unescaped = out[content..].replace("\\|", "|");
            out.truncate(content);
            out.push_str(&unescaped);
        }
        if out[content..].trim().is_empty() {
            out.truncate(mark);
        } else {
            first = false;
        }
    }
}

/// `---`, `***`, `___`, also spaced (`* * *`): a visual break, kept as a blank line.
fn is_rule(line: &str) -> bool {
    let Some(&marker) = line.as_bytes().first() else {
        return false;
    };
    matches!(marker, b'-' | b'*' | b'_')
        && line.bytes().all(|b| b == marker || b == b' ' || b == b'\t')
        && line.bytes().filter(|&b| b == marker).count() >= 3
}

/// `===` under a title: the title line above already says it all.
fn is_setext_underline(line: &str) -> bool {
    line.len() >= 3 && line.bytes().all(|b| b == b'=')
}

/// `[id]: https://...`, the target of a reference link: nothing to read. Footnotes
/// (`[^1]: text`) are kept, and the target must look like a URL so prose is never lost.
fn is_link_definition(line: &str) -> bool {
    let Some(label_and_rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some((label, target)) = label_and_rest.split_once("]:") else {
        return false;
    };
    let target = target.trim_start();
    !label.is_empty()
        && !label.starts_with('^')
        && !label.contains(['[', ']'])
        && (target.contains("://")
            || target.starts_with(['/', '<', '#'])
            || target.starts_with("mailto:"))
}

/// The text of an ATX heading (`## Title ##`), or `None`. `#tag` is not a heading.
fn heading(line: &str) -> Option<&str> {
    let level = run_len(line.as_bytes(), 0, b'#');
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &line[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let title = rest.trim();
    let without_closing = title.trim_end_matches('#');
    if without_closing.is_empty() {
        Some("")
    } else if without_closing.ends_with([' ', '\t']) {
        Some(without_closing.trim_end())
    } else {
        // "# Learn C#": the '#' belongs to the title.
        Some(title)
    }
}

/// The text of a `-`, `*` or `+` bullet item, or `None`.
fn bullet(line: &str) -> Option<&str> {
    let rest = line.strip_prefix(['-', '*', '+'])?;
    if rest.is_empty() || rest.starts_with([' ', '\t']) {
        Some(rest.trim())
    } else {
        None
    }
}

/// `1.` or `1)` followed by a space: kept verbatim, numbers are content.
fn is_ordered_item(line: &str) -> bool {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    (1..=9).contains(&digits)
        && matches!(line.as_bytes().get(digits), Some(b'.' | b')'))
        && matches!(line.as_bytes().get(digits + 1), None | Some(b' ' | b'\t'))
}
