//! What the shells of both platforms share around their session core: the outboxes the
//! shell writes a core's frames to ([`Outboxes`]), and when a session next has work.

use std::time::Duration;

use herald_session::io::{Close, Frame, Transmit};
use herald_session::SessionCore;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::socket::{Outgoing, SendQueue};
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
            let _ = outbox.send(outgoing(transmit.frame)).await;
        }
    }

    /// Write every frame `core` handed back, in order.
    pub(crate) async fn flush(&self, core: &mut impl SessionCore) {
        while let Some(transmit) = core.poll_transmit() {
            self.send(transmit).await;
        }
    }

    /// The core's output is written: the replaced outbox goes, and so does the current
    /// one once the core says its connection ended.
    pub(crate) fn settled(&mut self, core: &impl SessionCore) {
        self.replaced = None;
        self.current.take_if(|(conn, _)| !core.is_current(*conn));
    }
}

/// A core's frame as the WebSocket writes it.
pub(crate) fn outgoing(frame: Frame) -> Outgoing {
    match frame {
        Frame::Text(text) => Outgoing::Text(text),
        Frame::Close(close, reason) => Outgoing::Close(close_code(close), reason),
    }
}

/// The WebSocket close code for a core's reason to close.
pub(crate) fn close_code(close: Close) -> CloseCode {
    match close {
        Close::Normal => CloseCode::Normal,
        Close::Away => CloseCode::Away,
        Close::TooBig => CloseCode::Size,
        Close::Invalid => CloseCode::Invalid,
        Close::Policy => CloseCode::Policy,
    }
}

/// When an idle session ends: nothing open in its core, and quiet for `after` since
/// `last_event`, so devices that never come back do not keep a session each.
pub(crate) fn retire_at(
    core: &impl SessionCore,
    last_event: Instant,
    after: Duration,
) -> Option<Instant> {
    core.is_idle().then(|| last_event + after)
}

/// The session's next wake-up: the core's next timer or its retirement.
pub(crate) fn next_deadline(
    core: &impl SessionCore,
    retire_at: Option<Instant>,
) -> Option<Instant> {
    [core.poll_timeout().map(Instant::from_std), retire_at]
        .into_iter()
        .flatten()
        .min()
}
