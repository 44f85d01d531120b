//! One session per phone (per `device.id`): the only owner of its conversation state.
//!
//! The state and its rules are [`Core`] (crate `herald-session`), a state machine with
//! no I/O. This module is its shell, one task that does what the core asks. It owns the
//! phone's connection while there is one ([`crate::shell`]): it reads the phone's
//! frames, writes the core's and pings a quiet phone, so a connected phone is one task.
//! Calls from the agent, the authorizer's answers and a new connection arrive on one
//! bounded mailbox. The shell feeds it all to the core with the time, carries out its
//! effects (the store, the inbox, the authorizer, the hub's cards and upload budget,
//! files to send, pushes, the agent's queue) and sleeps until the next deadline (a
//! card lapsing, the avatar going idle, the keepalive).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use herald_mobile_proto::{limits, Deliver};
use herald_port::{
    AccessError, DeliveryError, Notification, PairingCode, Platform, RequestError, Response,
};
use herald_session::io::Close;
use herald_session::mobile::link::{Delivered, Delivers, Due, Keepalive};
use herald_session::mobile::{Core, Effect, SaveFile};
use herald_session::{done, CallId, Counted, Ids, SessionCore};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};
use tracing::warn;

use super::socket::{Connection, Incoming, Phone, Read};
use super::MobileHub;
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::devices::{hand_over, AgentQueue, MAILBOX};
use crate::files;
use crate::ids::OsEntropy;
use crate::queue;
use crate::shell::{self, Connections, Next};
use crate::socket::Outgoing;

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
    Shutdown,
}

/// A connection that passed `hello`, handed to the session.
pub(crate) struct Attach {
    pub conn: Box<Connection>,
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

pub(crate) struct Session {
    hub: Arc<MobileHub>,
    mailbox: queue::Sender<Event>,
    core: Core,
    /// The calls the core will answer, by the id it knows them by (few at a time).
    waiting: Vec<(CallId, Reply)>,
    next_call: u64,
    conns: Connections<Phone>,
    /// When the current connection is pinged, and when its silence ends it.
    keepalive: Option<Keepalive>,
    to_agent: AgentQueue,
    /// When the mailbox last had something for the session.
    last_event: Instant,
}

impl Session {
    pub(super) fn spawn(device_id: String, hub: Arc<MobileHub>) -> queue::Sender<Event> {
        let (tx, rx) = queue::channel(MAILBOX);
        let session = Session {
            core: Core::new(
                device_id,
                hub.own.config.max_message_chars as usize,
                Ids::new(OsEntropy),
            ),
            waiting: Vec::new(),
            next_call: 0,
            hub,
            mailbox: tx.clone(),
            conns: Connections::default(),
            keepalive: None,
            to_agent: AgentQueue::default(),
            last_event: Instant::now(),
        };
        tokio::spawn(session.run(rx));
        tx
    }

    async fn run(mut self, mut mailbox: queue::Receiver<Event>) {
        let retired = loop {
            self.settle().await;
            let deadline = self.next_deadline();
            let event = tokio::select! {
                event = mailbox.recv() => event,
                next = self.conns.next(&self.hub.shared.metrics) => {
                    Box::pin(self.handle_next(next)).await;
                    continue;
                }
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    if self.retire_at().is_some_and(|at| at <= now) {
                        break true;
                    }
                    self.core.handle_timeout(now.into_std());
                    Box::pin(self.keep_alive(now)).await;
                    continue;
                }
            };
            let now = Instant::now();
            self.last_event = now;
            match event {
                None => break false,
                Some(Event::Command(Command::Shutdown)) => {
                    self.core.close(Close::Away, "server stopping");
                    self.settle().await;
                    break false;
                }
                Some(event) => self.handle(event, now),
            }
        };
        self.core.end();
        self.settle().await;
        self.hub
            .devices
            .session_ended(self.core.device_id(), &self.mailbox);
        if retired {
            hand_over(mailbox, || self.hub.session(self.core.device_id())).await;
        }
    }

    /// When an idle session ends: nothing open (no connection, turn or card) and quiet
    /// for as long as its remembered ids count, so ending it forgets nothing that
    /// matters and abandoned device ids do not keep a session each.
    fn retire_at(&self) -> Option<Instant> {
        shell::retire_at(&self.core, self.last_event, RETIRE_AFTER)
    }

    /// The core's next timer, the retirement or the keepalive, whichever is first.
    fn next_deadline(&self) -> Option<Instant> {
        let keepalive = self
            .keepalive
            .as_ref()
            .map(|k| Instant::from_std(k.deadline()));
        [
            shell::next_deadline(&self.core, self.retire_at()),
            keepalive,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Ping the phone on schedule; one silent for too long is gone.
    async fn keep_alive(&mut self, now: Instant) {
        let Some(keepalive) = &mut self.keepalive else {
            return;
        };
        if keepalive.deadline() > now.into_std() {
            return;
        }
        match keepalive.handle_deadline(now.into_std()) {
            Due::Ping => {
                if let Some(conn) = self.conns.current() {
                    let id = conn.id;
                    self.send(id, Outgoing::Ping).await;
                }
            }
            Due::Gone => self.core.close(Close::Away, "keepalive timeout"),
        }
    }

    /// What the connection had next: a read from the phone or a frame to write.
    async fn handle_next(&mut self, next: Next<Read>) {
        match next {
            Next::Read(read) => self.handle_read(read),
            Next::Write(out) => {
                shell::write_queued(
                    &mut self.core,
                    &mut self.conns,
                    out,
                    &self.hub.shared.metrics,
                )
                .await;
            }
        }
    }

    /// The phone is alive: it sent something, or took what was sent.
    fn heard(&mut self) {
        let now = Instant::now();
        self.last_event = now;
        if let Some(keepalive) = &mut self.keepalive {
            keepalive.heard(now.into_std());
        }
    }

    /// What the phone did.
    fn handle_read(&mut self, read: Read) {
        self.heard();
        let now = self.last_event;
        match read {
            Read::Message(Incoming::Frame(frame)) => {
                self.core.handle_frame(*frame, now.into_std());
            }
            Read::Message(Incoming::Bad {
                code,
                message,
                close,
            }) => self.core.handle_bad_frame(code, message, close),
            Read::Alive => {}
            // Settling hands the connection to its goodbye, which sends the close reply.
            Read::Closed => self.core.handle_closed(),
            Read::Lost => shell::lost(&mut self.core, &mut self.conns),
        }
    }

    /// Send `out` to connection `id`; dropped when that connection is gone.
    async fn send(&mut self, id: u64, out: Outgoing) {
        shell::send(
            &mut self.core,
            &mut self.conns,
            id,
            out,
            &self.hub.shared.metrics,
        )
        .await;
    }

    fn handle(&mut self, event: Event, now: Instant) {
        let now = now.into_std();
        match event {
            Event::Attach(attach) => {
                let Attach {
                    conn,
                    user_id,
                    user_name,
                    delivers,
                } = *attach;
                let id = conn.id;
                self.conns.attach(conn);
                self.keepalive = Some(Keepalive::new(now));
                self.core.handle_attach(id, user_id, user_name, delivers);
            }
            Event::Delivered(pushed) => {
                let Pushed {
                    conn,
                    to,
                    delivered,
                } = *pushed;
                self.core.handle_delivered(conn, &to, delivered);
            }
            Event::Authorization(answer) => self.core.handle_authorization(answer, now),
            Event::PairingCode(code) => self.core.handle_pairing_code(code),
            Event::Command(Command::Port(Call { request, reply })) => {
                self.next_call += 1;
                let call = CallId(self.next_call);
                self.waiting.push((call, reply));
                self.core.handle_call(call, request, now);
            }
            Event::Command(Command::Notify(notification)) => {
                self.core.handle_notification(notification, now);
            }
            Event::Command(Command::Deliver { deliver, reply }) => {
                let _ = reply.send(self.core.handle_deliver(*deliver));
            }
            Event::Command(Command::Approved { user_id }) => {
                self.core.handle_approved(&user_id, now);
            }
            _ => {}
        }
    }

    /// Send what the core handed back and carry out its effects, in order, until it
    /// has nothing more.
    async fn settle(&mut self) {
        loop {
            self.flush().await;
            let Some(effect) = self.core.poll_effect() else {
                break;
            };
            self.carry_out(effect).await;
        }
        self.conns.settle(&self.core, &self.hub.shared.metrics);
        if self.conns.current().is_none() {
            self.keepalive = None;
        }
    }

    async fn flush(&mut self) {
        shell::flush(&mut self.core, &mut self.conns, &self.hub.shared.metrics).await;
    }

    async fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Online { conn } => {
                self.hub.devices.went_online(self.core.device_id(), conn);
            }
            Effect::Offline => {
                self.hub.devices.went_offline(self.core.device_id());
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
                self.ask_pairing_code(user_id, user_name);
            }
            Effect::ToAgent(inbound) => {
                let activity = &self.hub.shared.metrics.activity;
                activity.said(&inbound.source.chat, &inbound.body);
                if let Some(agent) = self.hub.shared.agent() {
                    if !self.to_agent.push(agent, *inbound) {
                        self.core.handle_agent_full();
                    }
                }
            }
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
            Effect::Count(Counted::Turn) => self.hub.shared.metrics.turn(Platform::Mobile),
            Effect::Count(Counted::Error(code)) => {
                self.hub.shared.metrics.error(Platform::Mobile, code)
            }
            Effect::ReserveUpload { user, bytes } => {
                let granted = self
                    .hub
                    .upload_budget()
                    .reserve(&user, bytes)
                    .map_err(|err| err.to_string());
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

    /// Send the core's answer to call `call` back to whoever is waiting for it.
    fn answer(&mut self, call: CallId, answer: Result<Response, RequestError>) {
        if let Some(at) = self.waiting.iter().position(|(id, _)| *id == call) {
            let (_, reply) = self.waiting.swap_remove(at);
            if self.waiting.is_empty() {
                self.waiting = Vec::new();
            }
            let _ = reply.send(answer);
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
            self.send(id, Outgoing::Text(frame)).await;
        }
    }

    /// Push the phone's `deliver` on a task of its own: the device it names may be this
    /// one, whose session would otherwise wait for itself. The outcome comes back
    /// through the mailbox.
    fn deliver(&self, conn: u64, deliver: Deliver, owner: Option<String>) {
        let (hub, mailbox) = (self.hub.clone(), self.mailbox.clone());
        tokio::spawn(async move {
            let to = deliver.to.clone();
            let delivered = hub.deliver(deliver, owner).await;
            let pushed = Pushed {
                conn,
                to,
                delivered,
            };
            let _ = mailbox.send(Event::Delivered(Box::new(pushed))).await;
        });
    }

    /// Take what the phone has sent meanwhile, without waiting for more: between the
    /// chunks of a long download, so its pings are answered and it counts as alive.
    async fn read_ready(&mut self) {
        for _ in 0..READS_BETWEEN_CHUNKS {
            let Some(next) = self.conns.next(&self.hub.shared.metrics).now_or_never() else {
                return;
            };
            self.handle_next(next).await;
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
        let (hub, mailbox) = (self.hub.clone(), self.mailbox.clone());
        tokio::spawn(async move {
            let answer = hub
                .authorized
                .check(authorizer.as_ref(), Platform::Mobile, &user_id)
                .await;
            let _ = mailbox.send(Event::Authorization(answer)).await;
        });
    }

    fn ask_pairing_code(&self, user_id: String, user_name: Option<String>) {
        let Some(authorizer) = self.hub.shared.authorizer().cloned() else {
            return;
        };
        let mailbox = self.mailbox.clone();
        tokio::spawn(async move {
            let code = authorizer
                .pairing_code(Platform::Mobile, &user_id, user_name.as_deref())
                .await;
            let _ = mailbox.send(Event::PairingCode(code)).await;
        });
    }

    /// Write a file for the agent into the inbox; its name is of our own making.
    async fn save(
        hub: &MobileHub,
        extension: &str,
        parts: Vec<Vec<u8>>,
    ) -> Result<std::path::PathBuf, String> {
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
                Err("the server could not save the file".into())
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
            Box::pin(self.settle()).await;
            if self.conns.current().is_some() {
                // It took the chunk: alive, though it may have had nothing to say.
                self.heard();
                Box::pin(self.read_ready()).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
