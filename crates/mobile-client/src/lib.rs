//! A reconnecting client for the mobile protocol, for Rust apps, tools and tests.
//!
//! [`Client::spawn`] runs one background task that connects, says `hello`, waits for
//! `ready`, and then shuttles frames both ways. When the connection drops it reconnects
//! with exponential backoff (reset by every successful `ready`), keeping frames sent in
//! the meantime in a bounded queue. A close with 1008 means "no access": the client
//! reports [`Event::Denied`] and stops instead of hammering the server.
//!
//! Message ids are the caller's: resend with the same id after a drop and the server
//! drops the duplicate.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use herald_mobile_proto::{
    encode_base64, media_pieces, ClientFrame, DecodeError, DeviceInfo, Hello, MediaKind, MediaUp,
    ServerFrame,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tracing::debug;

/// Frames kept while disconnected; older ones are dropped first.
const QUEUE: usize = 256;
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Exponential backoff between reconnection attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait before attempt `n` (0-based) after a failure.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(16));
        self.initial.saturating_mul(factor).min(self.max)
    }
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `ws://host:port/path` or `wss://...`.
    pub url: String,
    pub token: String,
    pub device: DeviceInfo,
    pub backoff: Backoff,
}

/// What happens on the connection, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `ready` arrived: the session is `mobile:<device.id>`.
    Connected { session: String },
    /// Any frame after `ready` (messages, cards, media, errors, ...).
    Frame(ServerFrame),
    /// The connection ended; the client tries again after `retry_in`.
    Disconnected { reason: String, retry_in: Duration },
    /// Access denied (close 1008): the client has stopped.
    Denied { reason: String },
    /// Trying again cannot help (a URL that is not a phone endpoint, say): the client
    /// has stopped.
    Failed { reason: String },
}

/// The client has stopped (denied, or dropped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the client has stopped")]
pub struct Stopped;

pub struct Client {
    frames: mpsc::Sender<ClientFrame>,
    events: mpsc::Receiver<Event>,
    task: JoinHandle<()>,
}

impl Client {
    /// Start connecting in the background.
    pub fn spawn(config: ClientConfig) -> Client {
        let (frames, frames_rx) = mpsc::channel(QUEUE);
        let (events_tx, events) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(config, frames_rx, events_tx));
        Client {
            frames,
            events,
            task,
        }
    }

    /// Send a frame now, or as soon as the client is connected again.
    pub async fn send(&self, frame: ClientFrame) -> Result<(), Stopped> {
        self.frames.send(frame).await.map_err(|_| Stopped)
    }

    /// The next event; `None` once the client has stopped and all events were read.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The frames that upload `bytes` as one file: a single frame, or chunks of
/// [`herald_mobile_proto::limits::MEDIA_CHUNK_BYTES`] that share `id`.
pub fn media_frames(
    id: &str,
    kind: MediaKind,
    mime: Option<String>,
    filename: Option<String>,
    caption: Option<String>,
    bytes: &[u8],
) -> Vec<ClientFrame> {
    let pieces = media_pieces(bytes);
    let parts = u32::try_from(pieces.len()).unwrap_or(u32::MAX);
    (0u32..)
        .zip(pieces)
        .map(|(part, piece)| {
            ClientFrame::Media(MediaUp {
                id: id.to_owned(),
                kind,
                mime: mime.clone(),
                filename: filename.clone(),
                caption: if part == 0 { caption.clone() } else { None },
                data: encode_base64(piece),
                part,
                parts,
            })
        })
        .collect()
}

/// How one connection ended.
enum Ended {
    /// The caller dropped the client.
    Stopped,
    Denied(String),
    Failed(String),
    /// Anything else: try again. `ready` tells whether the session got that far.
    Lost {
        reason: String,
        ready: bool,
    },
}

async fn run(
    config: ClientConfig,
    mut frames: mpsc::Receiver<ClientFrame>,
    events: mpsc::Sender<Event>,
) {
    let mut queue: VecDeque<ClientFrame> = VecDeque::new();
    let mut attempt = 0u32;
    loop {
        match connect_once(&config, &mut frames, &mut queue, &events).await {
            Ended::Stopped => return,
            Ended::Denied(reason) => {
                let _ = events.send(Event::Denied { reason }).await;
                return;
            }
            Ended::Failed(reason) => {
                let _ = events.send(Event::Failed { reason }).await;
                return;
            }
            Ended::Lost { reason, ready } => {
                if ready {
                    attempt = 0;
                }
                let retry_in = config.backoff.delay(attempt);
                attempt = attempt.saturating_add(1);
                debug!(%reason, ?retry_in, "mobile connection lost");
                let lost = Event::Disconnected { reason, retry_in };
                if events.send(lost).await.is_err() {
                    return;
                }
                // Keep taking frames while waiting, so senders are not blocked.
                let wait = tokio::time::sleep(retry_in);
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        _ = &mut wait => break,
                        frame = frames.recv() => match frame {
                            Some(frame) => enqueue(&mut queue, frame),
                            None => return,
                        },
                    }
                }
            }
        }
    }
}

fn enqueue(queue: &mut VecDeque<ClientFrame>, frame: ClientFrame) {
    if queue.len() >= QUEUE {
        queue.pop_front();
    }
    queue.push_back(frame);
}

/// Why a connection attempt failed: permanent when the URL or the server's answer says
/// so, worth retrying otherwise (the server may be starting).
fn connect_failed(url: &str, err: tungstenite::Error) -> Ended {
    match err {
        tungstenite::Error::Url(err) => {
            Ended::Failed(format!("{url}: {err} (use ws:// or wss://)"))
        }
        tungstenite::Error::Http(response) if response.status().is_client_error() => {
            let status = response.status();
            Ended::Failed(format!("{} (HTTP {status})", not_a_phone_endpoint(url)))
        }
        // A certificate the client does not trust stays untrusted on the next try.
        err if certificate_refused(&err) => Ended::Failed(format!(
            "{url}: {err} (a self-signed certificate? trust it with SSL_CERT_FILE=its PEM)"
        )),
        err => Ended::Lost {
            reason: err.to_string(),
            ready: false,
        },
    }
}

/// Whether the connection failed because the server's certificate is not trusted
/// (unknown issuer, wrong name, expired): nothing a retry changes. The system's roots
/// are trusted, and those of `SSL_CERT_FILE` when it is set.
pub fn certificate_refused(err: &tungstenite::Error) -> bool {
    let rustls_error = match err {
        tungstenite::Error::Io(io) => io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    matches!(
        rustls_error,
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
    )
}

fn not_a_phone_endpoint(url: &str) -> String {
    format!(
        "{url} is not a Herald phone endpoint (a gadget URL?); `herald info` prints the \
         phone URL"
    )
}

async fn connect_once(
    config: &ClientConfig,
    frames: &mut mpsc::Receiver<ClientFrame>,
    queue: &mut VecDeque<ClientFrame>,
    events: &mpsc::Sender<Event>,
) -> Ended {
    let lost = |reason: String, ready: bool| Ended::Lost { reason, ready };
    let (mut ws, _) = match tokio_tungstenite::connect_async(config.url.as_str()).await {
        Ok(connected) => connected,
        Err(err) => return connect_failed(&config.url, err),
    };
    let hello = ClientFrame::Hello(Hello {
        token: Some(config.token.clone()),
        device: config.device.clone(),
    });
    if let Err(err) = ws.send(Message::Text(hello.encode().into())).await {
        return lost(err.to_string(), false);
    }
    // A refusal is an `error` frame and then close 1008; remember the error's words.
    let ready = tokio::time::timeout(READY_TIMEOUT, async {
        let mut refusal = None;
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => match ServerFrame::decode(&text) {
                    Ok(ServerFrame::Ready { session, .. }) => return Ok(session),
                    Ok(ServerFrame::Error { code, message }) => {
                        refusal = Some(format!("{}: {message}", code.as_str()));
                    }
                    Ok(_) => {}
                    // Every frame of a phone endpoint has a `t`; a frame without one
                    // (the gadget protocol's `type`) means the URL is another endpoint.
                    // A known frame with fields this client cannot read is a newer
                    // server's: worth another try, not the end.
                    Err(DecodeError::MissingT | DecodeError::NotObject) => {
                        return Err(Ended::Failed(not_a_phone_endpoint(&config.url)))
                    }
                    Err(err) => debug!(%err, "undecodable frame before ready ignored"),
                },
                Some(Ok(Message::Close(Some(frame)))) if frame.code == CloseCode::Policy => {
                    return Err(Ended::Denied(
                        refusal.unwrap_or_else(|| frame.reason.to_string()),
                    ));
                }
                Some(Ok(Message::Close(_))) | None => {
                    let reason = refusal.unwrap_or_else(|| "closed before ready".into());
                    return Err(lost(reason, false));
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(lost(err.to_string(), false)),
            }
        }
    })
    .await;
    let session = match ready {
        Ok(Ok(session)) => session,
        Ok(Err(ended)) => return ended,
        Err(_) => return lost("no ready in time".into(), false),
    };
    if events.send(Event::Connected { session }).await.is_err() {
        return Ended::Stopped;
    }
    while let Some(frame) = queue.front() {
        if let Err(err) = ws.send(Message::Text(frame.encode().into())).await {
            return lost(err.to_string(), true);
        }
        queue.pop_front();
    }
    loop {
        tokio::select! {
            frame = frames.recv() => {
                let Some(frame) = frame else {
                    let _ = ws.close(None).await;
                    return Ended::Stopped;
                };
                if let Err(err) = ws.send(Message::Text(frame.encode().into())).await {
                    enqueue(queue, frame);
                    return lost(err.to_string(), true);
                }
            }
            next = ws.next() => match next {
                Some(Ok(Message::Text(text))) => match ServerFrame::decode(&text) {
                    Ok(ServerFrame::Unknown { .. }) => {}
                    Ok(frame) => {
                        if events.send(Event::Frame(frame)).await.is_err() {
                            return Ended::Stopped;
                        }
                    }
                    Err(err) => debug!(%err, "undecodable frame ignored"),
                },
                Some(Ok(Message::Close(frame))) => {
                    return match frame {
                        Some(f) if f.code == CloseCode::Policy => Ended::Denied(f.reason.to_string()),
                        Some(f) => lost(format!("closed: {} {}", u16::from(f.code), f.reason), true),
                        None => lost("closed".into(), true),
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return lost(err.to_string(), true),
                None => return lost("connection ended".into(), true),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff::default();
        let delays: Vec<u64> = (0..7).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn files_are_chunked_at_the_protocol_size() {
        let bytes = vec![1u8; herald_mobile_proto::limits::MEDIA_CHUNK_BYTES * 2 + 1];
        let frames = media_frames(
            "f",
            MediaKind::Document,
            None,
            None,
            Some("c".into()),
            &bytes,
        );
        assert_eq!(frames.len(), 3);
        let ClientFrame::Media(last) = &frames[2] else {
            panic!()
        };
        assert_eq!(
            (last.part, last.parts, last.caption.as_deref()),
            (2, 3, None)
        );
    }
}
