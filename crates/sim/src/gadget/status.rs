//! What `herald gadget status` reports: the device's state from the runner's snapshot,
//! the outputs, and the last replies the agent gave (kept from the screen, as a person
//! standing by the device would have read them).

use std::collections::VecDeque;
use std::sync::Mutex;

use herald_device::Screen;
use serde_json::{json, Value};

use crate::render::Shown;
use crate::runner::Snapshot;

/// Replies kept.
pub const REPLIES_KEPT: usize = 8;

/// Shared between the service's tasks and the control socket.
#[derive(Debug, Default)]
pub struct Status {
    replies: Mutex<Replies>,
    outputs: Mutex<Vec<(String, bool)>>,
}

#[derive(Debug, Default)]
struct Replies {
    kept: VecDeque<String>,
    /// The last reply is still being written (streamed, or shown while paged).
    open: bool,
}

impl Replies {
    fn observe(&mut self, shown: &Shown) {
        let text = shown.lines.join(" ").trim().to_owned();
        let replying = shown.screen == Screen::Responding;
        let finishing = shown.screen == Screen::Ready && self.open;
        if (replying || finishing) && !text.is_empty() {
            if self.open {
                if let Some(last) = self.kept.back_mut() {
                    *last = text;
                }
            } else {
                self.kept.push_back(text);
                if self.kept.len() > REPLIES_KEPT {
                    self.kept.pop_front();
                }
            }
        }
        self.open = replying;
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere leaves plain data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Status {
    /// Takes note of what the device shows now.
    pub fn observe(&self, shown: &Shown) {
        locked(&self.replies).observe(shown);
    }

    pub fn set_outputs(&self, outputs: Vec<(String, bool)>) {
        *locked(&self.outputs) = outputs;
    }

    pub fn replies(&self) -> Vec<String> {
        locked(&self.replies).kept.iter().cloned().collect()
    }

    /// The answer to a `status` request.
    pub fn to_json(&self, snapshot: &Snapshot) -> Value {
        let outputs: serde_json::Map<String, Value> = locked(&self.outputs)
            .iter()
            .map(|(name, on)| (name.clone(), Value::Bool(*on)))
            .collect();
        json!({
            "device_id": snapshot.device_id,
            "version": snapshot.firmware,
            "phase": snapshot.phase.name(),
            "paired": snapshot.paired,
            "screen": snapshot.shown.screen.name(),
            "shows": snapshot.shown.summary(),
            "recording": snapshot.recording,
            "note": snapshot.note,
            "outputs": outputs,
            "replies": self.replies(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(screen: Screen, text: &str) -> Shown {
        Shown {
            screen,
            status: String::new(),
            title: None,
            lines: text.split('\n').map(str::to_owned).collect(),
            page: 0,
            pages: 1,
            notice: None,
            image: None,
        }
    }

    #[test]
    fn a_streamed_reply_is_kept_once_with_its_final_text() {
        let status = Status::default();
        status.observe(&shown(Screen::Thinking, ""));
        status.observe(&shown(Screen::Responding, "You said:"));
        status.observe(&shown(Screen::Responding, "You said:\nhello"));
        status.observe(&shown(Screen::Ready, "You said:\nhello there"));
        status.observe(&shown(Screen::Ready, "You said:\nhello there"));
        assert_eq!(status.replies(), vec!["You said: hello there"]);
        status.observe(&shown(Screen::Responding, "Second"));
        status.observe(&shown(Screen::Offline, "No connection."));
        assert_eq!(status.replies(), vec!["You said: hello there", "Second"]);
        for n in 0..20 {
            status.observe(&shown(Screen::Responding, &format!("reply {n}")));
            status.observe(&shown(Screen::Ready, &format!("reply {n}")));
        }
        let replies = status.replies();
        assert_eq!(replies.len(), REPLIES_KEPT);
        assert_eq!(replies.last().map(String::as_str), Some("reply 19"));
    }
}
