//! The gadget side of an admitted connection: one task reads decoded frames into the
//! device's session and writes its outbox (the writing of a frame is shared, see
//! [`crate::socket`]).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use herald_gadget_proto::{limits, DeviceMessage};
use herald_port::Platform;
use herald_session::io::Close;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{sleep, Sleep};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info};

use super::session::Event;
use crate::metrics::Metrics;
use crate::queue::{self, TrySendError};
use crate::socket::{self, Outgoing, SendQueueReader, CLOSE_GRACE};

/// One admitted connection: frames from the device go to its session, frames from the
/// session's outbox go to the device. One task does both, since an idle gadget's cost is
/// mostly its tasks; while it waits for room in the session's mailbox it keeps writing,
/// so a session waiting for room in the outbox is never stuck on it.
///
/// The task's size is fixed when it is spawned, and an idle gadget should pay only for
/// the wait: the connection is boxed (arguments of an async fn are kept beside its
/// state), and everything else the task does is boxed as it happens (writing a frame,
/// waiting on a full mailbox, the goodbyes).
pub(crate) struct Link<S> {
    ws: WebSocketStream<S>,
    conn: u64,
    session: queue::Sender<Event>,
    outbox: SendQueueReader,
    metrics: Arc<Metrics>,
    /// Set once the writing is over: the device has until then to close in turn.
    closing: Option<Pin<Box<Sleep>>>,
    peer: SocketAddr,
    device_id: String,
}

/// What a frame from the device leads to.
enum Step {
    Deliver {
        event: Event,
        fatal: bool,
    },
    /// The device closed: read on, so the library sends its close reply.
    CloseReply,
    End,
}

impl<S> Link<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    pub(crate) fn new(
        ws: WebSocketStream<S>,
        conn: u64,
        session: queue::Sender<Event>,
        outbox: SendQueueReader,
        metrics: Arc<Metrics>,
        peer: SocketAddr,
        device_id: String,
    ) -> Box<Self> {
        Box::new(Link {
            ws,
            conn,
            session,
            outbox,
            metrics,
            closing: None,
            peer,
            device_id,
        })
    }

    /// Carry the connection until it ends, then tell the session.
    pub(crate) async fn serve(mut self: Box<Self>) {
        loop {
            let next = tokio::select! {
                out = self.outbox.recv(), if self.closing.is_none() => {
                    Box::pin(self.write(out)).await;
                    continue;
                }
                () = until(&mut self.closing) => break,
                next = self.ws.next() => next,
            };
            match self.step(next) {
                Step::Deliver { event, fatal } => {
                    let delivered = match self.session.try_send(event) {
                        Ok(()) => true,
                        Err(TrySendError::Closed(_)) => false,
                        Err(TrySendError::Full(event)) => Box::pin(self.forward(event)).await,
                    };
                    if !delivered {
                        break;
                    }
                    if fatal {
                        // The session's error frame and close go out, within the grace.
                        let _ = Box::pin(tokio::time::timeout(CLOSE_GRACE, self.drain())).await;
                        break;
                    }
                }
                Step::CloseReply => {
                    let _ = Box::pin(tokio::time::timeout(CLOSE_GRACE, self.ws.next())).await;
                    break;
                }
                Step::End => break,
            }
        }
        let Link {
            ws,
            conn,
            session,
            outbox,
            peer,
            device_id,
            ..
        } = *self;
        // The session may be waiting for room in the outbox: closing it lets the
        // session go on to read its mailbox, where `Closed` waits.
        drop((ws, outbox));
        let _ = session.send(Event::Closed { conn }).await;
        info!(%peer, device = %device_id, "gadget disconnected");
    }

    fn step(&self, next: Option<Result<Message, tungstenite::Error>>) -> Step {
        let conn = self.conn;
        let traffic = &self.metrics.gadget;
        let deliver = |event| Step::Deliver {
            event,
            fatal: false,
        };
        match next {
            Some(Ok(Message::Text(text))) => {
                traffic.inbound(text.len());
                deliver(match DeviceMessage::decode(&text) {
                    Ok(msg) => Event::Frame {
                        conn,
                        msg: Box::new(msg),
                    },
                    Err(err) => Event::BadFrame {
                        conn,
                        reason: err.to_string(),
                        close: None,
                    },
                })
            }
            Some(Ok(Message::Binary(data))) => {
                traffic.inbound(data.len());
                deliver(Event::Binary {
                    conn,
                    data: data.into(),
                })
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                deliver(Event::Alive { conn })
            }
            Some(Ok(Message::Close(_))) => Step::CloseReply,
            None => Step::End,
            // The stream cannot go on after these; the device hears why, with the close
            // code RFC 6455 gives for each.
            Some(Err(tungstenite::Error::Capacity(_))) => Step::Deliver {
                event: Event::BadFrame {
                    conn,
                    reason: format!("frames are limited to {} bytes", limits::MAX_INBOUND_FRAME),
                    close: Some(Close::TooBig),
                },
                fatal: true,
            },
            Some(Err(tungstenite::Error::Utf8(_))) => Step::Deliver {
                event: Event::BadFrame {
                    conn,
                    reason: "a text frame that is not UTF-8".into(),
                    close: Some(Close::Invalid),
                },
                fatal: true,
            },
            Some(Err(err)) => {
                debug!(%err, "gadget read failed");
                Step::End
            }
        }
    }

    /// Write what the outbox gave; when that ends the writing, start the goodbye.
    async fn write(&mut self, out: Option<Outgoing>) {
        let open = match out {
            Some(out) => {
                socket::write_frame(
                    &mut self.ws,
                    out,
                    &self.outbox,
                    &self.metrics,
                    Platform::Gadget,
                )
                .await
            }
            None => false,
        };
        if !open {
            self.closing = Some(Box::pin(sleep(CLOSE_GRACE)));
        }
    }

    /// Wait for room in a full mailbox, writing what the outbox has meanwhile; false
    /// when the session is gone.
    async fn forward(&mut self, event: Event) -> bool {
        let session = self.session.clone();
        let send = session.send(event);
        tokio::pin!(send);
        loop {
            tokio::select! {
                sent = &mut send => return sent.is_ok(),
                out = self.outbox.recv(), if self.closing.is_none() => self.write(out).await,
            }
        }
    }

    /// Write the outbox until the writing ends.
    async fn drain(&mut self) {
        while self.closing.is_none() {
            let out = self.outbox.recv().await;
            self.write(out).await;
        }
    }
}

/// Done when `deadline` passes; never, without one.
async fn until(deadline: &mut Option<Pin<Box<Sleep>>>) {
    match deadline {
        Some(sleep) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::SinkExt;
    use herald_gadget_proto::common::Ping;
    use tokio::time::timeout;
    use tokio_tungstenite::tungstenite::protocol::Role;

    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn ping(ts: u64) -> Message {
        Message::Text(DeviceMessage::Ping(Ping { ts: Some(ts) }).encode().into())
    }

    /// The stalled-session case: while the link waits for room in a full mailbox, what
    /// the session queued still reaches the device, and the device's frames reach the
    /// session, in order, once it reads again.
    #[tokio::test]
    async fn a_full_mailbox_does_not_stop_the_writing() {
        let (server, device) = tokio::io::duplex(64 * 1024);
        let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let mut device = WebSocketStream::from_raw_socket(device, Role::Client, None).await;
        let (mailbox, mut session) = queue::channel::<Event>(1);
        let (outbox, reader) = socket::send_queue();
        let peer = "127.0.0.1:9".parse().unwrap();
        let metrics = Arc::new(Metrics::default());
        let link = Link::new(server, 7, mailbox, reader, metrics, peer, "hg-1".into());
        let serving = tokio::spawn(link.serve());

        // The first fills the mailbox; the link holds the second until there is room.
        device.send(ping(1)).await.unwrap();
        device.send(ping(2)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        outbox
            .send(Outgoing::Text("while the session is busy".into()))
            .await
            .unwrap();
        let written = timeout(WAIT, device.next()).await.unwrap();
        assert!(
            matches!(&written, Some(Ok(Message::Text(t))) if t.as_str() == "while the session is busy"),
            "{written:?}"
        );

        for ts in [1, 2] {
            let event = timeout(WAIT, session.recv()).await.unwrap();
            assert!(
                matches!(&event, Some(Event::Frame { conn: 7, msg })
                    if matches!(**msg, DeviceMessage::Ping(Ping { ts: Some(t) }) if t == ts)),
                "ping {ts} is not the next event"
            );
        }
        drop(device);
        let closed = timeout(WAIT, session.recv()).await.unwrap();
        assert!(
            matches!(closed, Some(Event::Closed { conn: 7 })),
            "the session hears that the connection ended"
        );
        timeout(WAIT, serving).await.unwrap().unwrap();
    }
}
