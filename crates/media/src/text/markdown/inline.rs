//! Inline content of one line: the tokenizer (code spans, escapes, links and images, HTML
//! tags, entities, bare URLs) and the pairing of emphasis markers, rendered to plain text.

use super::run_len;

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
pub(super) struct Inline<'a> {
    pieces: Vec<Piece<'a>>,
    /// Open emphasis runs per marker (`*`, `_`, `~`), as indexes into `pieces`.
    openers: [Vec<usize>; 3],
}

impl<'a> Inline<'a> {
    pub(super) fn render(&mut self, src: &'a str, out: &mut String) {
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
