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

/// Tells the agent's replies from the screens that show them: a reply is the text of
/// the responding screen, growing as it streams, and final on the ready screen after it.
#[derive(Debug, Default)]
pub struct Replies {
    /// The last reply is still being written.
    open: bool,
}

/// What a screen did to the list of replies.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// A new reply.
    New(String),
    /// The last reply, longer now.
    Grew(String),
}

/// Replies kept in [`crate::runner::Snapshot::replies`].
pub const REPLIES_KEPT: usize = 8;

impl Replies {
    /// Takes note of what the screen shows now (call it for every screen shown).
    pub fn observe(&mut self, shown: &Shown) -> Option<Reply> {
        let text = shown.lines.join(" ").trim().to_owned();
        let replying = shown.screen == Screen::Responding;
        let finishing = shown.screen == Screen::Ready && self.open;
        let open = std::mem::replace(&mut self.open, replying);
        if !(replying || finishing) || text.is_empty() {
            return None;
        }
        Some(if open {
            Reply::Grew(text)
        } else {
            Reply::New(text)
        })
    }
}

impl Reply {
    /// Applies this to `replies`, keeping the last [`REPLIES_KEPT`].
    pub fn apply(self, replies: &mut std::collections::VecDeque<String>) {
        match self {
            Reply::Grew(text) if !replies.is_empty() => {
                if let Some(last) = replies.back_mut() {
                    *last = text;
                }
            }
            Reply::Grew(text) | Reply::New(text) => {
                replies.push_back(text);
                if replies.len() > REPLIES_KEPT {
                    replies.pop_front();
                }
            }
        }
    }
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

    #[test]
    fn a_streamed_reply_is_kept_once_with_its_final_text() {
        let shown = |screen, text: &str| Shown {
            screen,
            status: String::new(),
            title: None,
            lines: text.split('\n').map(str::to_owned).collect(),
            page: 0,
            pages: 1,
            notice: None,
            image: None,
        };
        let mut replies = Replies::default();
        let mut kept = std::collections::VecDeque::new();
        let mut show = |screen, text: &str, kept: &mut std::collections::VecDeque<String>| {
            if let Some(reply) = replies.observe(&shown(screen, text)) {
                reply.apply(kept);
            }
        };
        show(Screen::Thinking, "hello", &mut kept);
        show(Screen::Responding, "You said:", &mut kept);
        show(Screen::Responding, "You said:\nhello", &mut kept);
        show(Screen::Ready, "You said:\nhello there", &mut kept);
        show(Screen::Ready, "You said:\nhello there", &mut kept);
        show(Screen::Responding, "Second", &mut kept);
        show(Screen::Offline, "No connection.", &mut kept);
        assert_eq!(kept, ["You said: hello there", "Second"]);
        for n in 0..20 {
            show(Screen::Responding, &format!("reply {n}"), &mut kept);
            show(Screen::Ready, &format!("reply {n}"), &mut kept);
        }
        assert_eq!(kept.len(), REPLIES_KEPT);
        assert_eq!(kept.back().map(String::as_str), Some("reply 19"));
    }
}
