//! The device screen as text: one line for logs and `expect`, a box for `screenshot`.
//!
//! [`Shown`] is an owned copy of the core's [`View`], so the frontends can read it while
//! the core moves on. The one-line [`Shown::summary`] is what headless mode prints at
//! every change and what `expect` searches, so a log shows exactly what a script can
//! match. Wrapped lines are joined with spaces: the core wraps at spaces, so a sentence
//! matches whatever the width of the board it wrapped on.

use std::fmt::Write;
use std::sync::Arc;

use herald_device::{Image, Screen, View};

/// What the screen shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub screen: Screen,
    pub status: String,
    pub title: Option<String>,
    pub lines: Vec<String>,
    pub page: usize,
    pub pages: usize,
    pub notice: Option<String>,
    pub image: Option<Arc<Image>>,
}

impl Shown {
    /// A copy of `view`; the image is shared with `before` when it is the same one.
    pub fn new(view: &View<'_>, before: Option<&Shown>) -> Shown {
        let image = view
            .image
            .map(|image| match before.and_then(|b| b.image.as_ref()) {
                Some(same) if **same == *image => same.clone(),
                _ => Arc::new(image.clone()),
            });
        Shown {
            screen: view.screen,
            status: view.status.clone(),
            title: view.title.map(str::to_owned),
            lines: view.lines.clone(),
            page: view.page,
            pages: view.pages,
            notice: view.notice.map(str::to_owned),
            image,
        }
    }

    /// `screen | status | title | text | page | notice | image`, the empty parts left out.
    pub fn summary(&self) -> String {
        let mut parts = vec![self.screen.name().to_owned(), self.status.clone()];
        parts.extend(self.title.clone());
        let text = self.lines.join(" ");
        if !text.trim().is_empty() {
            parts.push(text);
        }
        if self.pages > 1 {
            parts.push(format!("page {}/{}", self.page + 1, self.pages));
        }
        if let Some(notice) = &self.notice {
            parts.push(format!("notice: {notice}"));
        }
        if let Some(image) = &self.image {
            parts.push(image_label(image));
        }
        collapse(&parts.join(" | "))
    }

    /// Whether the summary contains `text`, spaces counted loosely.
    pub fn contains(&self, text: &str) -> bool {
        self.summary().contains(&collapse(text))
    }

    /// The screen drawn in a box the size of the text area.
    pub fn screenshot(&self, cols: usize, rows: usize) -> String {
        let rule = format!("+{}+\n", "-".repeat(cols));
        let mut out = String::new();
        let _ = writeln!(out, "screen: {}", self.screen.name());
        let _ = writeln!(out, "status: {}", self.status);
        if let Some(title) = &self.title {
            let _ = writeln!(out, "title: {title}");
        }
        out.push_str(&rule);
        for row in 0..rows {
            let line = self.lines.get(row).map_or("", String::as_str);
            let _ = writeln!(out, "|{line:<cols$}|");
        }
        out.push_str(&rule);
        if self.pages > 1 {
            let _ = writeln!(out, "page: {}/{}", self.page + 1, self.pages);
        }
        if let Some(notice) = &self.notice {
            let _ = writeln!(out, "notice: {notice}");
        }
        if let Some(image) = &self.image {
            let _ = writeln!(out, "{}", image_label(image));
        }
        out
    }
}

/// `image 261x196`.
pub fn image_label(image: &Image) -> String {
    format!("image {}x{}", image.width(), image.height())
}

/// Runs of whitespace as one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown() -> Shown {
        Shown {
            screen: Screen::Card,
            status: "Card".into(),
            title: Some("Timer".into()),
            lines: vec!["Pasta: 9".into(), "min".into()],
            page: 0,
            pages: 2,
            notice: Some("Paired".into()),
            image: Some(Arc::new(Image::new(3, 2, vec![]))),
        }
    }

    #[test]
    fn the_summary_joins_wrapped_lines() {
        let s = shown();
        assert_eq!(
            s.summary(),
            "card | Card | Timer | Pasta: 9 min | page 1/2 | notice: Paired | image 3x2"
        );
        assert!(s.contains("Pasta:  9\nmin"));
        assert!(!s.contains("Pasta: 10"));
    }

    #[test]
    fn the_screenshot_is_the_text_area_in_a_box() {
        let s = shown();
        let text = s.screenshot(10, 3);
        assert_eq!(
            text,
            "screen: card\nstatus: Card\ntitle: Timer\n+----------+\n|Pasta: 9  |\n\
             |min       |\n|          |\n+----------+\npage: 1/2\nnotice: Paired\nimage 3x2\n"
        );
    }
}
