//! One actor per phone (per `device.id`): the only owner of its conversation state.
//!
//! Frames from the phone's connection and calls from the agent arrive on one bounded
//! mailbox. Timers (card expiry, the avatar's return to idle) are deadlines computed
//! from the state, so the loop sleeps until the earliest one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herald_mobile_proto::{
    self as proto, limits, AvatarState, Chunk, ClientFrame, Deliver, ErrorCode, MediaDown,
    MediaKindDown, PromptCard, PromptKind, ServerFrame,
};
use herald_port::{
    ActionError, Chat, Choice, DeliveryError, Inbound, InboundBody, MediaKind, PairingCode,
    Platform, Prompt, PromptAnswer, SendOptions, Source,
};
use tokio::io::AsyncReadExt;
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::warn;

use super::seen::SeenIds;
use super::uploads::{Accepted, Upload, UploadError, Uploads};
use super::MobileHub;
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::files;
use crate::ids;
use crate::mailboxes::{hand_over, AgentQueue, MAILBOX};
use crate::queue;
use crate::socket::{Outgoing, SendQueue};
use crate::store::blocking;

/// The avatar rests this long after a turn before it goes idle.
const IDLE_PAUSE: Duration = Duration::from_millis(1500);
/// Largest file the agent may send to a phone (sent in chunks).
const MAX_MEDIA_DOWN: u64 = 64 * 1024 * 1024;
/// Frames kept for a phone that is away lapse after this long.
const OUTBOX_TTL_MS: i64 = limits::OUTBOX_TTL_SECS as i64 * 1000;
/// An idle session ends this long after its last event: by then the ids it remembers
/// have expired.
const RETIRE_AFTER: Duration = Duration::from_secs(limits::DEDUP_TTL_SECS);

/// What the agent side asks of a phone.
pub(crate) enum Command {
    /// A conversation-port call.
    Port(Call),
    /// A push from a `deliver` frame: only to a phone that is connected now.
    Deliver {
        deliver: Box<Deliver>,
        reply: Reply<()>,
    },
    Shutdown,
}

/// A connection that passed `hello`, handed to the session.
pub(crate) struct Attach {
    pub conn: u64,
    pub outbox: SendQueue,
    pub user_id: String,
    pub user_name: Option<String>,
}

pub(crate) enum Event {
    Attach(Box<Attach>),
    Frame { conn: u64, frame: Box<ClientFrame> },
    Closed { conn: u64 },
    Command(Command),
}

struct Conn {
    id: u64,
    outbox: SendQueue,
}

/// A card waiting for its answer.
struct OpenCard {
    card: PromptCard,
    expires: Instant,
}

pub(crate) struct Session {
    device_id: String,
    hub: Arc<MobileHub>,
    mailbox: queue::Sender<Event>,
    conn: Option<Conn>,
    /// The user who owns this phone (from its token); kept across connections.
    user_id: String,
    user_name: Option<String>,
    seen: SeenIds,
    uploads: Uploads,
    cards: HashMap<String, OpenCard>,
    turn: Option<String>,
    /// The turn has shown a reply, so the avatar is speaking.
    speaking: bool,
    idle_at: Option<Instant>,
    to_agent: AgentQueue,
    /// When the mailbox last had something for the session.
    last_event: Instant,
}

impl Session {
    pub(super) fn spawn(device_id: String, hub: Arc<MobileHub>) -> queue::Sender<Event> {
        let (tx, rx) = queue::channel(MAILBOX);
        let uploads = Uploads::new(proto::limits::MAX_MEDIA_BYTES, hub.upload_budget.clone());
        let session = Session {
            device_id,
            hub,
            mailbox: tx.clone(),
            conn: None,
            user_id: String::new(),
            user_name: None,
            seen: SeenIds::default(),
            uploads,
            cards: HashMap::new(),
            turn: None,
            speaking: false,
            idle_at: None,
            to_agent: AgentQueue::default(),
            last_event: Instant::now(),
        };
        tokio::spawn(session.run(rx));
        tx
    }

    async fn run(mut self, mut mailbox: queue::Receiver<Event>) {
        let retired = loop {
            let deadline = self.next_deadline();
            let event = tokio::select! {
                event = mailbox.recv() => event,
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    if self.retire_at().is_some_and(|at| at <= now) {
                        break true;
                    }
                    self.on_timer(now).await;
                    continue;
                }
            };
            self.last_event = Instant::now();
            match event {
                None => break false,
                Some(Event::Command(Command::Shutdown)) => {
                    self.close(CloseCode::Away, "server stopping").await;
                    break false;
                }
                Some(event) => self.handle(event).await,
            }
        };
        for id in self.cards.keys() {
            self.hub.cards.remove(id);
        }
        self.hub.session_ended(&self.device_id, &self.mailbox);
        if retired {
            hand_over(mailbox, || self.hub.session(&self.device_id)).await;
        }
    }

    /// When an idle session ends: nothing open (no connection, turn or card) and quiet
    /// for as long as its remembered ids count, so ending it forgets nothing that
    /// matters and abandoned device ids do not keep a session each.
    fn retire_at(&self) -> Option<Instant> {
        let idle = self.conn.is_none()
            && self.turn.is_none()
            && self.cards.is_empty()
            && self.idle_at.is_none();
        idle.then(|| self.last_event + RETIRE_AFTER)
    }

    fn chat(&self) -> Chat {
        Chat::mobile(self.device_id.clone())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let cards = self.cards.values().map(|c| c.expires).min();
        [cards, self.idle_at, self.retire_at()]
            .into_iter()
            .flatten()
            .min()
    }

    async fn handle(&mut self, event: Event) {
        match event {
            Event::Attach(attach) => self.attach(*attach).await,
            Event::Frame { conn, frame } if self.is_current(conn) => self.on_frame(*frame).await,
            Event::Closed { conn } if self.is_current(conn) => {
                self.conn = None;
                self.hub.online.remove(&self.device_id);
                // Unfinished uploads are not resumed across connections.
                self.uploads.clear();
            }
            Event::Command(command) => self.on_command(command).await,
            _ => {}
        }
    }

    fn is_current(&self, conn: u64) -> bool {
        self.conn.as_ref().is_some_and(|c| c.id == conn)
    }

    async fn attach(&mut self, attach: Attach) {
        self.close(CloseCode::Normal, "replaced by a new connection")
            .await;
        self.conn = Some(Conn {
            id: attach.conn,
            outbox: attach.outbox,
        });
        self.uploads.set_user(&attach.user_id);
        self.user_id = attach.user_id;
        self.user_name = attach.user_name;
        self.hub.online.insert(self.device_id.clone(), attach.conn);
        // Whatever the phone missed of a turn, in order.
        let (store, id) = (self.hub.store.clone(), self.device_id.clone());
        let since = now_ms() - OUTBOX_TTL_MS;
        let missed = blocking(move || store.outbox_take(&id, since))
            .await
            .unwrap_or_else(|err| {
                warn!(%err, "could not read what a phone missed");
                Vec::new()
            });
        if let Some(conn) = &self.conn {
            for frame in missed {
                let _ = conn.outbox.send(Outgoing::Text(frame)).await;
            }
        }
    }

    async fn close(&mut self, code: CloseCode, reason: &str) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.outbox.send(Outgoing::Close(code, reason.into())).await;
            self.hub.online.remove(&self.device_id);
            self.uploads.clear();
        }
    }

    /// Send a frame now, or keep it for later while a turn runs and the phone is away.
    async fn emit(&mut self, frame: &ServerFrame) -> Result<(), DeliveryError> {
        match &self.conn {
            Some(conn) => {
                let _ = conn.outbox.send(Outgoing::Text(frame.encode())).await;
                Ok(())
            }
            None if self.turn.is_some() => {
                // Kept in the store: a restart in the meantime loses nothing.
                let (store, id, frame) = (
                    self.hub.store.clone(),
                    self.device_id.clone(),
                    frame.encode(),
                );
                blocking(move || store.outbox_push(&id, &frame, now_ms()))
                    .await
                    .map_err(|err| {
                        DeliveryError::Failed(format!("could not keep the reply: {err}"))
                    })
            }
            None => Err(DeliveryError::Offline(self.chat())),
        }
    }

    async fn error(&mut self, code: ErrorCode, message: impl Into<String>) {
        self.hub.metrics.error(Platform::Mobile, code.as_str());
        let _ = self.emit(&ServerFrame::error(code, message)).await;
    }

    async fn on_timer(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .cards
            .iter()
            .filter(|(_, c)| c.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.cards.remove(&id);
            self.hub.cards.remove(&id);
            let done = ServerFrame::PromptDone {
                prompt_id: id,
                option_id: None,
                expired: true,
            };
            let _ = self.emit(&done).await;
        }
        if self.idle_at.is_some_and(|at| at <= now) {
            self.idle_at = None;
            let _ = self
                .emit(&ServerFrame::Avatar {
                    state: AvatarState::Idle,
                })
                .await;
        }
    }

    // ---- phone → agent ----

    async fn on_frame(&mut self, frame: ClientFrame) {
        match frame {
            ClientFrame::Text(text) => {
                if !self.seen.insert(&text.id, Instant::now()) {
                    return;
                }
                let body = InboundBody::Text {
                    text: text.text,
                    reply_to: text.reply_to,
                };
                self.forward(text.id, body).await;
            }
            ClientFrame::Audio(audio) => {
                if self.seen.contains(&audio.id) {
                    return;
                }
                // Nothing from a user who may not talk to the agent is written to disk.
                if !self.may_reach_agent().await {
                    return;
                }
                match self.save_voice(&audio).await {
                    Ok(body) => {
                        self.seen.insert(&audio.id, Instant::now());
                        self.hand_over(audio.id, body).await;
                    }
                    Err((code, message)) => self.error(code, message).await,
                }
            }
            ClientFrame::Media(media) => {
                if self.seen.contains(&media.id) {
                    return;
                }
                match self.uploads.accept(media) {
                    Ok(Accepted::Complete(upload)) => {
                        // Not marked seen when refused: sent again after pairing, it counts.
                        if !self.may_reach_agent().await {
                            return;
                        }
                        self.seen.insert(&upload.id, Instant::now());
                        let id = upload.id.clone();
                        match self.save_upload(upload).await {
                            Ok(body) => self.hand_over(id, body).await,
                            Err(message) => self.error(ErrorCode::Internal, message).await,
                        }
                    }
                    Ok(Accepted::Partial | Accepted::Duplicate) => {}
                    Err(UploadError::TooBig(message)) => {
                        self.error(ErrorCode::TooBig, message).await;
                    }
                    Err(UploadError::BadFrame(message)) => {
                        self.error(ErrorCode::BadFrame, message).await;
                    }
                }
            }
            ClientFrame::Prompt(answer) => self.on_answer(answer).await,
            // Handled by the connection before it reaches a session.
            ClientFrame::Hello(_) | ClientFrame::Deliver(_) | ClientFrame::Ping => {}
        }
    }

    async fn save_voice(&self, audio: &proto::Audio) -> Result<InboundBody, (ErrorCode, String)> {
        if !audio.format.eq_ignore_ascii_case("wav") {
            return Err((
                ErrorCode::BadFrame,
                format!("audio format {:?} is not supported; send wav", audio.format),
            ));
        }
        if proto::base64_decoded_len(&audio.data) > limits::MAX_MEDIA_BYTES {
            return Err((
                ErrorCode::TooBig,
                "voice messages are limited to 8 MiB".into(),
            ));
        }
        let bytes = audio
            .bytes()
            .map_err(|e| (ErrorCode::BadFrame, e.to_string()))?;
        let duration = herald_media::wav::inspect(&bytes)
            .map(|info| info.duration)
            .map_err(|e| (ErrorCode::BadFrame, e.to_string()))?;
        let path = self
            .save("wav", vec![bytes])
            .await
            .map_err(|e| (ErrorCode::Internal, e))?;
        Ok(InboundBody::Voice {
            path,
            duration_ms: u32::try_from(duration.as_millis()).unwrap_or(u32::MAX),
            transcript: audio.text.clone(),
        })
    }

    async fn save_upload(&self, upload: Upload) -> Result<InboundBody, String> {
        let extension = upload
            .filename
            .as_deref()
            .and_then(|f| f.rsplit_once('.'))
            .map(|(_, ext)| ext)
            .filter(|ext| ext.len() <= 8 && ext.bytes().all(|b| b.is_ascii_alphanumeric()))
            .unwrap_or("bin");
        let path = self.save(extension, upload.parts).await?;
        let kind = match upload.kind {
            proto::MediaKind::Image => MediaKind::Image,
            proto::MediaKind::Video => MediaKind::Video,
            proto::MediaKind::Document => MediaKind::Document,
            proto::MediaKind::Audio => MediaKind::Audio,
        };
        Ok(InboundBody::Media {
            path,
            kind,
            mime: upload.mime,
            caption: upload.caption,
        })
    }

    /// Write a file for the agent into the inbox; its name is of our own making.
    async fn save(&self, extension: &str, parts: Vec<Vec<u8>>) -> Result<PathBuf, String> {
        let size = parts.iter().map(|part| part.len() as u64).sum();
        let written = self
            .hub
            .inbox
            .put(extension, size, move |path| {
                files::write_private_parts(path, &parts)
            })
            .await;
        match written {
            Ok((path, ())) => Ok(path),
            Err(err) => {
                warn!(%err, "could not save a phone's file");
                Err("the server could not save the file".into())
            }
        }
    }

    async fn on_answer(&mut self, answer: proto::PromptAnswer) {
        let expired = |prompt_id: String| ServerFrame::PromptDone {
            prompt_id,
            option_id: None,
            expired: true,
        };
        let Some(open) = self.cards.get(&answer.prompt_id) else {
            let owner = self.hub.cards.get(&answer.prompt_id).map(|o| o.clone());
            match owner {
                Some(owner) if owner != self.device_id => {
                    self.error(
                        ErrorCode::Forbidden,
                        "that card was shown to another device",
                    )
                    .await;
                }
                _ => {
                    let _ = self.emit(&expired(answer.prompt_id)).await;
                }
            }
            return;
        };
        let resolution = open.card.resolve(&answer);
        let option_id = resolution.option_id.to_owned();
        let choice = choice_of(open.card.kind, &option_id, resolution.response);
        self.cards.remove(&answer.prompt_id);
        self.hub.cards.remove(&answer.prompt_id);
        let done = ServerFrame::PromptDone {
            prompt_id: answer.prompt_id.clone(),
            option_id: Some(option_id),
            expired: false,
        };
        let _ = self.emit(&done).await;
        let body = InboundBody::PromptAnswer(PromptAnswer {
            prompt_id: answer.prompt_id,
            choice,
        });
        // An answer is never a chat message, but it still needs an authorized user.
        self.forward(ids::random_hex(12), body).await;
    }

    /// Hand an event to the agent in order, unless the user may not reach it.
    async fn forward(&mut self, message_id: String, body: InboundBody) {
        if self.may_reach_agent().await {
            self.hand_over(message_id, body).await;
        }
    }

    /// Whether the user may talk to the agent; if not, they are told how to pair.
    async fn may_reach_agent(&mut self) -> bool {
        let Some(authorizer) = self.hub.authorizer().cloned() else {
            return false;
        };
        let authorized =
            self.hub
                .authorized
                .check(authorizer.as_ref(), Platform::Mobile, &self.user_id);
        match authorized.await {
            Ok(true) => true,
            Ok(false) => {
                self.send_pairing().await;
                false
            }
            Err(err) => {
                warn!(%err, "authorization failed");
                self.error(ErrorCode::Internal, "authorization is unavailable")
                    .await;
                false
            }
        }
    }

    /// Hand an event to the agent in order; the user is known to be authorized.
    async fn hand_over(&mut self, message_id: String, body: InboundBody) {
        let Some(agent) = self.hub.agent().cloned() else {
            return;
        };
        let inbound = Inbound {
            source: Source {
                chat: Chat::mobile(self.device_id.clone()),
                user_id: self.user_id.clone(),
                user_name: self.user_name.clone(),
            },
            message_id,
            body,
            profile: None,
        };
        self.hub
            .metrics
            .activity
            .said(&inbound.source.chat, &inbound.body);
        if !self.to_agent.push(&agent, inbound) {
            self.error(
                ErrorCode::RateLimited,
                "too many messages at once; try again shortly",
            )
            .await;
        }
    }

    async fn send_pairing(&mut self) {
        let Some(authorizer) = self.hub.authorizer().cloned() else {
            return;
        };
        let code = authorizer
            .pairing_code(Platform::Mobile, &self.user_id, self.user_name.as_deref())
            .await;
        let text = match code {
            Ok(PairingCode { code, command }) => format!(
                "This app is not paired with the agent yet. Pairing code: {code}\nAsk the owner to run: {command}"
            ),
            Err(err) => {
                warn!(%err, "could not create a pairing code");
                "This app is not paired with the agent yet, and no pairing code could be made."
                    .to_owned()
            }
        };
        let message = ServerFrame::Message(proto::Message {
            id: ids::random_hex(12),
            text,
            chunk: None,
            final_: true,
            edit: false,
            reply_to: None,
        });
        let _ = self.emit(&message).await;
    }

    // ---- agent → phone ----

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Port(call) => self.on_call(call).await,
            Command::Deliver { deliver, reply } => {
                let result = self.deliver(*deliver).await;
                let _ = reply.send(result);
            }
            Command::Shutdown => {}
        }
    }

    async fn on_call(&mut self, call: Call) {
        match call {
            Call::SendText {
                text,
                options,
                reply,
            } => {
                let result = self.send_text(&text, options).await;
                let _ = reply.send(result);
            }
            Call::EditText {
                message_id,
                text,
                finalize,
                reply,
            } => {
                let frame = ServerFrame::Message(proto::Message {
                    id: message_id,
                    text: self.cap(&text),
                    chunk: Some(Chunk { index: 0, total: 1 }),
                    final_: finalize,
                    edit: true,
                    reply_to: None,
                });
                let _ = reply.send(self.emit(&frame).await);
            }
            Call::Typing { on, reply } => {
                let _ = reply.send(self.emit(&ServerFrame::Typing { stop: !on }).await);
            }
            Call::TurnStarted { reply } => {
                self.hub.metrics.turn(Platform::Mobile);
                let turn = ids::random_hex(12);
                self.turn = Some(turn.clone());
                self.speaking = false;
                self.idle_at = None;
                let result = async {
                    self.emit(&ServerFrame::Typing { stop: false }).await?;
                    self.emit(&ServerFrame::Avatar {
                        state: AvatarState::Thinking,
                    })
                    .await
                }
                .await;
                let _ = reply.send(result.map(|()| turn));
            }
            Call::TurnEnded { turn, reply, .. } => {
                let result = if self.turn.as_deref() == Some(turn.as_str()) {
                    let result = self.emit(&ServerFrame::Typing { stop: true }).await;
                    self.turn = None;
                    self.idle_at = Some(Instant::now() + IDLE_PAUSE);
                    result
                } else {
                    Ok(())
                };
                let _ = reply.send(result);
            }
            Call::Ask {
                prompt,
                ttl_s,
                reply,
            } => {
                let result = self.ask(prompt, ttl_s).await;
                let _ = reply.send(result);
            }
            Call::Withdraw { prompt_id, reply } => {
                let result = match self.cards.remove(&prompt_id) {
                    Some(_) => {
                        self.hub.cards.remove(&prompt_id);
                        let done = ServerFrame::PromptDone {
                            prompt_id,
                            option_id: None,
                            expired: true,
                        };
                        self.emit(&done).await
                    }
                    None => Err(DeliveryError::UnknownMessage(prompt_id)),
                };
                let _ = reply.send(result);
            }
            Call::Voice { path, reply } => {
                let result = self.send_file(MediaKindDown::Voice, path, None).await;
                let _ = reply.send(result);
            }
            Call::Image {
                path,
                caption,
                reply,
            } => {
                let result = self.send_file(MediaKindDown::Image, path, caption).await;
                let _ = reply.send(result);
            }
            Call::Document {
                path,
                caption,
                reply,
            } => {
                let result = self.send_file(MediaKindDown::Document, path, caption).await;
                let _ = reply.send(result);
            }
            Call::Display { card, reply } => {
                let text = format!("{}\n{}", card.title, card.body);
                let result = self.send_text(text.trim(), SendOptions::default()).await;
                let _ = reply.send(result.map(drop));
            }
            Call::Notice { text, reply } => {
                let result = self.send_text(&text, SendOptions::default()).await;
                let _ = reply.send(result.map(drop));
            }
            // Phones show typing and the avatar instead of a working phrase, and their own
            // voice message instead of a transcript.
            Call::Status { reply, .. } | Call::Transcript { reply, .. } => {
                let _ = reply.send(Ok(()));
            }
            Call::InvokeAction { name, reply, .. } => {
                let _ = reply.send(Err(ActionError::UnknownAction(name)));
            }
            Call::Actions { reply } => {
                let _ = reply.send(Ok(Vec::new()));
            }
            Call::Profile { reply } => {
                let _ = reply.send(Err(DeliveryError::Unsupported {
                    chat: self.chat(),
                    reason: "phones have no device profile".into(),
                }));
            }
        }
    }

    /// Text within the phone's limit, cut at a character boundary.
    fn cap(&self, text: &str) -> String {
        let max = self.hub.config.max_message_chars as usize;
        text.chars().take(max).collect()
    }

    async fn send_text(
        &mut self,
        text: &str,
        options: SendOptions,
    ) -> Result<String, DeliveryError> {
        let id = ids::random_hex(12);
        if self.turn.is_some() && !self.speaking {
            self.speaking = true;
            self.emit(&ServerFrame::Avatar {
                state: AvatarState::Speaking,
            })
            .await?;
        }
        if options.streaming {
            let frame = ServerFrame::Message(proto::Message {
                id: id.clone(),
                text: self.cap(text),
                chunk: Some(Chunk { index: 0, total: 1 }),
                final_: false,
                edit: true,
                reply_to: options.reply_to,
            });
            self.emit(&frame).await?;
            return Ok(id);
        }
        let chunks = split_chunks(text, self.hub.config.max_message_chars as usize);
        let total = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
        for (index, chunk) in (0u32..).zip(chunks) {
            let frame = ServerFrame::Message(proto::Message {
                id: id.clone(),
                text: chunk,
                chunk: Some(Chunk { index, total }),
                final_: index + 1 == total,
                edit: false,
                reply_to: options.reply_to.clone(),
            });
            self.emit(&frame).await?;
        }
        Ok(id)
    }

    async fn ask(&mut self, prompt: Prompt, ttl_s: Option<u32>) -> Result<String, DeliveryError> {
        let timeout = ttl_s.unwrap_or(limits::PROMPT_TIMEOUT_SECS);
        let id = ids::random_hex(16);
        // Without permanent approval the card has no "always" button, so none is accepted.
        let permanent = !matches!(
            prompt,
            Prompt::ExecApproval {
                allow_permanent: false,
                ..
            }
        );
        let (kind, text, choices, command, description) = match prompt {
            Prompt::ExecApproval {
                command,
                description,
                ..
            } => (
                PromptKind::ExecApproval,
                format!("Allow this command?\n{command}"),
                Vec::new(),
                Some(command),
                Some(description),
            ),
            Prompt::Confirm { title, text } => (
                PromptKind::Confirm,
                if title.is_empty() {
                    text
                } else {
                    format!("{title}\n{text}")
                },
                Vec::new(),
                None,
                None,
            ),
            Prompt::Clarify { question, choices } => {
                (PromptKind::Clarify, question, choices, None, None)
            }
        };
        let card = PromptCard {
            id: id.clone(),
            options: kind
                .options(&choices)
                .into_iter()
                .filter(|option| permanent || option.id != "always")
                .collect(),
            kind,
            text,
            session: proto::session_key(&self.device_id),
            timeout_seconds: timeout,
            command,
            description,
        };
        self.emit(&ServerFrame::Prompt(card.clone())).await?;
        self.hub.cards.insert(id.clone(), self.device_id.clone());
        self.cards.insert(
            id.clone(),
            OpenCard {
                card,
                expires: Instant::now() + Duration::from_secs(u64::from(timeout)),
            },
        );
        Ok(id)
    }

    async fn send_file(
        &mut self,
        kind: MediaKindDown,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        let failed = |e: String| DeliveryError::Failed(e);
        let size = tokio::fs::metadata(&path)
            .await
            .map_err(|e| failed(format!("{}: {e}", path.display())))?
            .len();
        if size > MAX_MEDIA_DOWN {
            return Err(failed(format!(
                "{} is {size} bytes; phones take at most {MAX_MEDIA_DOWN}",
                path.display()
            )));
        }
        let unreadable = |e: std::io::Error| failed(format!("{}: {e}", path.display()));
        let mut file = tokio::fs::File::open(&path).await.map_err(unreadable)?;
        let filename = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let mime = mime_for(filename.as_deref());
        let file_down = FileDown::new(kind, mime, filename, caption, size);
        // One chunk in memory at a time, however large the file and slow the phone.
        let chunk = limits::MEDIA_CHUNK_BYTES as u64;
        let mut piece = Vec::new();
        for part in 0..file_down.parts {
            let len = chunk.min(size - u64::from(part) * chunk);
            piece.resize(usize::try_from(len).unwrap_or(usize::MAX), 0);
            file.read_exact(&mut piece).await.map_err(unreadable)?;
            self.emit(&file_down.frame(part, &piece)).await?;
        }
        Ok(())
    }

    async fn deliver(&mut self, deliver: Deliver) -> Result<(), DeliveryError> {
        if self.conn.is_none() {
            return Err(DeliveryError::Offline(self.chat()));
        }
        if let Some(text) = deliver.text.filter(|t| !t.is_empty()) {
            self.send_text(&text, SendOptions::default()).await?;
        }
        for media in deliver.media {
            let bytes = media
                .bytes()
                .map_err(|e| DeliveryError::Failed(e.to_string()))?;
            let mime = media
                .mime
                .unwrap_or_else(|| mime_for(media.filename.as_deref()));
            let size = bytes.len() as u64;
            let file_down = FileDown::new(media.kind, mime, media.filename, media.caption, size);
            for (part, piece) in (0..).zip(proto::media_pieces(&bytes)) {
                self.emit(&file_down.frame(part, piece)).await?;
            }
        }
        Ok(())
    }
}

/// The port's choice for an answer that [`PromptCard::resolve`] validated.
fn choice_of(kind: PromptKind, option_id: &str, response: Option<&str>) -> Choice {
    match (kind, option_id) {
        (_, "once") => Choice::Once,
        (_, "session") => Choice::Session,
        (_, "always") => Choice::Always,
        (_, "deny") => Choice::Deny,
        (PromptKind::Clarify, proto::CLARIFY_OTHER) => {
            Choice::Other(response.unwrap_or_default().to_owned())
        }
        (PromptKind::Clarify, id) => id
            .strip_prefix('c')
            .and_then(|n| n.parse().ok())
            .map_or(Choice::Cancel, Choice::Option),
        _ => Choice::Cancel,
    }
}

/// Split `text` into pieces of at most `max` characters, preferring to break after a
/// newline or a space in the last quarter of a piece.
pub(crate) fn split_chunks(text: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return vec![text.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + max).min(chars.len());
        if end < chars.len() {
            let floor = start + max * 3 / 4;
            if let Some(cut) = (floor..end)
                .rev()
                .find(|&i| chars[i] == '\n' || chars[i] == ' ')
            {
                end = cut + 1;
            }
        }
        chunks.push(chars[start..end].iter().collect());
        start = end;
    }
    chunks
}

/// A file on its way to a phone as `media` frames of at most
/// [`limits::MEDIA_CHUNK_BYTES`] each, built one at a time.
struct FileDown {
    id: String,
    kind: MediaKindDown,
    mime: String,
    filename: Option<String>,
    caption: Option<String>,
    size: u64,
    /// At least one: an empty file is one empty frame.
    parts: u32,
}

impl FileDown {
    fn new(
        kind: MediaKindDown,
        mime: String,
        filename: Option<String>,
        caption: Option<String>,
        size: u64,
    ) -> Self {
        let parts = size.div_ceil(limits::MEDIA_CHUNK_BYTES as u64).max(1);
        FileDown {
            id: ids::random_hex(12),
            kind,
            mime,
            filename,
            caption,
            size,
            parts: u32::try_from(parts).unwrap_or(u32::MAX),
        }
    }

    fn frame(&self, part: u32, piece: &[u8]) -> ServerFrame {
        ServerFrame::Media(MediaDown {
            id: self.id.clone(),
            kind: self.kind,
            mime: self.mime.clone(),
            filename: self.filename.clone(),
            caption: if part == 0 {
                self.caption.clone()
            } else {
                None
            },
            part,
            parts: self.parts,
            final_: part + 1 == self.parts,
            size: self.size,
            data: Some(proto::encode_base64(piece)),
            url: None,
        })
    }
}

/// The MIME type for a file name, by its extension.
fn mime_for(filename: Option<&str>) -> String {
    let extension = filename
        .and_then(|f| f.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "mp4" => "video/mp4",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn hub(dir: &std::path::Path) -> Arc<MobileHub> {
        let store = crate::store::SqliteStore::open(&dir.join("herald.db")).unwrap();
        let inbox = crate::inbox::Inbox::open(dir.join("inbox"), &Default::default()).unwrap();
        let hub = MobileHub::new(
            Default::default(),
            "test-app-token-0123456789abcdef0123",
            Arc::new(store),
            inbox,
            Default::default(),
        );
        Arc::new(hub.unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_session_retires_when_its_ids_expire_and_a_new_one_takes_over() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let first = hub.session("tel-1");
        tokio::time::sleep(RETIRE_AFTER - Duration::from_secs(1)).await;
        assert!(
            hub.sessions.get("tel-1").is_some(),
            "kept while its ids count"
        );

        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(hub.sessions.get("tel-1").is_none(), "retired");
        assert!(first.closed().now_or_never().is_some(), "closed");

        // The id gets a fresh session, which answers.
        let second = hub.session("tel-1");
        assert!(!second.same_channel(&first));
        let answer = hub
            .call("tel-1", |reply| {
                Command::Port(Call::Typing { on: true, reply })
            })
            .await;
        assert!(answer.is_ok(), "the new session answered: {answer:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn what_reaches_a_retiring_session_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let mut raced = 0;
        for i in 0..20 {
            let id = format!("tel-{i}");
            let session = hub.session(&id);
            // Due at the very instant the session retires: whichever it sees first,
            // the call is answered, by this session or by the next.
            tokio::time::sleep(RETIRE_AFTER).await;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let call = Event::Command(Command::Port(Call::Typing { on: true, reply }));
            // Sent without waiting, or not at all: the session had retired.
            if !matches!(session.send(call).now_or_never(), Some(Ok(()))) {
                continue;
            }
            raced += 1;
            let answer = tokio::time::timeout(Duration::from_secs(5), answer).await;
            assert!(matches!(answer, Ok(Ok(_))), "dropped: {answer:?}");
        }
        assert!(raced > 0, "no call met a retiring session");
    }
}

#[cfg(test)]
mod chunk_tests {
    use super::*;

    #[test]
    fn chunks_respect_the_limit_and_prefer_spaces() {
        assert_eq!(split_chunks("short", 10), ["short"]);
        let text = "aaaa bbbb cccc dddd";
        let chunks = split_chunks(text, 10);
        assert!(chunks.iter().all(|c| c.chars().count() <= 10));
        assert_eq!(chunks.concat(), text);
        assert_eq!(chunks[0], "aaaa bbbb ");
        let unbroken = "x".repeat(25);
        assert_eq!(split_chunks(&unbroken, 10).len(), 3);
        let wide = "é".repeat(21);
        let chunks = split_chunks(&wide, 10);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), wide);
    }

    #[test]
    fn answers_map_onto_the_ports_choices() {
        assert_eq!(
            choice_of(PromptKind::ExecApproval, "session", None),
            Choice::Session
        );
        assert_eq!(
            choice_of(PromptKind::Confirm, "cancel", None),
            Choice::Cancel
        );
        assert_eq!(
            choice_of(PromptKind::Clarify, "c2", Some("B")),
            Choice::Option(2)
        );
        assert_eq!(
            choice_of(PromptKind::Clarify, "other", Some("mine")),
            Choice::Other("mine".into())
        );
    }

    #[test]
    fn files_become_chunked_media_frames() {
        let bytes = vec![7u8; limits::MEDIA_CHUNK_BYTES + 5];
        let size = bytes.len() as u64;
        let file = FileDown::new(
            MediaKindDown::Image,
            "image/png".into(),
            None,
            Some("c".into()),
            size,
        );
        assert_eq!(file.parts, 2);
        let pieces = proto::media_pieces(&bytes);
        let ServerFrame::Media(first) = file.frame(0, pieces[0]) else {
            panic!()
        };
        let ServerFrame::Media(last) = file.frame(1, pieces[1]) else {
            panic!()
        };
        assert!(!first.final_ && last.final_);
        assert_eq!((first.id.as_str(), last.size), (last.id.as_str(), size));
        assert_eq!((first.caption.as_deref(), last.caption), (Some("c"), None));
        let empty = FileDown::new(MediaKindDown::Document, "text/plain".into(), None, None, 0);
        assert_eq!(empty.parts, 1, "an empty file is one frame");
        assert_eq!(mime_for(Some("a.JPG")), "image/jpeg");
        assert_eq!(mime_for(None), "application/octet-stream");
    }
}
