//! A phone's session: what the one session loop (`crate::session`) does for phones.
//!
//! The state and its rules are [`Core`] (crate `herald-session`), a state machine with
//! no I/O. Here are its reads, the keepalive that pings a quiet phone, its commands
//! (the conversation port, `deliver`, approvals) and the effects only a phone has: the
//! store's outbox that keeps a turn's frames while the phone is away, the authorizer,
//! the hub's cards and upload budget, files to receive and send, and pushes.

use std::time::Duration;

use futures_util::FutureExt;
use herald_mobile_proto::{limits, Deliver};
use herald_port::{
    AccessError, Chat, DeliveryError, Notification, PairingCode, Platform, RequestError,
};
use herald_session::io::{Close, Failed};
use herald_session::mobile::link::{Delivered, Delivers};
use herald_session::mobile::{Core, Effect, SaveFile};
use herald_session::{done, Ids, SessionCore};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

use super::socket::{Connection, Incoming, Phone, Read};
use super::{phone_name, MobileHub, Phones};
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::edge::socket::Outgoing;
use crate::files;
use crate::ids::OsEntropy;
use crate::session::{Session, SessionKind};
use herald_questions::Question;
use herald_store::PushRecord;

/// Frames kept for a phone that is away lapse after this long.
const OUTBOX_TTL_MS: i64 = limits::OUTBOX_TTL_SECS as i64 * 1000;
/// An idle session ends this long after its last event: by then the ids it remembers
/// have expired.
const RETIRE_AFTER: Duration = Duration::from_secs(limits::DEDUP_TTL_SECS);

/// What the agent side asks of a phone.
pub(crate) enum Command {
    /// A conversation-port call.
    Port(Call),
    /// News from the agent, answered by nobody.
    Notify(Notification),
    /// A push from a `deliver` frame: only to a phone that is connected now.
    Deliver {
        deliver: Box<Deliver>,
        reply: oneshot::Sender<Result<(), DeliveryError>>,
    },
    /// The owner approved this user (sent to every phone; the core checks whose).
    Approved {
        user_id: String,
    },
    /// Show a copy of another device's question (`crate::questions`).
    ShowCopy {
        prompt_id: String,
        question: Box<Question>,
        reply: oneshot::Sender<Result<(), DeliveryError>>,
    },
    Shutdown,
}

/// A connection that passed `hello`, handed to the session.
pub(crate) struct Attach {
    pub conn: Box<Connection>,
    /// The `ready` frame, the connection's first: sent by the session, so whatever
    /// reaches the session after the attach reaches the phone after `ready`.
    pub ready: String,
    pub user_id: String,
    pub user_name: Option<String>,
    /// Where the connection may push with `deliver`.
    pub delivers: Delivers,
}

pub(crate) enum Event {
    Attach(Box<Attach>),
    /// How a `deliver` the phone sent on a connection ended, for the device it named.
    Delivered(Box<Pushed>),
    /// The authorizer's answer to the core's question.
    Authorization(Result<bool, AccessError>),
    PairingCode(Result<PairingCode, AccessError>),
    Command(Command),
}

/// A push's outcome, for the connection that sent it.
pub(crate) struct Pushed {
    conn: u64,
    to: String,
    delivered: Delivered,
}

/// Frames read between two chunks of a file being sent, at most.
const READS_BETWEEN_CHUNKS: usize = 8;

impl SessionKind for Phones {
    type Core = Core;
    type Transport = Phone;
    type Answering = Reply;
    type Parts = ();
    type Wake = ();
    /// Nothing open (no connection, turn or card) and quiet for as long as its
    /// remembered ids count, so ending it forgets nothing that matters.
    const RETIRE_AFTER: Duration = RETIRE_AFTER;

    fn start(device_id: String, hub: &MobileHub) -> (Core, ()) {
        let config = &hub.own.config;
        let turn_timeout = Duration::from_secs(config.turn_timeout_s.into());
        let core = Core::new(
            device_id,
            config.max_message_chars as usize,
            Ids::new(OsEntropy),
        )
        .allow_private_push(hub.own.private_push)
        .turn_timeout(turn_timeout);
        (core, ())
    }

    fn ends(event: &Event) -> Option<(Close, &'static str)> {
        matches!(event, Event::Command(Command::Shutdown))
            .then_some((Close::Away, "server stopping"))
    }

    fn handle(session: &mut Session<Self>, event: Event, now: std::time::Instant) {
        match event {
            Event::Attach(attach) => {
                let Attach {
                    conn,
                    ready,
                    user_id,
                    user_name,
                    delivers,
                } = *attach;
                let id = conn.id;
                session.conns.attach(conn);
                session.send(id, Outgoing::Text(ready));
                session
                    .core
                    .handle_attach(id, user_id, user_name, delivers, now);
            }
            Event::Delivered(pushed) => {
                let Pushed {
                    conn,
                    to,
                    delivered,
                } = *pushed;
                session.core.handle_delivered(conn, &to, delivered);
            }
            Event::Authorization(answer) => session.core.handle_authorization(answer, now),
            Event::PairingCode(code) => session.core.handle_pairing_code(code),
            Event::Command(Command::Port(Call { request, reply })) => {
                let call = session.hold(reply);
                session.core.handle_call(call, request, now);
            }
            Event::Command(Command::Notify(notification)) => {
                session.core.handle_notification(notification, now);
            }
            Event::Command(Command::Deliver { deliver, reply }) => {
                let _ = reply.send(session.core.handle_deliver(*deliver));
            }
            Event::Command(Command::Approved { user_id }) => {
                session.core.handle_approved(&user_id, now);
            }
            Event::Command(Command::ShowCopy {
                prompt_id,
                question,
                reply,
            }) => {
                let Question {
                    prompt,
                    ttl_s,
                    asked_by,
                    ..
                } = *question;
                let shown = session
                    .core
                    .handle_copy(prompt_id, prompt, ttl_s, &asked_by, now);
                let _ = reply.send(shown);
            }
            // It ends the session (`SessionKind::ends`).
            Event::Command(Command::Shutdown) => {}
        }
    }

    /// What the phone did.
    fn handle_read(session: &mut Session<Self>, read: Read) {
        let now = session.heard();
        match read {
            Read::Message(Incoming::Frame(frame)) => session.core.handle_frame(*frame, now),
            Read::Message(Incoming::Bad {
                code,
                message,
                close,
            }) => session.core.handle_bad_frame(code, message, close),
            Read::Alive => {}
            // Settling hands the connection to its goodbye, which sends the close reply.
            Read::Closed => session.core.handle_closed(),
            Read::Lost => session.lost(),
        }
    }

    async fn carry_out(session: &mut Session<Self>, effect: Effect) {
        session.carry_out(effect).await;
    }

    fn timeout(session: &mut Session<Self>, now: Instant) {
        session.core.handle_timeout(now.into_std());
    }

    /// Not while a push is out: the phone hears the answers to its frames in order.
    fn reads(session: &Session<Self>) -> bool {
        session.core.reads_frames()
    }

    async fn end(session: &mut Session<Self>) {
        session.core.end();
        session.settle().await;
    }
}

impl Session<Phones> {
    /// Whether the phone's app is connected and in sight, for notifications.
    fn in_sight(&self, visible: bool) {
        let notifications = &self.hub.shared.notifications;
        notifications.set_in_sight(self.core.device_id(), self.core.user_id(), visible);
    }

    /// The questions still open on another device of this phone's person, shown here
    /// too as it comes online.
    async fn show_open_questions(&mut self) {
        let questions = &self.hub.shared.questions;
        let chat = Chat::mobile(self.core.device_id().to_owned());
        let now = std::time::Instant::now();
        let open = questions.open_for(self.core.user_id(), &chat, now);
        if open.is_empty() || !self.hub.may_see_questions(self.core.user_id()).await {
            return;
        }
        let name = phone_name(&self.hub.shared.store, &chat.id).await;
        for (prompt_id, question) in open {
            let left = question.expires.saturating_duration_since(now).as_secs();
            let ttl_s = Some(u32::try_from(left).unwrap_or(u32::MAX).max(1));
            let shown = self.core.handle_copy(
                prompt_id.clone(),
                question.prompt,
                ttl_s,
                &question.asked_by,
                now,
            );
            if shown.is_ok() {
                questions.shown(&prompt_id, chat.clone(), name.clone());
            }
        }
    }

    /// The phone is alive: it sent something, or took what was sent.
    fn heard(&mut self) -> std::time::Instant {
        let now = self.woken();
        self.core.heard(now);
        now
    }

    async fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Online { conn } => {
                self.went_online(conn);
                self.in_sight(true);
                self.show_open_questions().await;
            }
            Effect::Offline => {
                self.went_offline();
                self.in_sight(false);
            }
            Effect::Visible(visible) => self.in_sight(visible),
            Effect::Notify(note) => {
                let shared = &self.hub.shared;
                let user = self.core.user_id();
                shared
                    .notifications
                    .notify(&shared.store, user, &note)
                    .await;
            }
            Effect::SavePush(sub) => {
                let record = PushRecord {
                    device_id: self.core.device_id().to_owned(),
                    user_id: self.core.user_id().to_owned(),
                    endpoint: sub.endpoint,
                    p256dh: sub.p256dh,
                    auth: sub.auth,
                };
                let store = &self.hub.shared.store;
                let saved = store
                    .run(move |s| s.put_push_subscription(&record, now_ms()))
                    .await;
                let saved = saved.map_err(|err| {
                    warn!(%err, "could not keep a push subscription");
                    Failed
                });
                self.core.handle_push_stored(true, saved);
            }
            Effect::RemovePush => {
                let id = self.core.device_id().to_owned();
                let store = &self.hub.shared.store;
                let removed = store.run(move |s| s.remove_push_subscription(&id)).await;
                let removed = removed.map(drop).map_err(|err| {
                    warn!(%err, "could not drop a push subscription");
                    Failed
                });
                self.core.handle_push_stored(false, removed);
            }
            Effect::Replay => self.replay().await,
            Effect::Keep(frame) => {
                let id = self.core.device_id().to_owned();
                if let Err(err) = self
                    .hub
                    .shared
                    .store
                    .run(move |store| store.outbox_push(&id, &frame, now_ms()))
                    .await
                {
                    warn!(%err, "could not keep a reply for a phone that is away");
                }
            }
            Effect::Authorize { user_id } => self.authorize(user_id),
            Effect::AskPairingCode { user_id, user_name } => {
                self.ask_pairing_code(user_id, user_name, Event::PairingCode);
            }
            Effect::ToAgent(inbound) => self.hand_to_agent(*inbound),
            Effect::SaveFile(save) => {
                let SaveFile {
                    message_id,
                    extension,
                    parts,
                    saved,
                } = *save;
                let path = Self::save(&self.hub, &extension, parts).await;
                let now = Instant::now().into_std();
                self.core.handle_file_saved(message_id, saved, path, now);
            }
            Effect::SendFile {
                kind,
                path,
                caption,
                call,
            } => {
                let result = self.send_file(kind, &path, caption).await;
                self.answer(call, done(result).map_err(RequestError::from));
            }
            Effect::Deliver {
                conn,
                deliver,
                owner,
            } => self.deliver(conn, *deliver, owner),
            Effect::Answer { call, answer } => self.answer(call, answer),
            Effect::Count(counted) => self.count(counted),
            Effect::ReserveUpload { user, bytes } => {
                let granted = self.hub.upload_budget().reserve(&user, bytes);
                self.core.handle_upload_budget(granted);
            }
            Effect::ReleaseUpload { user, bytes } => {
                self.hub.upload_budget().release(&user, bytes);
            }
            Effect::CardShown { prompt_id } => {
                self.hub
                    .own
                    .cards
                    .insert(prompt_id, self.core.device_id().to_owned());
            }
            Effect::CardClosed { prompt_id } => {
                self.hub.own.cards.remove(&prompt_id);
            }
            Effect::WhoseCard { prompt_id } => {
                let owner = self.hub.own.cards.get(&prompt_id).map(|o| o.clone());
                self.core.handle_card_owner(prompt_id, owner);
            }
        }
    }

    /// Whatever the phone missed of a turn, in order, before anything new.
    async fn replay(&mut self) {
        let id = self.core.device_id().to_owned();
        let since = now_ms() - OUTBOX_TTL_MS;
        let missed = self
            .hub
            .shared
            .store
            .run(move |store| store.outbox_take(&id, since))
            .await
            .unwrap_or_else(|err| {
                warn!(%err, "could not read what a phone missed");
                Vec::new()
            });
        for frame in missed {
            let Some(conn) = self.conns.current() else {
                break;
            };
            let id = conn.id;
            self.send(id, Outgoing::Text(frame));
        }
    }

    /// Push the phone's `deliver` on a task of its own: the device it names may be this
    /// one, whose session would otherwise wait for itself. The outcome comes back
    /// through the mailbox.
    fn deliver(&self, conn: u64, deliver: Deliver, owner: Option<String>) {
        let hub = self.hub.clone();
        self.beside(async move {
            let to = deliver.to.clone();
            let delivered = hub.deliver(deliver, owner).await;
            let pushed = Pushed {
                conn,
                to,
                delivered,
            };
            Event::Delivered(Box::new(pushed))
        });
    }

    /// Take what the phone has sent meanwhile, without waiting for more: between the
    /// chunks of a long download, so its pings are answered and it counts as alive.
    fn read_ready(&mut self) {
        for _ in 0..READS_BETWEEN_CHUNKS {
            let reading = Phones::reads(self);
            let metrics = &self.hub.shared.metrics;
            let Some(read) = self.conns.next(reading, metrics).now_or_never() else {
                return;
            };
            Phones::handle_read(self, read);
        }
    }

    /// Ask the authorizer on a task of its own (under Hermes the question crosses a
    /// pipe); the answer comes back through the mailbox.
    fn authorize(&mut self, user_id: String) {
        if self.hub.authorized.knows(&user_id) {
            return self
                .core
                .handle_authorization(Ok(true), Instant::now().into_std());
        }
        let Some(authorizer) = self.hub.shared.authorizer().cloned() else {
            // No backend yet: nothing may wait for an answer that will not come.
            let unanswered = Err(AccessError("there is no authorizer".to_owned()));
            return self
                .core
                .handle_authorization(unanswered, Instant::now().into_std());
        };
        let hub = self.hub.clone();
        self.beside(async move {
            let answer = hub
                .authorized
                .check(authorizer.as_ref(), Platform::Mobile, &user_id)
                .await;
            Event::Authorization(answer)
        });
    }

    /// Write a file for the agent into the inbox; its name is of our own making.
    async fn save(
        hub: &MobileHub,
        extension: &str,
        parts: Vec<Vec<u8>>,
    ) -> Result<std::path::PathBuf, Failed> {
        let size = parts.iter().map(|part| part.len() as u64).sum();
        let written = hub
            .shared
            .inbox
            .put(extension, size, move |path| {
                files::write_private_parts(path, &parts)
            })
            .await;
        match written {
            Ok((path, ())) => Ok(path),
            Err(err) => {
                warn!(%err, "could not save a phone's file");
                Err(Failed)
            }
        }
    }

    /// Read a file and send it in `media` frames, one chunk in memory at a time however
    /// large the file and slow the phone.
    async fn send_file(
        &mut self,
        kind: herald_mobile_proto::MediaKindDown,
        path: &std::path::Path,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        let unreadable =
            |e: std::io::Error| DeliveryError::Failed(format!("{}: {e}", path.display()));
        let size = tokio::fs::metadata(path).await.map_err(unreadable)?.len();
        let file_down = self.core.start_file(kind, path, caption, size)?;
        let mut file = tokio::fs::File::open(path).await.map_err(unreadable)?;
        let mut piece = Vec::new();
        for part in 0..file_down.parts {
            let len = file_down.part_len(part);
            piece.resize(usize::try_from(len).unwrap_or(usize::MAX), 0);
            file.read_exact(&mut piece).await.map_err(unreadable)?;
            self.core.emit(&file_down.frame(part, &piece))?;
            // Sent, or kept for a phone that is away, before the next chunk is read.
            self.settle().await;
            let metrics = &self.hub.shared.metrics;
            if let Some(conn) = self.conns.current() {
                if conn.written(metrics).await {
                    // It took the chunk: alive, though it may have had nothing to say.
                    let _ = self.heard();
                    self.read_ready();
                } else {
                    self.lost();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
