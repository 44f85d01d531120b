//! What the sessions of both platforms share between their sans-IO core and its shell:
//! the frames a core hands back ([`Transmit`]), the queue it keeps them and its effects
//! in ([`Queue`]), and the outboxes the shell writes the frames to ([`Outboxes`]).

use std::collections::VecDeque;

use crate::socket::{Outgoing, SendQueue};

/// A frame for connection `conn`: the current one, or the one a new connection
/// replaced, for its close.
pub(crate) struct Transmit {
    pub conn: u64,
    pub frame: Outgoing,
}

/// A core's queue of frames or effects, first in first out. Drained, it gives its room
/// back, so an idle session holds no buffer.
pub(crate) struct Queue<T>(VecDeque<T>);

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue(VecDeque::new())
    }
}

impl<T> Queue<T> {
    pub(crate) fn push(&mut self, item: T) {
        self.0.push_back(item);
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        let next = self.0.pop_front();
        if next.is_none() {
            self.0 = VecDeque::new();
        }
        next
    }
}

/// The outbox of a session's connection, and until the shell has settled the core's
/// output, the one a new connection replaced (it still gets its close).
#[derive(Default)]
pub(crate) struct Outboxes {
    current: Option<(u64, SendQueue)>,
    replaced: Option<(u64, SendQueue)>,
}

impl Outboxes {
    /// Connection `conn` takes over.
    pub(crate) fn attach(&mut self, conn: u64, outbox: SendQueue) {
        self.replaced = self.current.replace((conn, outbox));
    }

    pub(crate) fn current(&self) -> Option<(u64, &SendQueue)> {
        self.current.as_ref().map(|(conn, outbox)| (*conn, outbox))
    }

    /// Write a frame to its connection's outbox; one whose connection is gone is dropped.
    pub(crate) async fn send(&self, transmit: Transmit) {
        let outbox = [&self.current, &self.replaced]
            .into_iter()
            .flatten()
            .find(|(conn, _)| *conn == transmit.conn);
        if let Some((_, outbox)) = outbox {
            // A full outbox makes the session wait: backpressure, not a growing buffer.
            let _ = outbox.send(transmit.frame).await;
        }
    }

    /// The core's output is written: the replaced outbox goes, and so does the current
    /// one once `is_current` says its connection ended.
    pub(crate) fn settled(&mut self, is_current: impl Fn(u64) -> bool) {
        self.replaced = None;
        self.current.take_if(|(conn, _)| !is_current(*conn));
    }
}

/// The frames a core handed back, as JSON for tests; a close is
/// `{"close": reason, "conn": id}`.
#[cfg(test)]
pub(crate) fn sent(transmits: impl Iterator<Item = Transmit>) -> Vec<serde_json::Value> {
    transmits
        .map(|t| match t.frame {
            Outgoing::Text(text) => serde_json::from_str(&text).unwrap(),
            Outgoing::Close(_, reason) => serde_json::json!({"close": reason, "conn": t.conn}),
            Outgoing::Binary(_) | Outgoing::Ping => serde_json::json!({"binary": true}),
        })
        .collect()
}
