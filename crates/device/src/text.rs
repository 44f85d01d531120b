//! Text layout for the text area: word wrap to `text_cols`, pages of `text_rows` lines.
//!
//! The server already shapes text for the device (Markdown stripped, folded to the
//! charset), so layout only decides where lines break. Widths count characters, which is
//! what a fixed-width device font draws.

use alloc::string::String;
use alloc::vec::Vec;

/// Breaks `text` into lines of at most `cols` characters: at spaces where possible, inside
/// a word only when the word alone is longer than a line. Newlines start a new line; runs
/// of spaces collapse.
pub(crate) fn wrap(text: &str, cols: usize) -> Vec<String> {
    let cols = cols.max(1);
    let mut lines = Vec::new();
    for paragraph in text.trim_end().split('\n') {
        let mut line = String::new();
        let mut len = 0;
        for word in paragraph.split_whitespace() {
            let word_len = word.chars().count();
            if len > 0 && len + 1 + word_len <= cols {
                line.push(' ');
                line.push_str(word);
                len += 1 + word_len;
                continue;
            }
            if len > 0 {
                lines.push(core::mem::take(&mut line));
            }
            let mut chars = word.chars();
            let mut left = word_len;
            while left > cols {
                lines.push(chars.by_ref().take(cols).collect());
                left -= cols;
            }
            line.extend(chars);
            len = left;
        }
        lines.push(line);
    }
    if lines.len() == 1 && lines[0].is_empty() {
        lines.clear();
    }
    lines
}

/// Wrapped text and the page being shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pager {
    cols: usize,
    rows: usize,
    lines: Vec<String>,
    page: usize,
}

impl Pager {
    pub(crate) fn new(cols: usize, rows: usize) -> Pager {
        Pager {
            cols: cols.max(1),
            rows: rows.max(1),
            lines: Vec::new(),
            page: 0,
        }
    }

    /// New text, shown from its first page.
    pub(crate) fn show(&mut self, text: &str) {
        self.lines = wrap(text, self.cols);
        self.page = 0;
    }

    /// The same text grown or revised (a streaming reply): the reader stays on their page.
    pub(crate) fn update(&mut self, text: &str) {
        self.lines = wrap(text, self.cols);
        self.page = self.page.min(self.pages() - 1);
    }

    pub(crate) fn clear(&mut self) {
        self.show("");
    }

    /// Pages of text; empty text is one empty page.
    pub(crate) fn pages(&self) -> usize {
        self.lines.len().div_ceil(self.rows).max(1)
    }

    /// Index of the page shown, from 0.
    pub(crate) fn page(&self) -> usize {
        self.page
    }

    /// Moves one page back; false when already on the first.
    pub(crate) fn page_up(&mut self) -> bool {
        let moved = self.page > 0;
        self.page = self.page.saturating_sub(1);
        moved
    }

    /// Moves one page on; false when already on the last.
    pub(crate) fn page_down(&mut self) -> bool {
        let moved = self.page + 1 < self.pages();
        if moved {
            self.page += 1;
        }
        moved
    }

    /// The lines of the page shown.
    pub(crate) fn current(&self) -> &[String] {
        let start = (self.page * self.rows).min(self.lines.len());
        let end = (start + self.rows).min(self.lines.len());
        &self.lines[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(
            wrap("the quick brown fox jumps", 10),
            vec!["the quick", "brown fox", "jumps"]
        );
        assert_eq!(wrap("exactly ten", 11), vec!["exactly ten"]);
        assert_eq!(wrap("a  b\t c", 10), vec!["a b c"]);
    }

    #[test]
    fn long_words_are_cut() {
        assert_eq!(
            wrap("ab abcdefghijkl cd", 5),
            vec!["ab", "abcde", "fghij", "kl cd"]
        );
        assert_eq!(wrap("abcdefghij", 5), vec!["abcde", "fghij"]);
    }

    #[test]
    fn counts_characters_not_bytes() {
        assert_eq!(wrap("éééé ééé", 4), vec!["éééé", "ééé"]);
    }

    #[test]
    fn newlines_break_and_blank_lines_stay() {
        assert_eq!(wrap("one\n\ntwo\n", 10), vec!["one", "", "two"]);
        assert!(wrap("", 10).is_empty());
        assert!(wrap("  \n ", 10).is_empty());
    }

    #[test]
    fn pages_move_and_clamp() {
        let mut p = Pager::new(5, 2);
        p.show("aa bb cc dd ee");
        assert_eq!(p.pages(), 2);
        assert_eq!(p.current(), ["aa bb", "cc dd"]);
        assert!(!p.page_up());
        assert!(p.page_down());
        assert_eq!(p.current(), ["ee"]);
        assert!(!p.page_down());
        // A growing reply keeps the reader's page.
        p.update("aa bb cc dd ee ff gg hh ii");
        assert_eq!((p.page(), p.pages()), (1, 3));
        assert_eq!(p.current(), ["ee ff", "gg hh"]);
        // A shrinking one clamps it.
        p.update("aa");
        assert_eq!((p.page(), p.pages()), (0, 1));
        assert_eq!(p.current(), ["aa"]);
        // New text starts at the top.
        p.update("aa bb cc dd ee");
        p.page_down();
        p.show("aa bb cc dd ee");
        assert_eq!(p.page(), 0);
        p.clear();
        assert_eq!((p.pages(), p.current().len()), (1, 0));
    }
}
