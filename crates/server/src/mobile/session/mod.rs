//! One session per phone (per `device.id`): the only owner of its conversation state.
//!
//! The state and its rules are [`Core`] (crate `herald-session`), a state machine with
//! no I/O. This module is its shell, an actor that does what the core asks: frames from
//! the phone's connection, calls from the agent and the authorizer's answers arrive on
//! one bounded mailbox; the shell feeds them to the core with the time, writes the
//! frames it hands back into the connection's outbox, carries out its effects (the
//! store, the inbox, the authorizer, the hub's cards and upload budget, files to send,
//! the agent's queue) and sleeps until the core's next deadline (a card lapsing, the
//! avatar going idle).

use std::sync::Arc;
use std::time::Duration;

use herald_mobile_proto::{limits, ClientFrame, Deliver};
use herald_port::{DeliveryError, Notification, PairingCode, Platform, RequestError, Response};
use herald_session::io::Close;
use herald_session::mobile::{Core, Effect, SaveFile};
use herald_session::{done, CallId, Counted, Ids, SessionCore};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};
use tracing::warn;

use super::MobileHub;
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::devices::{hand_over, AgentQueue, MAILBOX};
use crate::files;
use crate::ids::OsEntropy;
use crate::queue;
use crate::session_io::{self, Outboxes};
use crate::socket::{Outgoing, SendQueue};

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
    Frame {
        conn: u64,
        frame: Box<ClientFrame>,
    },
    Closed {
        conn: u64,
    },
    /// The authorizer's answer to the core's question.
    Authorization(Result<bool, String>),
    PairingCode(Result<PairingCode, String>),
    Command(Command),
}

pub(crate) struct Session {
    hub: Arc<MobileHub>,
    mailbox: queue::Sender<Event>,
    core: Core,
    /// The calls the core will answer, by the id it knows them by (few at a time).
    waiting: Vec<(CallId, Reply)>,
    next_call: u64,
    outboxes: Outboxes,
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
                hub.config.max_message_chars as usize,
                Ids::new(OsEntropy),
            ),
            waiting: Vec::new(),
            next_call: 0,
            hub,
            mailbox: tx.clone(),
            outboxes: Outboxes::default(),
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
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    if self.retire_at().is_some_and(|at| at <= now) {
                        break true;
                    }
                    self.core.handle_timeout(now.into_std());
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
        session_io::retire_at(&self.core, self.last_event, RETIRE_AFTER)
    }

    fn next_deadline(&self) -> Option<Instant> {
        session_io::next_deadline(&self.core, self.retire_at())
    }

    fn handle(&mut self, event: Event, now: Instant) {
        let now = now.into_std();
        match event {
            Event::Attach(attach) => {
                let Attach {
                    conn,
                    outbox,
                    user_id,
                    user_name,
                } = *attach;
                self.outboxes.attach(conn, outbox);
                self.core.handle_attach(conn, user_id, user_name);
            }
            Event::Frame { conn, frame } if self.core.is_current(conn) => {
                self.core.handle_frame(*frame, now);
            }
            Event::Closed { conn } if self.core.is_current(conn) => self.core.handle_closed(),
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
        self.outboxes.settled(&self.core);
    }

    async fn flush(&mut self) {
        self.outboxes.flush(&mut self.core).await;
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
                let activity = &self.hub.metrics.activity;
                activity.said(&inbound.source.chat, &inbound.body);
                if let Some(agent) = self.hub.devices.agent() {
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
                let path = self.save(&extension, parts).await;
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
            Effect::Answer { call, answer } => self.answer(call, answer),
            Effect::Count(Counted::Turn) => self.hub.metrics.turn(Platform::Mobile),
            Effect::Count(Counted::Error(code)) => self.hub.metrics.error(Platform::Mobile, code),
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
                    .cards
                    .insert(prompt_id, self.core.device_id().to_owned());
            }
            Effect::CardClosed { prompt_id } => {
                self.hub.cards.remove(&prompt_id);
            }
            Effect::WhoseCard { prompt_id } => {
                let owner = self.hub.cards.get(&prompt_id).map(|o| o.clone());
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
            .store
            .run(move |store| store.outbox_take(&id, since))
            .await
            .unwrap_or_else(|err| {
                warn!(%err, "could not read what a phone missed");
                Vec::new()
            });
        if let Some((_, outbox)) = self.outboxes.current() {
            for frame in missed {
                let _ = outbox.send(Outgoing::Text(frame)).await;
            }
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
        let Some(authorizer) = self.hub.devices.authorizer().cloned() else {
            // No backend yet: nothing may wait for an answer that will not come.
            let unanswered = Err("there is no authorizer".to_owned());
            return self
                .core
                .handle_authorization(unanswered, Instant::now().into_std());
        };
        let (hub, mailbox) = (self.hub.clone(), self.mailbox.clone());
        tokio::spawn(async move {
            let answer = hub
                .authorized
                .check(authorizer.as_ref(), Platform::Mobile, &user_id)
                .await
                .map_err(|err| err.to_string());
            let _ = mailbox.send(Event::Authorization(answer)).await;
        });
    }

    fn ask_pairing_code(&self, user_id: String, user_name: Option<String>) {
        let Some(authorizer) = self.hub.devices.authorizer().cloned() else {
            return;
        };
        let mailbox = self.mailbox.clone();
        tokio::spawn(async move {
            let code = authorizer
                .pairing_code(Platform::Mobile, &user_id, user_name.as_deref())
                .await
                .map_err(|err| err.to_string());
            let _ = mailbox.send(Event::PairingCode(code)).await;
        });
    }

    /// Write a file for the agent into the inbox; its name is of our own making.
    async fn save(
        &self,
        extension: &str,
        parts: Vec<Vec<u8>>,
    ) -> Result<std::path::PathBuf, String> {
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
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
