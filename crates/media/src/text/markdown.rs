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

use std::borrow::Cow;

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
fn remove_think(input: &str) -> Cow<'_, str> {
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

/// One unit of a line's inline content.
#[derive(Clone, Copy)]
enum Piece<'a> {
    /// Text shown as-is (plain text, code, link text pieces).
    Text(&'a str),
    /// A single character from an escape or entity.
    Char(char),
    /// A line break from `<br>` or a block-level HTML tag.
    Break,
    /// A run of `*`, `_` or `~~` that may turn out to be emphasis.
    Delim(Delim),
}

#[derive(Clone, Copy)]
struct Delim {
    marker: u8,
    len: usize,
    /// Characters of the run not consumed by pairing.
    left: usize,
    can_open: bool,
    can_close: bool,
    paired: bool,
}

impl Delim {
    fn new(src: &str, at: usize, len: usize) -> Delim {
        let marker = src.as_bytes()[at];
        let before = src[..at].chars().next_back();
        let after = src[at + len..].chars().next();
        let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
        let punct = |c: Option<char>| c.is_some_and(is_punctuation);
        // CommonMark's flanking rules: a run can open emphasis if it is followed by text,
        // and close it if it is preceded by text.
        let left = !space(after) && (!punct(after) || space(before) || punct(before));
        let right = !space(before) && (!punct(before) || space(after) || punct(after));
        let (can_open, can_close) = if marker == b'_' {
            // No intraword underscores: snake_case stays intact.
            (
                left && (!right || punct(before)),
                right && (!left || punct(after)),
            )
        } else {
            (left, right)
        };
        Delim {
            marker,
            len,
            left: len,
            can_open,
            can_close,
            paired: false,
        }
    }

    /// How many marker characters are shown. Unpaired double markers that only open or only
    /// close (`**Note` in a preview cut mid-bold) are hidden; `2**10` and `a ** b` are not.
    fn shown(&self) -> usize {
        if self.paired {
            self.left
        } else if self.len >= 2 && self.can_open != self.can_close {
            0
        } else {
            self.len
        }
    }
}

/// Unicode punctuation and symbols count as punctuation, as in CommonMark.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace())
}

/// Reusable buffers for inline rendering, so a reply allocates them once, not per line.
#[derive(Default)]
struct Inline<'a> {
    pieces: Vec<Piece<'a>>,
    /// Open emphasis runs per marker (`*`, `_`, `~`), as indexes into `pieces`.
    openers: [Vec<usize>; 3],
}

impl<'a> Inline<'a> {
    fn render(&mut self, src: &'a str, out: &mut String) {
        self.pieces.clear();
        tokenize(src, &mut self.pieces, false);
        self.pair();
        for piece in &self.pieces {
            match *piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Char(c) => out.push(c),
                Piece::Break => out.push('\n'),
                Piece::Delim(run) => {
                    for _ in 0..run.shown() {
                        out.push(char::from(run.marker));
                    }
                }
            }
        }
    }

    /// Pairs closers with the nearest opener of the same marker. One stack per marker keeps
    /// this linear; CommonMark's cross-marker rules are skipped since a tiny screen only
    /// cares whether a marker is shown, not how it nests.
    fn pair(&mut self) {
        for stack in &mut self.openers {
            stack.clear();
        }
        for index in 0..self.pieces.len() {
            let Piece::Delim(mut run) = self.pieces[index] else {
                continue;
            };
            let stack = &mut self.openers[match run.marker {
                b'*' => 0,
                b'_' => 1,
                _ => 2,
            }];
            if run.can_close {
                while run.left > 0 {
                    let Some(&opener) = stack.last() else {
                        break;
                    };
                    let Piece::Delim(open) = &mut self.pieces[opener] else {
                        stack.pop();
                        continue;
                    };
                    let used = open.left.min(run.left);
                    open.left -= used;
                    open.paired = true;
                    run.left -= used;
                    run.paired = true;
                    if open.left == 0 {
                        stack.pop();
                    }
                }
            }
            if run.can_open && run.left > 0 {
                stack.push(index);
            }
            self.pieces[index] = Piece::Delim(run);
        }
    }
}

/// What the tokenizer found at a markup character.
enum Found<'a> {
    /// Markup worth keeping as this piece.
    Piece(Piece<'a>),
    /// Link or image text, tokenised in turn (without further links).
    Nested(&'a str),
    /// Markup that shows nothing.
    Hidden,
}

/// Splits one line (or a link's text, when `nested`) into pieces.
fn tokenize<'a>(src: &'a str, pieces: &mut Vec<Piece<'a>>, nested: bool) {
    let bytes = src.as_bytes();
    // Code span lengths known to have no closer further on (keeps backtick soup linear).
    let mut unclosed_ticks: Vec<usize> = Vec::new();
    let mut plain = 0;
    let mut at = 0;
    while at < bytes.len() {
        // All markup is ASCII, so `at` and every end below are char boundaries.
        let found: Option<(Found<'a>, usize)> = match bytes[at] {
            b'\\' => match bytes.get(at + 1) {
                Some(&next) if next.is_ascii_punctuation() => {
                    Some((Found::Piece(Piece::Char(char::from(next))), at + 2))
                }
                // A trailing backslash is a hard line break marker: nothing to show.
                None => Some((Found::Hidden, at + 1)),
                Some(_) => None,
            },
            b'`' => {
                let len = run_len(bytes, at, b'`');
                let closer = if unclosed_ticks.contains(&len) {
                    None
                } else {
                    find_code_closer(bytes, at + len, len)
                };
                Some(match closer {
                    Some(close) => (
                        Found::Piece(Piece::Text(trim_code(&src[at + len..close]))),
                        close + len,
                    ),
                    None => {
                        // Usually a preview cut mid-span: hide the lone backticks.
                        unclosed_ticks.push(len);
                        (Found::Hidden, at + len)
                    }
                })
            }
            b'*' | b'_' => {
                let len = run_len(bytes, at, bytes[at]);
                Some((
                    Found::Piece(Piece::Delim(Delim::new(src, at, len))),
                    at + len,
                ))
            }
            b'~' => {
                let len = run_len(bytes, at, b'~');
                if len == 2 {
                    Some((
                        Found::Piece(Piece::Delim(Delim::new(src, at, len))),
                        at + len,
                    ))
                } else {
                    // A single `~` means "about" in agent prose; skip the whole run.
                    at += len;
                    continue;
                }
            }
            b'!' if !nested && bytes.get(at + 1) == Some(&b'[') => {
                parse_link(src, at + 1).map(|image| (Found::Nested(image.text), image.end))
            }
            b'[' if !nested => parse_link(src, at).map(|link| {
                let found = if link.text.trim().is_empty() {
                    Found::Piece(Piece::Text(link.target))
                } else {
                    Found::Nested(link.text)
                };
                (found, link.end)
            }),
            b'<' => parse_angle(src, at),
            b'&' => parse_entity(src, at).map(|(c, end)| {
                (
                    c.map_or(Found::Hidden, |c| Found::Piece(Piece::Char(c))),
                    end,
                )
            }),
            b'h' if at == 0 || !bytes[at - 1].is_ascii_alphanumeric() => {
                bare_url_end(src, at).map(|end| (Found::Piece(Piece::Text(&src[at..end])), end))
            }
            _ => None,
        };
        let Some((found, end)) = found else {
            at += 1;
            continue;
        };
        if plain < at {
            pieces.push(Piece::Text(&src[plain..at]));
        }
        match found {
            Found::Piece(piece) => pieces.push(piece),
            Found::Nested(text) => tokenize(text, pieces, true),
            Found::Hidden => {}
        }
        at = end.min(bytes.len());
        plain = at;
    }
    if plain < bytes.len() {
        pieces.push(Piece::Text(&src[plain..]));
    }
}

/// Byte index of the next backtick run of exactly `len`, from `from`.
fn find_code_closer(bytes: &[u8], from: usize, len: usize) -> Option<usize> {
    let mut at = from;
    while let Some(offset) = bytes.get(at..)?.iter().position(|&b| b == b'`') {
        let start = at + offset;
        let run = run_len(bytes, start, b'`');
        if run == len {
            return Some(start);
        }
        at = start + run;
    }
    None
}

/// CommonMark strips one space on each side of code (`` `` `x` `` ``), if both are there.
fn trim_code(code: &str) -> &str {
    match code.strip_prefix(' ').and_then(|c| c.strip_suffix(' ')) {
        Some(inner) if !inner.trim().is_empty() => inner,
        _ => code,
    }
}

struct Link<'a> {
    text: &'a str,
    target: &'a str,
    end: usize,
}

/// Parses `[text](target "title")` or `[text][ref]` with `src[at] == '['`. Link text may not
/// contain `[` and no scan goes past the next `[`, which bounds the work per bracket.
fn parse_link(src: &str, at: usize) -> Option<Link<'_>> {
    let bytes = src.as_bytes();
    let close = scan_to(bytes, at + 1, b']')?;
    let text = &src[at + 1..close];
    match bytes.get(close + 1) {
        Some(b'(') => {
            let mut pos = skip_spaces(bytes, close + 2);
            let target_start = pos;
            let mut depth = 0usize;
            while let Some(&b) = bytes.get(pos) {
                match b {
                    b'\\' => pos += 2,
                    b'(' => {
                        depth += 1;
                        pos += 1;
                    }
                    b')' if depth == 0 => break,
                    b')' => {
                        depth -= 1;
                        pos += 1;
                    }
                    b' ' | b'\t' => break,
                    b'[' => return None,
                    _ => pos += 1,
                }
            }
            let target = src.get(target_start..pos.min(bytes.len()))?;
            pos = skip_spaces(bytes, pos);
            if let Some(&quote @ (b'"' | b'\'')) = bytes.get(pos) {
                pos = scan_to(bytes, pos + 1, quote)? + 1;
                pos = skip_spaces(bytes, pos);
            }
            (bytes.get(pos) == Some(&b')')).then_some(Link {
                text,
                target,
                end: pos + 1,
            })
        }
        Some(b'[') => scan_to(bytes, close + 2, b']').map(|end| Link {
            text,
            target: "",
            end: end + 1,
        }),
        _ => None,
    }
}

/// Index of the next unescaped `wanted` from `from`, giving up at a `[` (see
/// [`parse_link`]).
fn scan_to(bytes: &[u8], from: usize, wanted: u8) -> Option<usize> {
    let mut pos = from;
    while let Some(&b) = bytes.get(pos) {
        if b == wanted {
            return Some(pos);
        }
        match b {
            b'\\' => pos += 2,
            b'[' => return None,
            _ => pos += 1,
        }
    }
    None
}

fn skip_spaces(bytes: &[u8], from: usize) -> usize {
    from + bytes.get(from..).map_or(0, |rest| {
        rest.iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count()
    })
}

/// HTML tags that end a line of text.
const BREAK_TAGS: &str = "br p div li ul ol tr table thead tbody tfoot h1 h2 h3 h4 h5 h6 hr pre \
                          blockquote details summary dl dt dd section article header footer center";
/// HTML tags that separate cells.
const SPACE_TAGS: &str = "td th";
/// HTML tags that only style text: removed, their content kept.
const INLINE_TAGS: &str = "a b i u s em strong code kbd span sub sup small mark del ins strike \
                           abbr cite q font img tt var samp";

/// Parses `<...>` at `at`: an autolink becomes its URL, a known HTML tag a break, a space or
/// nothing. Unknown tags such as `Vec<String>` are left as text.
fn parse_angle(src: &str, at: usize) -> Option<(Found<'_>, usize)> {
    let inner_start = at + 1;
    let rest = src.get(inner_start..)?.as_bytes();
    let stop = rest
        .iter()
        .position(|&b| b == b'>' || b == b'<' || b.is_ascii_whitespace());
    if let Some(end) = stop.filter(|&end| rest[end] == b'>') {
        let inner = &src[inner_start..inner_start + end];
        if is_autolink(inner) {
            return Some((Found::Piece(Piece::Text(inner)), inner_start + end + 1));
        }
    }

    let closing = usize::from(rest.first() == Some(&b'/'));
    let name_len = rest[closing..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if name_len == 0 || !rest[closing].is_ascii_alphabetic() {
        return None;
    }
    let name = &src[inner_start + closing..inner_start + closing + name_len];
    let after = closing + name_len;
    let end = match rest.get(after) {
        Some(b'>') => after,
        Some(b'/' | b' ' | b'\t') if closing == 0 => {
            let close = after + rest[after..].iter().position(|&b| b == b'>' || b == b'<')?;
            let attributes = &rest[after..close];
            // `<br />` or `<span class="x">`, but not prose like `<b and c>`.
            let tag_like = attributes.contains(&b'=')
                || attributes
                    .iter()
                    .all(|&b| b == b'/' || b.is_ascii_whitespace());
            if rest[close] != b'>' || !tag_like {
                return None;
            }
            close
        }
        _ => return None,
    };
    let known = |tags: &str| {
        tags.split_ascii_whitespace()
            .any(|tag| tag.eq_ignore_ascii_case(name))
    };
    let found = if known(BREAK_TAGS) {
        Found::Piece(Piece::Break)
    } else if known(SPACE_TAGS) {
        Found::Piece(Piece::Char(' '))
    } else if known(INLINE_TAGS) {
        Found::Hidden
    } else {
        return None;
    };
    Some((found, inner_start + end + 1))
}

/// `scheme:...` (`http://x`, `mailto:a@b`) or a bare e-mail address.
fn is_autolink(inner: &str) -> bool {
    if let Some((scheme, rest)) = inner.split_once(':') {
        if (2..=32).contains(&scheme.len())
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !rest.is_empty()
        {
            return true;
        }
    }
    match inner.split_once('@') {
        Some((user, domain)) => {
            !user.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.contains('@')
        }
        None => false,
    }
}

/// Decodes the few HTML entities agents emit (`&amp;`, `&nbsp;`, `&#8217;`...). `Some(None)`
/// means a valid entity for a character not worth showing (a control character).
fn parse_entity(src: &str, at: usize) -> Option<(Option<char>, usize)> {
    let rest = src.as_bytes().get(at + 1..)?;
    let semi = rest.iter().take(10).position(|&b| b == b';')?;
    let name = &rest[..semi];
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'#') {
        return None;
    }
    let decoded = match name {
        b"amp" => '&',
        b"lt" => '<',
        b"gt" => '>',
        b"quot" => '"',
        b"apos" => '\'',
        // A non-breaking space is only a layout hint; the screen wraps as it must.
        b"nbsp" => ' ',
        [b'#', b'x' | b'X', hex @ ..] => decode_number(hex, 16)?,
        [b'#', decimal @ ..] => decode_number(decimal, 10)?,
        _ => return None,
    };
    let shown = (!decoded.is_control() || decoded == '\n').then_some(decoded);
    Some((shown, at + 1 + semi + 1))
}

fn decode_number(digits: &[u8], radix: u32) -> Option<char> {
    let digits = std::str::from_utf8(digits).ok()?;
    char::from_u32(u32::from_str_radix(digits, radix).ok()?)
}

/// End of a bare `http(s)://` URL at `at`, so `_` and `*` inside it are not emphasis.
/// Trailing punctuation is left out: it belongs to the sentence (or closes emphasis).
fn bare_url_end(src: &str, at: usize) -> Option<usize> {
    let rest = &src[at..];
    if !(rest.starts_with("http://") || rest.starts_with("https://")) {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut end = bytes
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'<')
        .unwrap_or(bytes.len());
    while end > 0 && b"*_~)]}>.,;:!?'\"".contains(&bytes[end - 1]) {
        end -= 1;
    }
    Some(at + end)
}

#[cfg(test)]
mod tests {
    use super::strip_markdown as strip;

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(strip("Hello, world."), "Hello, world.");
        assert_eq!(strip(""), "");
        assert_eq!(strip("line one\nline two\n"), "line one\nline two\n");
        assert_eq!(strip("Grüße aus Köln 🙂"), "Grüße aus Köln 🙂");
    }

    #[test]
    fn think_blocks_are_removed() {
        assert_eq!(strip("<think>secret plan</think>Answer"), "Answer");
        assert_eq!(strip("A<think>x\ny\n</think>B<think>z</think>C"), "ABC");
        assert_eq!(strip("<THINK>x</Think>ok"), "ok");
        assert_eq!(strip("<thinking>x</thinking>ok"), "ok");
    }

    #[test]
    fn unterminated_think_hides_the_rest() {
        assert_eq!(strip("Sure.<think>Let me **reason** about"), "Sure.");
        assert_eq!(strip("<think>"), "");
    }

    #[test]
    fn stray_think_closer_hides_what_came_before() {
        assert_eq!(
            strip("reasoning here\n</think>\n\nThe answer"),
            "\n\nThe answer"
        );
    }

    #[test]
    fn think_tag_cut_at_the_end_is_hidden() {
        assert_eq!(strip("Hello <thin"), "Hello");
        assert_eq!(strip("Hello </thi"), "Hello");
        assert_eq!(strip("Hello <"), "Hello <");
        assert_eq!(strip("a <b"), "a <b");
    }

    #[test]
    fn fenced_code_keeps_its_content() {
        assert_eq!(
            strip("Run:\n```bash\nls -la *.txt\necho $HOME_DIR\n```\nDone"),
            "Run:\nls -la *.txt\necho $HOME_DIR\nDone"
        );
        assert_eq!(strip("~~~\n**not bold**\n~~~"), "**not bold**");
        // Unterminated (streaming): the rest is code.
        assert_eq!(strip("```py\nx = a_b * 2"), "x = a_b * 2");
        // A longer fence is only closed by an equally long one.
        assert_eq!(strip("````\n```\n````"), "```");
    }

    #[test]
    fn fenced_code_in_lists_and_quotes() {
        assert_eq!(strip("- step\n  ```\n  make\n  ```"), "* step\nmake");
        assert_eq!(strip("> ```\n> code\n> ```"), "code");
    }

    #[test]
    fn inline_code_keeps_text() {
        assert_eq!(strip("Use `cargo test` now"), "Use cargo test now");
        assert_eq!(strip("``a ` b``"), "a ` b");
        assert_eq!(strip("`` `x` ``"), "`x`");
        assert_eq!(strip("```ls -la```"), "ls -la");
        assert_eq!(strip("`**raw**` and `[x](y)`"), "**raw** and [x](y)");
    }

    #[test]
    fn unbalanced_backticks_are_hidden() {
        assert_eq!(strip("Run `cargo bu"), "Run cargo bu");
        assert_eq!(strip("a `` b ` c"), "a  b  c");
    }

    #[test]
    fn links_keep_their_text() {
        assert_eq!(
            strip("See [the docs](https://x.io/a_(b)) now"),
            "See the docs now"
        );
        assert_eq!(strip("[**Bold** link](http://x \"Title\")"), "Bold link");
        assert_eq!(strip("[ref link][1] and [other][]"), "ref link and other");
        assert_eq!(strip("[](https://x.io)"), "https://x.io");
        assert_eq!(strip("[1]: https://example.com\nText"), "Text");
        assert_eq!(strip("[^1]: A footnote"), "[^1]: A footnote");
    }

    #[test]
    fn lone_brackets_stay() {
        assert_eq!(strip("array[0] = 1"), "array[0] = 1");
        assert_eq!(strip("[unclosed (x)"), "[unclosed (x)");
        assert_eq!(strip("a ]( b"), "a ]( b");
        assert_eq!(strip("[a](b"), "[a](b");
        assert_eq!(strip("[x] done"), "[x] done");
    }

    #[test]
    fn images_keep_alt_text() {
        assert_eq!(strip("![A cat](cat.png) sleeping"), "A cat sleeping");
        assert_eq!(strip("![](spacer.gif)x"), "x");
        assert_eq!(strip("Wow!"), "Wow!");
        assert_eq!(strip("Hi![x"), "Hi![x");
    }

    #[test]
    fn autolinks_lose_brackets() {
        assert_eq!(
            strip("Go to <https://x.io/a_b_>."),
            "Go to https://x.io/a_b_."
        );
        assert_eq!(strip("Mail <me@x.io>"), "Mail me@x.io");
        assert_eq!(strip("if a <b and c> d"), "if a <b and c> d");
    }

    #[test]
    fn bare_urls_are_not_emphasis() {
        assert_eq!(
            strip("see https://x.io/_a_/*b* now"),
            "see https://x.io/_a_/*b* now"
        );
        assert_eq!(strip("**https://x.io**"), "https://x.io");
    }

    #[test]
    fn headings_lose_hashes() {
        assert_eq!(strip("# Title"), "Title");
        assert_eq!(strip("### **Step 2** ###"), "Step 2");
        assert_eq!(strip("# Learn C#"), "Learn C#");
        assert_eq!(strip("#hashtag"), "#hashtag");
        assert_eq!(strip("####### seven"), "####### seven");
        assert_eq!(strip("Title\n====="), "Title");
    }

    #[test]
    fn blockquotes_lose_markers() {
        assert_eq!(strip("> quoted"), "quoted");
        assert_eq!(strip("> > nested\n>> tight"), "nested\ntight");
        assert_eq!(strip("> # Head\n> - item"), "Head\n* item");
        assert_eq!(strip(">= 5 is fine"), ">= 5 is fine");
        assert_eq!(strip("a > b"), "a > b");
    }

    #[test]
    fn horizontal_rules_are_removed() {
        assert_eq!(strip("a\n---\nb"), "a\n\nb");
        assert_eq!(strip("a\n***\nb\n___\nc"), "a\n\nb\n\nc");
        assert_eq!(strip("* * *"), "");
        assert_eq!(strip("- - -"), "");
        assert_eq!(strip("--"), "--");
    }

    #[test]
    fn tables_become_rows() {
        assert_eq!(
            strip("| City | Pop |\n|---|:--:|\n| Paris | 2.1M |\n| **Rome** | 2.8M |"),
            "City - Pop\nParis - 2.1M\nRome - 2.8M"
        );
        assert_eq!(strip("a | b\n--- | ---\n1 | 2"), "a - b\n1 - 2");
        assert_eq!(strip("| x | | z |"), "x - z");
        assert_eq!(strip("| a \\| b | `x \\| y` |"), "a | b - x | y");
        // A pipe in prose is not a table.
        assert_eq!(strip("yes | no"), "yes | no");
    }

    #[test]
    fn emphasis_markers_are_removed() {
        assert_eq!(strip("*a* **b** ***c*** _d_ __e__ ~~f~~"), "a b c d e f");
        assert_eq!(strip("**bold _and italic_ text**"), "bold and italic text");
        assert_eq!(strip("un*frigging*believable"), "unfriggingbelievable");
        assert_eq!(strip("**unclosed bold"), "unclosed bold");
        assert_eq!(strip("end of bold**"), "end of bold");
    }

    #[test]
    fn emphasis_lookalikes_survive() {
        assert_eq!(
            strip("my_var_name and __init__.py"),
            "my_var_name and init.py"
        );
        assert_eq!(strip("snake_case_name"), "snake_case_name");
        assert_eq!(strip("2 * 3 * 4 = 24"), "2 * 3 * 4 = 24");
        assert_eq!(strip("2**10 = 1024"), "2**10 = 1024");
        assert_eq!(strip("a ** b"), "a ** b");
        assert_eq!(strip("~5 min, ~~ and ~~~"), "~5 min, ~~ and ~~~");
        assert_eq!(strip("price*"), "price*");
    }

    #[test]
    fn bullets_are_normalised() {
        assert_eq!(strip("- one\n* two\n+ three"), "* one\n* two\n* three");
        assert_eq!(
            strip("- top\n  - nested\n\t+ tab"),
            "* top\n  * nested\n\t* tab"
        );
        assert_eq!(strip("- **Bold**: text"), "* Bold: text");
        assert_eq!(strip("- [ ] task"), "* [ ] task");
        assert_eq!(strip("-5 degrees\n+1 from me"), "-5 degrees\n+1 from me");
        assert_eq!(strip("*emphasis* first"), "emphasis first");
    }

    #[test]
    fn numbered_lists_keep_numbers() {
        assert_eq!(
            strip("1. First\n2. **Second**\n10) Tenth"),
            "1. First\n2. Second\n10) Tenth"
        );
        assert_eq!(strip("   3. indented"), "   3. indented");
        assert_eq!(strip("2024. was a year"), "2024. was a year");
    }

    #[test]
    fn html_tags_become_breaks_or_vanish() {
        assert_eq!(
            strip("one<br>two<br/>three<BR />four"),
            "one\ntwo\nthree\nfour"
        );
        assert_eq!(strip("<b>bold</b> <span class=\"x\">s</span>"), "bold s");
        assert_eq!(strip("<p>para</p><p>next</p>"), "\npara\n\nnext");
        assert_eq!(strip("line<br>"), "line");
        assert_eq!(strip("Vec<String> and a<b"), "Vec<String> and a<b");
    }

    #[test]
    fn escapes_are_unescaped() {
        assert_eq!(strip(r"\*not emphasis\*"), "*not emphasis*");
        assert_eq!(strip(r"\_ \# \[x\](y) \\ \` \|"), r"_ # [x](y) \ ` |");
        assert_eq!(strip(r"C:\Users\me"), r"C:\Users\me");
        assert_eq!(strip("hard break\\\nnext"), "hard break\nnext");
    }

    #[test]
    fn entities_are_decoded() {
        assert_eq!(
            strip("Tom &amp; Jerry &lt;3 &#233;&#x2019;"),
            "Tom & Jerry <3 é’"
        );
        assert_eq!(strip("a&nbsp;b &bogus; & c &#0;"), "a b &bogus; & c");
        assert_eq!(strip("AT&T;"), "AT&T;");
    }

    #[test]
    fn crlf_input() {
        assert_eq!(strip("# Hi\r\n- a\r\n"), "Hi\n* a\n");
    }
}
