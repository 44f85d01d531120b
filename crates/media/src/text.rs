//! Text shaping: what an agent writes, turned into what a tiny screen can show.
//!
//! Agents answer in Markdown, sometimes with hidden reasoning, emoji and typographic
//! punctuation. A gadget shows about 25 columns by 8 rows and may only have an ASCII font, so
//! every text the server sends it (reply, streaming preview, status, prompt, card) goes
//! through [`shape_reply`]:
//!
//! 1. [`strip_markdown`] removes markup but keeps the words a reader needs;
//! 2. [`fold_ascii`], only for `charset: "ascii"` devices, replaces what the font cannot draw;
//! 3. [`collapse_whitespace`] removes the blank space the first two steps leave behind.
//!
//! Each step is one linear scan with no regex and no syntax tree: shaping runs on every
//! cumulative `reply.delta`, so its cost is paid many times per reply. None of it can panic,
//! whatever the input (see the exhaustive and property tests at the bottom of this file).

mod ascii;
mod markdown;

pub use ascii::fold_ascii;
pub use markdown::strip_markdown;

/// The character repertoire a device's font can draw, from `hello.caps.display.charset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Charset {
    /// Any Unicode text; the device's font copes or shows a placeholder.
    #[default]
    Utf8,
    /// Printable ASCII and newlines only: the server folds everything else.
    Ascii,
}

impl Charset {
    /// Reads the advertised charset; anything but `"ascii"` (in any case) means UTF-8, since
    /// that is what the protocol assumes when a device says nothing.
    pub fn from_caps(charset: Option<&str>) -> Charset {
        match charset {
            Some(name) if name.eq_ignore_ascii_case("ascii") => Charset::Ascii,
            _ => Charset::Utf8,
        }
    }
}

/// Shapes any text bound for a gadget screen: Markdown stripped, folded to `charset`,
/// whitespace tidied. Safe on partial (streamed) Markdown and on arbitrary input.
pub fn shape_reply(input: &str, charset: Charset) -> String {
    let plain = strip_markdown(input);
    let folded = match charset {
        Charset::Ascii => fold_ascii(&plain),
        Charset::Utf8 => plain,
    };
    collapse_whitespace(&folded)
}

/// Tidies whitespace for a screen where every cell counts.
///
/// Runs of spaces and tabs become one space (a leading run too, so nested list items and code
/// keep a one-space hint of their indentation), trailing spaces go, two or more blank lines
/// become one, and blank lines at either end go. Carriage returns and other control
/// characters are dropped as well: no gadget font draws them and CRLF input is common.
pub fn collapse_whitespace(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    // Line breaks seen since the last visible character; written lazily so that trailing
    // spaces and blank lines at the end never reach the output.
    let mut breaks = 0usize;
    let mut space = false;
    for c in input.chars() {
        match c {
            '\n' => {
                breaks += 1;
                space = false;
            }
            ' ' | '\t' => space = true,
            c if c.is_control() => {}
            c => {
                if !out.is_empty() {
                    for _ in 0..breaks.min(2) {
                        out.push('\n');
                    }
                }
                if space {
                    out.push(' ');
                }
                breaks = 0;
                space = false;
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn charset_from_caps() {
        assert_eq!(Charset::from_caps(Some("ascii")), Charset::Ascii);
        assert_eq!(Charset::from_caps(Some("ASCII")), Charset::Ascii);
        assert_eq!(Charset::from_caps(Some("Ascii")), Charset::Ascii);
        assert_eq!(Charset::from_caps(Some("utf8")), Charset::Utf8);
        assert_eq!(Charset::from_caps(Some("utf-8")), Charset::Utf8);
        assert_eq!(Charset::from_caps(Some("")), Charset::Utf8);
        assert_eq!(Charset::from_caps(Some("ascii7")), Charset::Utf8);
        assert_eq!(Charset::from_caps(None), Charset::Utf8);
        assert_eq!(Charset::default(), Charset::Utf8);
    }

    #[test]
    fn collapse_runs_of_spaces_and_tabs() {
        assert_eq!(collapse_whitespace("a  b\t\tc \t d"), "a b c d");
        assert_eq!(collapse_whitespace("    indented"), " indented");
    }

    #[test]
    fn collapse_trims_line_ends() {
        assert_eq!(collapse_whitespace("a  \nb\t\n"), "a\nb");
    }

    #[test]
    fn collapse_blank_lines() {
        assert_eq!(collapse_whitespace("a\n\n\n\nb"), "a\n\nb");
        assert_eq!(collapse_whitespace("a\n  \n\t\n \nb"), "a\n\nb");
        assert_eq!(collapse_whitespace("a\n\nb"), "a\n\nb");
        assert_eq!(collapse_whitespace("a\nb"), "a\nb");
    }

    #[test]
    fn collapse_removes_outer_blank_lines() {
        assert_eq!(collapse_whitespace("\n\n  \nhello\n\n \n"), "hello");
        assert_eq!(collapse_whitespace(""), "");
        assert_eq!(collapse_whitespace(" \n\t\n"), "");
    }

    #[test]
    fn collapse_drops_control_characters() {
        assert_eq!(collapse_whitespace("a\r\nb\r\n"), "a\nb");
        assert_eq!(collapse_whitespace("x\u{7}y\u{1b}z"), "xyz");
    }

    #[test]
    fn collapse_keeps_unicode_text() {
        assert_eq!(collapse_whitespace("héllo  wörld 🙂"), "héllo wörld 🙂");
    }

    #[test]
    fn shape_reply_plain_and_ascii() {
        let md = "## Café\n\n**Température** : 21°C — *agréable*";
        assert_eq!(
            shape_reply(md, Charset::Utf8),
            "Café\n\nTempérature : 21°C — agréable"
        );
        assert_eq!(
            shape_reply(md, Charset::Ascii),
            "Cafe\n\nTemperature : 21 degC - agreable"
        );
    }

    #[test]
    fn shape_reply_hides_reasoning_while_streaming() {
        assert_eq!(shape_reply("<think>The user wants", Charset::Utf8), "");
        assert_eq!(
            shape_reply("<think>plan</think>\n\nSure! 🙂", Charset::Ascii),
            "Sure!"
        );
    }

    #[test]
    fn shape_reply_realistic_agent_reply() {
        let reply =
            "<think>\nThe user asks about the weather and a timer.\nLet me check.\n</think>\n\
\n\
# Weather in Zürich 🌤️\n\
\n\
Right now it’s **14°C** and _partly cloudy_ — see [MeteoSwiss](https://www.meteoswiss.admin.ch).\n\
\n\
---\n\
\n\
## Today\n\
\n\
| Time | Temp | Rain |\n\
|:-----|-----:|:----:|\n\
| 09:00 | 12°C | 10% |\n\
| 15:00 | 17°C | 40% |\n\
\n\
> **Tip:** take an umbrella… just in case.\n\
\n\
Things I did:\n\
1. Set a timer with `timer.set` for 9 min\n\
2. Saved the note to `~/notes/pasta_night.md`\n\
\n\
- ~~Cancelled~~ the old alarm\n  * Snoozed ***twice***\n\
\n\
```bash\n\
herald timer list --json\n\
```\n\
\n\
Cost: 2 * 3 = 6 €, i.e. €6.<br>Done ✅";

        let utf8 = shape_reply(reply, Charset::Utf8);
        assert_eq!(
            utf8,
            "Weather in Zürich 🌤️\n\
\n\
Right now it’s 14°C and partly cloudy — see MeteoSwiss.\n\
\n\
Today\n\
\n\
Time - Temp - Rain\n\
09:00 - 12°C - 10%\n\
15:00 - 17°C - 40%\n\
\n\
Tip: take an umbrella… just in case.\n\
\n\
Things I did:\n\
1. Set a timer with timer.set for 9 min\n\
2. Saved the note to ~/notes/pasta_night.md\n\
\n\
* Cancelled the old alarm\n \
* Snoozed twice\n\
\n\
herald timer list --json\n\
\n\
Cost: 2 * 3 = 6 €, i.e. €6.\n\
Done ✅"
        );

        let ascii = shape_reply(reply, Charset::Ascii);
        assert_eq!(
            ascii,
            "Weather in Zurich\n\
\n\
Right now it's 14 degC and partly cloudy - see MeteoSwiss.\n\
\n\
Today\n\
\n\
Time - Temp - Rain\n\
09:00 - 12 degC - 10%\n\
15:00 - 17 degC - 40%\n\
\n\
Tip: take an umbrella... just in case.\n\
\n\
Things I did:\n\
1. Set a timer with timer.set for 9 min\n\
2. Saved the note to ~/notes/pasta_night.md\n\
\n\
* Cancelled the old alarm\n \
* Snoozed twice\n\
\n\
herald timer list --json\n\
\n\
Cost: 2 * 3 = 6 EUR, i.e. EUR 6.\n\
Done"
        );
        assert!(ascii.is_ascii());
    }

    /// Small pieces that each open or close some construct; every string of up to four of
    /// them is shaped, so every unbalanced combination and every position of a multi-byte
    /// character is covered.
    const PIECES: &[&str] = &[
        "*", "_", "`", "[", "]", "(", ")", "](", "<", ">", "!", "\\", "~~", "#", "|", "-", " ",
        "\n", "&", ";", "é", "🙂", "a", "<think>", "```",
    ];

    #[test]
    fn never_panics_on_short_combinations() {
        let n = PIECES.len();
        for len in 0..=4u32 {
            for mut code in 0..n.pow(len) {
                let mut s = String::new();
                for _ in 0..len {
                    s.push_str(PIECES[code % n]);
                    code /= n;
                }
                let ascii = shape_reply(&s, Charset::Ascii);
                assert!(ascii.is_ascii(), "{s:?} -> {ascii:?}");
                let _ = shape_reply(&s, Charset::Utf8);
            }
        }
    }

    #[test]
    fn never_panics_with_multibyte_at_every_position() {
        let samples = [
            "**bold** and `code` and [link](http://x.y/z) ![img](a.png) <br> \\* ~~s~~ _i_",
            "| a | b |\n|---|---|\n| `c|d` | &amp;&#233;&#x1F600; |",
            "> # quoted heading\n> - item\n```rs\nfn main() {}\n",
            "[unclosed](http://example.com \"title [x]\" <a@b.c> <http://q> &nbsp",
        ];
        for sample in samples {
            for insert in ["é", "🙂", "ß", "\u{301}", "\u{a0}"] {
                for (i, _) in sample.char_indices() {
                    let mut s = String::from(sample);
                    s.insert_str(i, insert);
                    assert!(shape_reply(&s, Charset::Ascii).is_ascii());
                    let _ = shape_reply(&s, Charset::Utf8);
                }
            }
        }
    }

    #[test]
    fn hostile_inputs_stay_linear() {
        // Each of these would be quadratic with naive rescanning. Twenty runs of an input
        // against one run of twenty times that input: the same work when the cost is
        // linear, twenty times more when it is quadratic. Both sides last as long, so
        // a loaded machine that preempts one preempts the other alike (a short side
        // against a long one would read the load as a superlinear cost).
        let fastest = |runs: usize, s: &str| {
            (0..5)
                .map(|_| {
                    let started = std::time::Instant::now();
                    for _ in 0..runs {
                        let _ = shape_reply(s, Charset::Ascii);
                    }
                    started.elapsed()
                })
                .min()
                .unwrap_or_default()
        };
        for unit in [
            "[", "[a](", "`", "``` ", "<", "*a ", "_a ", "&#", "[a]((", "![", "<a ",
        ] {
            let small = fastest(20, &unit.repeat(10_000 / unit.len()));
            let large = fastest(1, &unit.repeat(200_000 / unit.len()));
            let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
            assert!(
                ratio < 4.0,
                "{unit:?}: 20x the input took {:.0}x the time",
                ratio * 20.0
            );
        }
    }

    proptest! {
        #[test]
        fn shape_reply_is_total_and_clean(s in "[*_`\\[\\]()<>!\\\\~#|\\-+>:. \n\ta-z0-9&;éß🙂\u{a0}\u{2019}]{0,120}") {
            let ascii = shape_reply(&s, Charset::Ascii);
            prop_assert!(ascii.is_ascii());
            for out in [ascii, shape_reply(&s, Charset::Utf8)] {
                prop_assert!(!out.contains("\n\n\n"));
                prop_assert!(!out.starts_with('\n') && !out.ends_with('\n'));
                prop_assert!(out.lines().all(|l| !l.ends_with(' ')));
                prop_assert!(!out.contains("  "));
            }
        }

        #[test]
        fn collapse_and_fold_are_idempotent(s in "\\PC{0,80}") {
            let once = collapse_whitespace(&s);
            prop_assert_eq!(collapse_whitespace(&once), once.clone());
            let folded = fold_ascii(&s);
            prop_assert!(folded.is_ascii());
            prop_assert_eq!(fold_ascii(&folded), folded.clone());
        }

        #[test]
        fn arbitrary_unicode_never_panics(s in any::<String>()) {
            let _ = shape_reply(&s, Charset::Utf8);
            prop_assert!(shape_reply(&s, Charset::Ascii).is_ascii());
        }
    }
}
