//! Folding Unicode text to printable ASCII for devices whose font has nothing else.
//!
//! Order matters: a small table of readable replacements is tried first (typography,
//! currency, letters that Unicode does not decompose such as `ß` or `ø`), then NFKD
//! compatibility decomposition with its combining marks dropped (`é` → `e`, `ﬁ` → `fi`,
//! `½` → `1/2`), then, for letters and digits of other scripts, the transliteration of
//! the `any_ascii` crate (`Привет` → `Privet`, `Ελλάδα` → `Ellada`, `東京` → `DongJing`).
//! Only letters and digits are transliterated: `any_ascii` spells emoji and pictographs
//! as `:names:`, which on a 25-column screen is noise, so they are dropped.

use any_ascii::any_ascii_char;
use unicode_normalization::char::decompose_compatible;

/// Folds text to printable ASCII plus `'\n'`.
///
/// The degree sign becomes `" deg"` (with a leading space: `21°C` → `21 degC`, `90°` →
/// `90 deg`). Currency signs become ISO codes, with a space before a number (`€5` →
/// `EUR 5`). Tabs become spaces, other control characters are dropped. A dropped character
/// at the start of a line takes the spaces after it along (`"✅ Done"` → `"Done"`) so
/// lines do not start with a gap.
pub fn fold_ascii(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    // Set after something was dropped at the start of a line, until visible text follows.
    let mut skip_spaces = false;
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        if skip_spaces && c.is_whitespace() && !is_line_break(c) {
            continue;
        }
        let line_start = out.is_empty() || out.ends_with('\n');
        let before = out.len();
        fold_char(c, &mut out);
        if is_currency(c) && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push(' ');
        }
        skip_spaces = line_start && out.len() == before;
    }
    out
}

/// Appends the ASCII form of one character, if it has one.
fn fold_char(c: char, out: &mut String) {
    if c.is_ascii() {
        push_ascii(c, out);
    } else if let Some(replacement) = replacement(c) {
        out.push_str(replacement);
    } else if c.is_whitespace() {
        out.push(' ');
    } else {
        decompose_compatible(c, |part| {
            if part.is_ascii() {
                push_ascii(part, out);
            } else if let Some(replacement) = replacement(part) {
                out.push_str(replacement);
            } else if part.is_whitespace() {
                out.push(' ');
            } else if part.is_alphanumeric() {
                out.push_str(any_ascii_char(part));
            }
            // Anything else (combining marks, emoji, pictographs) is dropped.
        });
    }
}

fn push_ascii(c: char, out: &mut String) {
    match c {
        '\t' => out.push(' '),
        '\n' => out.push('\n'),
        c if c.is_ascii_control() => {}
        c => out.push(c),
    }
}

fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\u{2028}' | '\u{2029}' | '\u{85}')
}

fn is_currency(c: char) -> bool {
    matches!(c, '€' | '£' | '¥' | '₹')
}

/// Readable ASCII for characters NFKD leaves alone or decomposes unhelpfully.
fn replacement(c: char) -> Option<&'static str> {
    Some(match c {
        // Quotes and apostrophes (single guillemets too), primes, the modifier apostrophe.
        '‘' | '’' | '‚' | '‛' | '′' | '‵' | 'ʼ' | '‹' | '›' | '´' => "'",
        '“' | '”' | '„' | '‟' | '″' | '«' | '»' => "\"",
        // Hyphens, dashes and the minus sign.
        '\u{2010}'..='\u{2015}' | '−' | '⁃' => "-",
        '…' => "...",
        '°' => " deg",
        '€' => "EUR",
        '£' => "GBP",
        '¥' => "JPY",
        '₹' => "INR",
        '¢' => "c",
        '©' => "(c)",
        '®' => "(R)",
        // Letters without a decomposition.
        'ß' => "ss",
        'ẞ' => "SS",
        'æ' => "ae",
        'Æ' => "AE",
        'œ' => "oe",
        'Œ' => "OE",
        'ø' => "o",
        'Ø' => "O",
        'ł' => "l",
        'Ł' => "L",
        'đ' | 'ð' => "d",
        'Đ' | 'Ð' => "D",
        'þ' => "th",
        'Þ' => "Th",
        'ħ' => "h",
        'Ħ' => "H",
        'ı' => "i",
        'ĸ' => "k",
        'ŀ' => "l",
        'Ŀ' => "L",
        'ŧ' => "t",
        'Ŧ' => "T",
        'ŋ' => "ng",
        'Ŋ' => "NG",
        'ƒ' => "f",
        // Common symbols in agent prose.
        '×' => "x",
        '÷' | '⁄' | '∕' => "/",
        '±' => "+/-",
        '≈' => "~",
        '≠' => "!=",
        '≤' => "<=",
        '≥' => ">=",
        '→' => "->",
        '←' => "<-",
        '↔' => "<->",
        '⇒' => "=>",
        // Micro sign and Greek mu, for units like µs.
        'µ' | 'μ' => "u",
        '•' | '‣' | '◦' | '∙' => "*",
        '·' => "-",
        // Line and paragraph separators.
        '\u{2028}' | '\u{2029}' | '\u{85}' => "\n",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::fold_ascii as fold;

    #[test]
    fn ascii_is_unchanged() {
        let s = "Hello, world! 1 + 1 = 2 <ok> [x] {y} ~z~ `q` \\ |";
        assert_eq!(fold(s), s);
        assert_eq!(fold("two\nlines"), "two\nlines");
    }

    #[test]
    fn quotes_become_straight() {
        assert_eq!(
            fold("‘single’ “double” „low“ «guillemets»"),
            "'single' \"double\" \"low\" \"guillemets\""
        );
        assert_eq!(fold("it’s"), "it's");
    }

    #[test]
    fn dashes_and_ellipsis() {
        assert_eq!(fold("a–b — c − d ‐ e"), "a-b - c - d - e");
        assert_eq!(fold("wait…"), "wait...");
    }

    #[test]
    fn degree_sign() {
        assert_eq!(fold("21°C"), "21 degC");
        assert_eq!(fold("turn 90°"), "turn 90 deg");
        assert_eq!(fold("℃"), " degC");
    }

    #[test]
    fn currencies() {
        assert_eq!(fold("€5 or 5 € or £3.50"), "EUR 5 or 5 EUR or GBP 3.50");
        assert_eq!(fold("¥100, ₹20, 50¢"), "JPY 100, INR 20, 50c");
    }

    #[test]
    fn letters_without_decomposition() {
        assert_eq!(fold("Straße"), "Strasse");
        assert_eq!(fold("Æsir æble Œuvre"), "AEsir aeble OEuvre");
        assert_eq!(fold("Søren Ørsted"), "Soren Orsted");
        assert_eq!(fold("Łódź"), "Lodz");
        assert_eq!(fold("Đorđe þorn"), "Dorde thorn");
    }

    #[test]
    fn accents_and_compatibility_forms() {
        assert_eq!(
            fold("café crème naïve Ångström"),
            "cafe creme naive Angstrom"
        );
        assert_eq!(fold("ﬁle ﬂow"), "file flow");
        assert_eq!(fold("½ cup, x²"), "1/2 cup, x2");
        assert_eq!(fold("ＡＢＣ１２３"), "ABC123");
        assert_eq!(fold("e\u{301}"), "e");
        assert_eq!(fold("™"), "TM");
    }

    #[test]
    fn unicode_spaces_become_spaces() {
        assert_eq!(fold("a\u{a0}b\u{2009}c\u{3000}d\u{202f}e"), "a b c d e");
        assert_eq!(fold("a\u{2028}b"), "a\nb");
    }

    #[test]
    fn other_scripts_are_transliterated() {
        assert_eq!(fold("Привет, мир"), "Privet, mir");
        assert_eq!(fold("Ελλάδα"), "Ellada");
        assert_eq!(fold("東京 Tokyo"), "DongJing Tokyo");
        assert_eq!(fold("Київ"), "Kiiv");
        assert_eq!(fold("٣ apples"), "3 apples");
    }

    #[test]
    fn emoji_are_dropped() {
        assert_eq!(fold("ok 👍🏽 thanks"), "ok  thanks");
        assert_eq!(fold("zero\u{200b}width\u{feff}"), "zerowidth");
        assert_eq!(fold("❤️"), "");
        assert_eq!(fold("★ ☀ ✓ done"), "done");
    }

    #[test]
    fn dropped_line_start_takes_its_spaces() {
        assert_eq!(
            fold("✅ Done\n❌  Failed\nok ✅ yes"),
            "Done\nFailed\nok  yes"
        );
        assert_eq!(fold("🙂"), "");
    }

    #[test]
    fn control_characters_are_dropped() {
        assert_eq!(fold("a\tb"), "a b");
        assert_eq!(fold("a\r\nb\u{7}\u{1b}[0m\u{0}"), "a\nb[0m");
        assert_eq!(fold("x\u{9f}y"), "xy");
    }

    #[test]
    fn symbols() {
        assert_eq!(
            fold("3×4 ≈ 12 ± 1, a ≤ b ≥ c ≠ d"),
            "3x4 ~ 12 +/- 1, a <= b >= c != d"
        );
        assert_eq!(fold("A → B ⇒ C"), "A -> B => C");
        assert_eq!(fold("5 µs • item · x"), "5 us * item - x");
        assert_eq!(fold("© 2024 Acme®"), "(c) 2024 Acme(R)");
    }
}
