//! One actor per device: the only owner of the device's conversation state.
//!
//! Events arrive on one bounded mailbox: frames from the current connection's task
//! (`socket.rs`), commands from the agent (through the conversation port) and from the
//! admin API. Timers (heartbeat, silence, question ttl, action timeouts, firmware update
//! waits) are deadlines computed from that state, so the loop sleeps until the earliest
//! one and nothing else ticks.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::{self as proto, limits, DeviceMessage, ServerMessage};
use herald_media::text::{shape_reply, Charset};
use herald_port::{
    ActionError, Chat, Choice, Command as ConvCommand, DeliveryError, DeviceProfile, Inbound,
    InboundBody, Outcome, PairingCode, Platform, Prompt, PromptAnswer, SendOptions, Source,
};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio::time::{sleep_until, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::{debug, info, warn};

use super::audio::{Playback, SpeechFile, Utterance};
use super::image;
use super::ota::{self, Link, Updates};
use super::peer::Peer;
use super::prompts::{PromptQueue, Question, Show};
use super::sensors::SensorWrites;
use super::GadgetHub;
use crate::calls::{Call, Reply};
use crate::clock::now_ms;
use crate::ids;
use crate::mailboxes::{hand_over, AgentQueue, MAILBOX};
use crate::queue;
use crate::socket::{Closed, Outgoing, Room, SendQueue};
use crate::store::blocking;

/// What the agent side and the admin API ask of a device.
pub(crate) enum Command {
    /// A conversation-port call.
    Port(Call),
    /// A firmware update request from the admin API.
    Ota(ota::Request),
    /// Authorization changed (pairing approved or revoked).
    SetPaired(bool),
    /// The device was removed from the store: drop the connection and end.
    Forget,
    /// The server is stopping.
    Shutdown,
}

/// A connection that finished its handshake, handed to the session.
pub(crate) struct Attach {
    pub conn: u64,
    pub outbox: SendQueue,
    pub hello: proto::Hello,
    pub paired: bool,
    pub session_id: String,
}

pub(crate) enum Event {
    Attach(Box<Attach>),
    Frame {
        conn: u64,
        msg: Box<DeviceMessage>,
    },
    BadFrame {
        conn: u64,
        reason: String,
        /// Close the connection with this code after the error frame: the connection
        /// cannot read on (a frame over the limit, text that is not UTF-8).
        close: Option<CloseCode>,
    },
    Binary {
        conn: u64,
        data: Vec<u8>,
    },
    /// A control frame: proof of life only.
    Alive {
        conn: u64,
    },
    /// A speech stream played to its end (or failed).
    SpeechDone {
        stream: u8,
    },
    Closed {
        conn: u64,
    },
    /// Boxed: commands are large and rare next to frames, and an event's size is
    /// what every mailbox slot costs.
    Command(Box<Command>),
}

/// The live connection of a device.
struct Conn {
    id: u64,
    outbox: SendQueue,
    peer: Peer,
    last_inbound: Instant,
    next_ping: Instant,
}

struct PendingAction {
    reply: oneshot::Sender<Result<Value, ActionError>>,
    deadline: Instant,
}

pub(crate) struct Session {
    device_id: String,
    hub: Arc<GadgetHub>,
    mailbox: queue::Sender<Event>,
    conn: Option<Conn>,
    paired: bool,
    prompts: PromptQueue,
    actions: HashMap<String, PendingAction>,
    /// The turn replies belong to, between `turn_started` and `turn_ended`.
    turn: Option<String>,
    /// The message id of the reply being streamed, if any.
    streaming: Option<String>,
    to_agent: AgentQueue,
    heartbeat: Duration,
    ota: Updates,
    /// The utterance being received, if any; boxed, as `deferred_end` is, so an idle
    /// session does not carry their room.
    utterance: Option<Box<Utterance>>,
    /// The speech being sent, if any.
    playback: Option<Playback>,
    /// Stream ids for audio and pictures to the device.
    next_stream: u8,
    /// A `turn.end` held back until the turn's speech has played.
    deferred_end: Option<Box<ServerMessage>>,
    /// Readings on their way to the store, at most one write per window.
    sensors: SensorWrites,
    /// When the mailbox last had something for the session.
    last_event: Instant,
}

/// An idle session ends this long after its last event.
const RETIRE_AFTER: Duration = Duration::from_secs(3600);

/// A wait for room in a connection's outbox, for a firmware frame. Boxed and kept
/// across the loop's turns while an update sends: inline, it would make every idle
/// session's task a few hundred bytes larger.
type RoomWait = Pin<Box<dyn Future<Output = Result<Room, Closed>> + Send>>;

/// The room `wait` (for connection `.0`) found, once it does; never, with none. Either
/// way the wait is over: the next turn of the loop starts another if one is wanted.
async fn wait_for_room(wait: &mut Option<(u64, RoomWait)>) -> Option<Room> {
    let Some((_, room)) = wait.as_mut() else {
        return std::future::pending().await;
    };
    let found = room.as_mut().await;
    *wait = None;
    found.ok()
}

impl Session {
    pub(super) fn spawn(device_id: String, hub: Arc<GadgetHub>) -> queue::Sender<Event> {
        let (tx, rx) = queue::channel(MAILBOX);
        let heartbeat = Duration::from_secs(u64::from(hub.config.heartbeat_s));
        let ota = Updates::new(device_id.clone(), hub.clone());
        let session = Session {
            device_id,
            hub,
            mailbox: tx.clone(),
            conn: None,
            paired: false,
            prompts: PromptQueue::default(),
            actions: HashMap::new(),
            turn: None,
            streaming: None,
            to_agent: AgentQueue::default(),
            heartbeat,
            ota,
            utterance: None,
            playback: None,
            next_stream: 1,
            deferred_end: None,
            sensors: SensorWrites::default(),
            last_event: Instant::now(),
        };
        // Boxed, with its handlers' futures boxed below: an idle device's task then holds
        // a pointer instead of every handler's state inline (`herald bench connect`
        // measures the memory this saves per connection).
        tokio::spawn(Box::new(session).run(rx));
        tx
    }

    async fn run(mut self: Box<Self>, mut mailbox: queue::Receiver<Event>) {
        let mut room = None;
        let retired = loop {
            let deadline = self.next_deadline();
            match self.frame_conn() {
                Some(conn) if room.as_ref().is_none_or(|(id, _)| *id != conn.id) => {
                    room = Some((conn.id, Box::pin(conn.outbox.clone().reserve()) as RoomWait));
                }
                Some(_) => {}
                None => room = None,
            }
            let event = tokio::select! {
                event = mailbox.recv() => event,
                _ = sleep_until(deadline.unwrap_or_else(far_future)), if deadline.is_some() => {
                    let now = Instant::now();
                    if self.retire_at().is_some_and(|at| at <= now) {
                        break true;
                    }
                    Box::pin(self.on_timer(now)).await;
                    continue;
                }
                Some(room) = wait_for_room(&mut room) => {
                    Box::pin(self.ota.send_frame(room)).await;
                    continue;
                }
            };
            let Some(event) = event else { break false };
            self.last_event = Instant::now();
            match event {
                Event::Command(command) if matches!(*command, Command::Forget) => {
                    Box::pin(self.drop_conn(CloseCode::Normal, "forgotten")).await;
                    break false;
                }
                Event::Command(command) if matches!(*command, Command::Shutdown) => {
                    Box::pin(self.drop_conn(CloseCode::Away, "server stopping")).await;
                    break false;
                }
                event => Box::pin(self.handle(event)).await,
            }
        };
        self.fail_actions(ActionError::Disconnected);
        self.hub.session_ended(&self.device_id, &self.mailbox);
        if retired {
            Box::pin(hand_over(mailbox, || self.hub.session(&self.device_id))).await;
        }
    }

    /// When an idle session ends: nothing open (no connection, turn, question, action
    /// or firmware transfer; updates resume from the store) and quiet for
    /// [`RETIRE_AFTER`], so devices that never come back do not keep a session each.
    fn retire_at(&self) -> Option<Instant> {
        let idle = self.conn.is_none()
            && self.turn.is_none()
            && self.prompts.head().is_none()
            && self.actions.is_empty()
            && self.ota.next_deadline().is_none();
        idle.then(|| self.last_event + RETIRE_AFTER)
    }

    fn chat(&self) -> Chat {
        Chat::gadget(self.device_id.clone())
    }

    /// Where the next firmware frame goes, once the window is open: it waits for room
    /// in the outbox alongside the mailbox, so conversation traffic is never held up.
    fn frame_conn(&self) -> Option<&Conn> {
        self.conn.as_ref().filter(|_| self.ota.wants_frame())
    }

    fn next_deadline(&self) -> Option<Instant> {
        let conn = self.conn.as_ref().map(|c| {
            c.next_ping
                .min(c.last_inbound + self.heartbeat * limits::DEAD_AFTER_HEARTBEATS)
        });
        [
            conn,
            self.prompts.next_deadline(),
            self.actions.values().map(|a| a.deadline).min(),
            self.ota.next_deadline(),
            self.sensors.deadline(),
            self.retire_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    async fn handle(&mut self, event: Event) {
        match event {
            Event::Attach(attach) => self.attach(*attach).await,
            Event::Frame { conn, msg } if self.is_current(conn) => {
                self.touch();
                self.on_message(*msg).await;
            }
            Event::BadFrame {
                conn,
                reason,
                close,
            } if self.is_current(conn) => {
                self.touch();
                debug!(device = %self.device_id, %reason, "bad frame");
                self.hub.metrics.error(Platform::Gadget, "protocol");
                let error = ServerMessage::Error(proto::Error {
                    code: proto::ErrorCode::Protocol,
                    message: reason,
                });
                self.send(&error).await;
                if let Some(code) = close {
                    self.drop_conn(code, "protocol").await;
                }
            }
            Event::Binary { conn, data } if self.is_current(conn) => {
                self.touch();
                self.on_binary(&data);
            }
            Event::Alive { conn } if self.is_current(conn) => self.touch(),
            Event::SpeechDone { stream }
                if self.playback.as_ref().is_some_and(|p| p.stream == stream) =>
            {
                self.playback = None;
                self.send_deferred_end().await;
            }
            Event::Closed { conn } if self.is_current(conn) => self.detach().await,
            Event::Command(command) => self.on_command(*command).await,
            // Frames of a connection that was replaced or timed out.
            _ => {}
        }
    }

    fn is_current(&self, conn: u64) -> bool {
        self.conn.as_ref().is_some_and(|c| c.id == conn)
    }

    fn touch(&mut self) {
        if let Some(conn) = &mut self.conn {
            conn.last_inbound = Instant::now();
        }
    }

    async fn attach(&mut self, attach: Attach) {
        // A second connection replaces the first, which is closed normally.
        self.drop_conn(CloseCode::Normal, "replaced by a new connection")
            .await;
        let now = Instant::now();
        self.conn = Some(Conn {
            id: attach.conn,
            outbox: attach.outbox,
            peer: Peer::from(attach.hello),
            last_inbound: now,
            next_ping: now + self.heartbeat,
        });
        self.paired = attach.paired;
        self.hub.online.insert(self.device_id.clone(), attach.conn);
        let welcome = ServerMessage::Welcome(proto::Welcome {
            session: attach.session_id,
            paired: self.paired,
            heartbeat_s: self.hub.config.heartbeat_s,
            server: "herald".into(),
            proto: proto::PROTO_VERSION,
        });
        self.send(&welcome).await;
        if self.paired {
            self.show_head().await;
        } else {
            self.send_pairing().await;
        }
        if let Some(link) = link(self.conn.as_ref()) {
            self.ota.attached(link).await;
        }
    }

    /// The connection ended on its own (closed, failed or timed out).
    async fn detach(&mut self) {
        // Their outbox is gone with the connection.
        self.playback = None;
        self.deferred_end = None;
        self.utterance = None;
        if self.conn.take().is_some() {
            self.hub.online.remove(&self.device_id);
            if !self.paired {
                self.hub
                    .waiting
                    .disconnected(&self.device_id, Instant::now().into_std());
            }
            self.ota.detached().await;
            self.fail_actions(ActionError::Disconnected);
            self.streaming = None;
            if let Some(readings) = self.sensors.flush() {
                self.write_sensors(readings).await;
            }
            let (store, id) = (self.hub.store.clone(), self.device_id.clone());
            if let Err(err) = blocking(move || store.set_last_seen(&id, now_ms())).await {
                warn!(%err, "could not record last_seen");
            }
        }
    }

    async fn drop_conn(&mut self, code: CloseCode, reason: &str) {
        if let Some(conn) = &self.conn {
            let _ = conn
                .outbox
                .send(Outgoing::Close(code, reason.to_owned()))
                .await;
        }
        self.detach().await;
    }

    async fn send(&self, msg: &ServerMessage) {
        if let Some(conn) = &self.conn {
            // A full outbox makes the session wait: backpressure, not a growing buffer.
            let _ = conn.outbox.send(Outgoing::Text(msg.encode())).await;
        }
    }

    fn shape(&self, text: &str) -> String {
        let charset = self.conn.as_ref().map_or(Charset::Utf8, |c| c.peer.charset);
        shape_reply(text, charset)
    }

    async fn send_pairing(&self) {
        let Some(authorizer) = self.hub.authorizer() else {
            return;
        };
        let name = self.conn.as_ref().and_then(|c| c.peer.name.as_deref());
        match authorizer
            .pairing_code(Platform::Gadget, &self.device_id, name)
            .await
        {
            Ok(PairingCode { code, command }) => {
                self.send(&ServerMessage::Pairing(proto::Pairing { code, command }))
                    .await;
            }
            Err(err) => warn!(%err, device = %self.device_id, "could not create a pairing code"),
        }
    }

    async fn write_sensors(&self, readings: Map<String, Value>) {
        let (store, id) = (self.hub.store.clone(), self.device_id.clone());
        if let Err(err) = blocking(move || store.merge_sensors(&id, &readings)).await {
            warn!(%err, "could not store sensors");
        }
    }

    async fn on_timer(&mut self, now: Instant) {
        if let Some(readings) = self.sensors.due(now) {
            self.write_sensors(readings).await;
        }
        if let Some(conn) = &mut self.conn {
            if now >= conn.last_inbound + self.heartbeat * limits::DEAD_AFTER_HEARTBEATS {
                info!(device = %self.device_id, "gadget silent for too long; closing");
                self.drop_conn(CloseCode::Away, "heartbeat timeout").await;
            } else if now >= conn.next_ping {
                conn.next_ping = now + self.heartbeat;
                let ping = ServerMessage::Ping(proto::Ping {
                    ts: Some(u64::try_from(now_ms()).unwrap_or(0)),
                });
                self.send(&ping).await;
            }
        }
        let (expired, next) = self.prompts.expire(now);
        let next = next.cloned();
        if !expired.is_empty() {
            debug!(device = %self.device_id, ?expired, "questions expired");
            if let Some(next) = next {
                self.show(&next).await;
            }
        }
        let overdue: Vec<String> = self
            .actions
            .iter()
            .filter(|(_, a)| a.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in overdue {
            if let Some(action) = self.actions.remove(&id) {
                let _ = action.reply.send(Err(ActionError::Timeout));
            }
        }
        if let Some(link) = link(self.conn.as_ref()) {
            self.ota.on_timer(now, link).await;
        }
    }

    fn fail_actions(&mut self, error: ActionError) {
        for (_, action) in self.actions.drain() {
            let _ = action.reply.send(Err(error.clone()));
        }
    }

    // ---- device → agent ----

    async fn on_message(&mut self, msg: DeviceMessage) {
        match msg {
            DeviceMessage::Ping(ping) => {
                self.send(&ServerMessage::Pong(proto::Pong { ts: ping.ts }))
                    .await;
            }
            DeviceMessage::Pong(_) => {}
            DeviceMessage::Text(text) => {
                if text.text.chars().count() > limits::MAX_TEXT {
                    self.notice("That message is too long.").await;
                    return;
                }
                let id = message_id(text.id);
                self.forward(
                    id,
                    InboundBody::Text {
                        text: text.text,
                        reply_to: None,
                    },
                )
                .await;
            }
            DeviceMessage::Cancel(_) => {
                self.stop_speech().await;
                self.command(ConvCommand::Stop).await;
            }
            DeviceMessage::SessionNew(_) => {
                self.stop_speech().await;
                self.command(ConvCommand::New).await;
            }
            // An unpaired device may not fill the inbox or the store: its voice and
            // readings go nowhere.
            DeviceMessage::AudioStart(_) if !self.paired => {
                self.notice("Pair this device first.").await;
            }
            DeviceMessage::State(_) if !self.paired => {
                debug!(device = %self.device_id, "readings of an unpaired device ignored");
            }
            DeviceMessage::AudioStart(start) => {
                // Speaking over the agent stops it (barge-in).
                self.stop_speech().await;
                match Utterance::start(&start, self.hub.config.max_utterance_s) {
                    Ok(utterance) => self.utterance = Some(Box::new(utterance)),
                    Err(why) => {
                        self.utterance = None;
                        self.notice(&why).await;
                    }
                }
            }
            DeviceMessage::AudioEnd(end) => self.end_utterance(end.stream).await,
            DeviceMessage::AudioCancel(cancel) => {
                self.utterance.take_if(|u| u.stream == cancel.stream);
            }
            DeviceMessage::PromptReply(reply) => self.on_prompt_reply(reply).await,
            DeviceMessage::ActionResult(result) => self.on_action_result(result),
            DeviceMessage::State(state) => {
                if let Some(readings) = self.sensors.take(&state.sensors, Instant::now()) {
                    self.write_sensors(readings).await;
                }
            }
            DeviceMessage::Event(event) if event.notify => {
                let name: String = event.name.chars().take(limits::MAX_EVENT_NAME).collect();
                let data = event.data.unwrap_or(Value::Object(Default::default()));
                let data: String = data
                    .to_string()
                    .chars()
                    .take(limits::MAX_EVENT_DATA)
                    .collect();
                let text = format!("[Gadget event] {name} {data}");
                self.forward(
                    ids::random_hex(12),
                    InboundBody::Text {
                        text,
                        reply_to: None,
                    },
                )
                .await;
            }
            DeviceMessage::Hello(_) | DeviceMessage::Auth(_) => {
                let error = ServerMessage::Error(proto::Error {
                    code: proto::ErrorCode::Protocol,
                    message: "already authenticated".into(),
                });
                self.send(&error).await;
            }
            DeviceMessage::OtaReady(_)
            | DeviceMessage::OtaAck(_)
            | DeviceMessage::OtaDone(_)
            | DeviceMessage::OtaError(_) => {
                if let Some(link) = link(self.conn.as_ref()) {
                    self.ota.on_message(&msg, link).await;
                }
            }
            other => debug!(device = %self.device_id, ?other, "message not handled"),
        }
    }

    async fn command(&mut self, command: ConvCommand) {
        self.forward(ids::random_hex(12), InboundBody::Command(command))
            .await;
    }

    async fn on_prompt_reply(&mut self, reply: proto::PromptReply) {
        let Some((question, show)) = self.prompts.answer(&reply.id) else {
            self.notice("That question has expired").await;
            return;
        };
        let next = match show {
            Show::Ask(next) => Some(next.clone()),
            _ => None,
        };
        let yes = reply.answer == proto::Answer::Yes;
        let choice = match (&question.prompt, yes) {
            (Prompt::ExecApproval { .. }, true) | (Prompt::Confirm { .. }, true) => Choice::Once,
            (Prompt::ExecApproval { .. }, false) => Choice::Deny,
            _ => Choice::Cancel,
        };
        self.forward(
            ids::random_hex(12),
            InboundBody::PromptAnswer(PromptAnswer {
                prompt_id: question.id,
                choice,
            }),
        )
        .await;
        if let Some(next) = next {
            self.show(&next).await;
        }
    }

    fn on_action_result(&mut self, result: proto::ActionResult) {
        let Some(action) = self.actions.remove(&result.id) else {
            debug!(device = %self.device_id, id = %result.id, "result for no pending action");
            return;
        };
        let outcome = if result.ok {
            Ok(match result.result {
                Some(Value::Object(map)) => Value::Object(map),
                Some(other) => serde_json::json!({ "value": other }),
                None => Value::Object(Default::default()),
            })
        } else {
            Err(ActionError::Device(
                result.error.unwrap_or_else(|| "the action failed".into()),
            ))
        };
        let _ = action.reply.send(outcome);
    }

    /// Hand an event to the agent, in order, unless the device may not reach it.
    async fn forward(&mut self, message_id: String, body: InboundBody) {
        if !self.paired {
            self.send_pairing().await;
            return;
        }
        let Some(agent) = self.hub.agent().cloned() else {
            return;
        };
        let user_name = self
            .conn
            .as_ref()
            .and_then(|c| c.peer.name.as_deref().map(str::to_owned));
        let inbound = Inbound {
            source: Source {
                chat: Chat::gadget(self.device_id.clone()),
                user_id: self.device_id.clone(),
                user_name,
            },
            message_id,
            body,
            profile: self
                .conn
                .as_ref()
                .map(|conn| Box::new(profile(&conn.peer, self.paired))),
        };
        let chat = &inbound.source.chat;
        self.hub.metrics.activity.said(chat, &inbound.body);
        if !self.to_agent.push(&agent, inbound) {
            self.notice("Too many messages at once; try again in a moment.")
                .await;
        }
    }

    async fn notice(&self, text: &str) {
        let notice = ServerMessage::Notice(proto::Notice {
            text: self.shape(text),
            ttl_s: None,
        });
        self.send(&notice).await;
    }

    // ---- agent → device ----

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Port(call) => self.on_call(call).await,
            Command::SetPaired(paired) => self.set_paired(paired).await,
            Command::Ota(request) => {
                self.ota.on_request(request, link(self.conn.as_ref())).await;
            }
            // Handled by the run loop.
            Command::Forget | Command::Shutdown => {}
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
                let result = self.edit_text(&message_id, &text, finalize).await;
                let _ = reply.send(result);
            }
            Call::Status { text, reply } => {
                let result = self.deliver(ServerMessage::Status(proto::Status {
                    text: self.shape(&text),
                }));
                let _ = reply.send(result.await);
            }
            Call::TurnStarted { reply } => {
                self.hub.metrics.turn(Platform::Gadget);
                let turn = ids::random_hex(12);
                self.turn = Some(turn.clone());
                self.streaming = None;
                let result = self
                    .deliver(ServerMessage::TurnStart(proto::TurnStart {
                        turn: turn.clone(),
                    }))
                    .await;
                let _ = reply.send(result.map(|()| turn));
            }
            Call::TurnEnded {
                turn: ended,
                outcome,
                reply,
            } => {
                let result = match self.turn.take_if(|t| *t == ended) {
                    Some(turn) => {
                        self.streaming = None;
                        let outcome = match outcome {
                            Outcome::Success => proto::Outcome::Success,
                            Outcome::Failure => proto::Outcome::Failure,
                            Outcome::Cancelled => proto::Outcome::Cancelled,
                        };
                        let end = ServerMessage::TurnEnd(proto::TurnEnd { turn, outcome });
                        if self.playback.as_ref().is_some_and(|p| !p.is_finished()) {
                            // The turn is over when the device has heard it: end it after
                            // the speech, so the screen does not go idle in between.
                            self.deferred_end = Some(Box::new(end));
                            Ok(())
                        } else {
                            self.deliver(end).await
                        }
                    }
                    None => Ok(()),
                };
                let _ = reply.send(result);
            }
            Call::Ask {
                prompt,
                ttl_s,
                reply,
            } => {
                let _ = reply.send(self.ask(prompt, ttl_s).await);
            }
            Call::Withdraw { prompt_id, reply } => {
                let result = match self.prompts.withdraw(&prompt_id) {
                    Some(Show::Close { closed, next }) => {
                        let next = next.cloned();
                        self.send(&ServerMessage::PromptClose(proto::PromptClose {
                            id: closed,
                        }))
                        .await;
                        if let Some(next) = next {
                            self.show(&next).await;
                        }
                        Ok(())
                    }
                    Some(_) => Ok(()),
                    None => Err(DeliveryError::UnknownMessage(prompt_id)),
                };
                let _ = reply.send(result);
            }
            Call::Display { card, reply } => {
                let display = ServerMessage::Display(proto::Display {
                    title: self.shape(&card.title),
                    body: self.shape(&card.body),
                    ttl_s: card.ttl_s,
                });
                let _ = reply.send(self.deliver(display).await);
            }
            Call::Transcript { text, reply } => {
                let transcript = ServerMessage::Transcript(proto::Transcript {
                    text: self.shape(&text),
                });
                let _ = reply.send(self.deliver(transcript).await);
            }
            Call::Notice { text, reply } => {
                let result = self.reachable().map(|_| ());
                if result.is_ok() {
                    self.notice(&text).await;
                }
                let _ = reply.send(result);
            }
            Call::Voice { path, reply } => {
                let _ = reply.send(self.speak(path).await);
            }
            Call::Image {
                path,
                caption,
                reply,
            } => self.show_image(path, caption, reply).await,
            // Gadgets show "thinking" from turn.start; they have no typing indicator.
            Call::Typing { reply, .. } => {
                let _ = reply.send(self.reachable().map(|_| ()));
            }
            Call::Document { reply, .. } => {
                let _ = reply.send(Err(DeliveryError::Unsupported {
                    chat: self.chat(),
                    reason: "gadgets cannot show documents".into(),
                }));
            }
            Call::InvokeAction { name, args, reply } => self.invoke(name, args, reply).await,
            Call::Actions { reply } => {
                let result = self.reachable().map(|conn| conn.peer.actions.to_vec());
                let _ = reply.send(result);
            }
            Call::Profile { reply } => {
                let result = match &self.conn {
                    Some(conn) => Ok(profile(&conn.peer, self.paired)),
                    None => Err(DeliveryError::Offline(self.chat())),
                };
                let _ = reply.send(result);
            }
        }
    }

    /// The agent may reach only a connected device that is paired: an unpaired one
    /// shows its pairing code and nothing from the agent (tools, cards, `hermes send`).
    fn reachable(&self) -> Result<&Conn, DeliveryError> {
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| DeliveryError::Offline(self.chat()))?;
        if !self.paired {
            return Err(DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "the device is not paired".into(),
            });
        }
        Ok(conn)
    }

    async fn deliver(&self, msg: ServerMessage) -> Result<(), DeliveryError> {
        self.reachable()?;
        self.send(&msg).await;
        Ok(())
    }

    async fn send_text(
        &mut self,
        text: &str,
        options: SendOptions,
    ) -> Result<String, DeliveryError> {
        self.reachable()?;
        let id = ids::random_hex(12);
        let text = self.shape(text);
        let msg = if options.streaming {
            self.streaming = Some(id.clone());
            ServerMessage::ReplyDelta(proto::ReplyDelta {
                turn: self.turn.clone().unwrap_or_default(),
                text,
            })
        } else {
            ServerMessage::Reply(proto::Reply {
                turn: self.turn.clone(),
                text,
                interim: options.interim,
            })
        };
        self.send(&msg).await;
        Ok(id)
    }

    async fn edit_text(
        &mut self,
        message_id: &str,
        text: &str,
        finalize: bool,
    ) -> Result<(), DeliveryError> {
        self.reachable()?;
        if self.streaming.as_deref() != Some(message_id) {
            return Err(DeliveryError::UnknownMessage(message_id.to_owned()));
        }
        let text = self.shape(text);
        let msg = if finalize {
            self.streaming = None;
            ServerMessage::Reply(proto::Reply {
                turn: self.turn.clone(),
                text,
                interim: false,
            })
        } else {
            ServerMessage::ReplyDelta(proto::ReplyDelta {
                turn: self.turn.clone().unwrap_or_default(),
                text,
            })
        };
        self.send(&msg).await;
        Ok(())
    }

    async fn ask(&mut self, prompt: Prompt, ttl_s: Option<u32>) -> Result<String, DeliveryError> {
        let ttl_s = match &prompt {
            // Gadgets have two buttons: a free-form question is the agent's to rephrase.
            Prompt::Clarify { .. } => {
                return Err(DeliveryError::Unsupported {
                    chat: self.chat(),
                    reason: "gadgets answer only yes or no".into(),
                })
            }
            Prompt::ExecApproval { .. } => ttl_s,
            Prompt::Confirm { .. } => ttl_s.or(Some(limits::CONFIRM_PROMPT_TTL_SECS)),
        };
        let question = Question {
            id: ids::random_hex(8),
            prompt,
            ttl_s,
            expires: ttl_s.map(|s| Instant::now() + Duration::from_secs(u64::from(s))),
        };
        let id = question.id.clone();
        if let Show::Ask(head) = self.prompts.push(question) {
            let head = head.clone();
            self.show(&head).await;
        }
        Ok(id)
    }

    /// Put a question on screen (when the device is online and paired).
    async fn show(&self, question: &Question) {
        if !self.paired {
            return;
        }
        let (title, text) = match &question.prompt {
            Prompt::ExecApproval {
                command,
                description,
                ..
            } => (
                "Allow this command?".to_owned(),
                format!("{command}\n{description}"),
            ),
            Prompt::Confirm { title, text } => (title.clone(), text.clone()),
            Prompt::Clarify { question, .. } => ("Question".to_owned(), question.clone()),
        };
        // The remaining time, so a question shown again after a reconnect lapses on time.
        let ttl_s = question.expires.map(|at| {
            let left = at.saturating_duration_since(Instant::now()).as_millis();
            u32::try_from(left.div_ceil(1000).max(1)).unwrap_or(u32::MAX)
        });
        let prompt = ServerMessage::Prompt(proto::Prompt {
            id: question.id.clone(),
            title: self.shape(&title),
            text: self.shape(&text),
            ttl_s,
        });
        self.send(&prompt).await;
    }

    async fn show_head(&self) {
        if let Some(head) = self.prompts.head() {
            self.show(head).await;
        }
    }

    async fn invoke(
        &mut self,
        name: String,
        args: Value,
        reply: oneshot::Sender<Result<Value, ActionError>>,
    ) {
        let conn = match self.reachable() {
            Ok(conn) => conn,
            Err(err) => {
                let _ = reply.send(Err(ActionError::Delivery(err)));
                return;
            }
        };
        if !conn.peer.actions.iter().any(|a| a.name == name) {
            let _ = reply.send(Err(ActionError::UnknownAction(name)));
            return;
        }
        let id = ids::random_hex(12);
        let deadline = Instant::now() + Duration::from_secs(limits::ACTION_TIMEOUT_SECS);
        self.actions
            .insert(id.clone(), PendingAction { reply, deadline });
        self.send(&ServerMessage::Action(proto::Action { id, name, args }))
            .await;
    }

    fn stream_id(&mut self) -> u8 {
        let id = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        id
    }

    /// A channel-1 frame of the utterance being received; anything else is dropped.
    fn on_binary(&mut self, data: &[u8]) {
        match proto::decode_frame(data) {
            Ok((header, payload)) if header.channel == proto::Channel::Audio => {
                match &mut self.utterance {
                    Some(u) if u.stream == header.stream => u.push(header, payload),
                    _ => {
                        debug!(device = %self.device_id, stream = header.stream, "audio for no open utterance")
                    }
                }
            }
            Ok((header, _)) => {
                debug!(device = %self.device_id, channel = ?header.channel, "binary frame ignored");
            }
            Err(err) => debug!(device = %self.device_id, %err, "bad binary frame"),
        }
    }

    /// The utterance is complete: too short gets a notice, the rest becomes a WAV file
    /// written from the buffer it was received into, handed to the agent as voice.
    async fn end_utterance(&mut self, stream: u8) {
        let Some(utterance) = self.utterance.take_if(|u| u.stream == stream) else {
            return;
        };
        let duration = utterance.duration();
        if duration.as_millis() < u128::from(limits::MIN_UTTERANCE_MS) {
            self.notice("Too short: hold the button while you speak.")
                .await;
            return;
        }
        if utterance.gaps > 0 || utterance.dropped > 0 {
            debug!(device = %self.device_id, gaps = utterance.gaps, dropped = utterance.dropped, "utterance was incomplete");
        }
        let id = message_id(utterance.id.clone());
        let rate = utterance.rate;
        let pcm = utterance.into_pcm();
        let bytes = pcm.len() as u64;
        let written = self
            .hub
            .inbox
            .put("wav", bytes, move |path| {
                herald_media::wav::write_wav(path, rate, &pcm).map_err(std::io::Error::other)
            })
            .await;
        match written {
            Ok((path, duration)) => {
                let body = InboundBody::Voice {
                    path,
                    duration_ms: u32::try_from(duration.as_millis()).unwrap_or(u32::MAX),
                    transcript: None,
                };
                self.forward(id, body).await;
            }
            Err(err) => {
                warn!(%err, "could not save an utterance");
                self.notice("Your message could not be saved.").await;
            }
        }
    }

    /// Speak on the device: a new stream replaces the one playing.
    async fn speak(&mut self, path: PathBuf) -> Result<(), DeliveryError> {
        let conn = self.reachable()?;
        let Some(rate) = conn.peer.speaker_rate else {
            return Err(DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "the device has no speaker".into(),
            });
        };
        let outbox = conn.outbox.clone();
        let speech = SpeechFile::open(&path).await.map_err(|err| {
            DeliveryError::Failed(format!("cannot read {}: {err}", path.display()))
        })?;
        self.stop_speech().await;
        let stream = self.stream_id();
        self.playback = Some(Playback::start(
            speech,
            stream,
            rate,
            self.turn.clone(),
            outbox,
            self.hub.metrics.clone(),
            self.mailbox.clone(),
        ));
        Ok(())
    }

    /// Stop the speech stream at once, telling the device if it was still going.
    async fn stop_speech(&mut self) {
        if let Some(playback) = self.playback.take() {
            let stream = playback.stream;
            let finished = playback.is_finished();
            drop(playback);
            if !finished {
                self.send(&ServerMessage::AudioAbort(proto::AudioAbort { stream }))
                    .await;
            }
        }
        self.send_deferred_end().await;
    }

    async fn send_deferred_end(&mut self) {
        if let Some(end) = self.deferred_end.take() {
            self.send(&end).await;
        }
    }

    /// Fit a picture into the device's image box and send it; the work runs on its own
    /// task so the session keeps serving the device meanwhile.
    async fn show_image(&mut self, path: PathBuf, caption: Option<String>, reply: Reply<()>) {
        let conn = match self.reachable() {
            Ok(conn) => conn,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        let outbox = conn.outbox.clone();
        let Some(image_box) = conn.peer.image_box else {
            self.notice("This device cannot show pictures.").await;
            let _ = reply.send(Ok(()));
            return;
        };
        let stream = self.stream_id();
        let caption = caption.map(|c| self.shape(&c));
        let turn = self.turn.clone();
        let chat = self.chat();
        tokio::spawn(async move {
            let result = match image::send(&path, image_box, stream, &outbox).await {
                Ok(_) => {
                    // A reply, not a notice: devices hide notices behind a picture,
                    // while a reply stays in the conversation under it.
                    if let Some(text) = caption.filter(|c| !c.is_empty()) {
                        let caption = ServerMessage::Reply(proto::Reply {
                            turn,
                            text,
                            interim: false,
                        });
                        let _ = outbox.send(Outgoing::Text(caption.encode())).await;
                    }
                    Ok(())
                }
                Err(err) => Err(DeliveryError::Unsupported {
                    chat,
                    reason: err.to_string(),
                }),
            };
            let _ = reply.send(result);
        });
    }

    async fn set_paired(&mut self, paired: bool) {
        if self.paired == paired {
            return;
        }
        self.paired = paired;
        if paired {
            self.hub.waiting.leave(&self.device_id);
        }
        if self.conn.is_none() {
            return;
        }
        if paired {
            self.send(&ServerMessage::Paired(proto::Paired {})).await;
            self.show_head().await;
        } else {
            self.send(&ServerMessage::Unpaired(proto::Unpaired {}))
                .await;
            self.send_pairing().await;
        }
    }
}

/// The device as the agent should know it, from its `hello`.
fn profile(peer: &Peer, paired: bool) -> DeviceProfile {
    DeviceProfile {
        paired,
        screen: peer.screen,
        charset: match peer.charset {
            Charset::Ascii => "ascii",
            Charset::Utf8 => "utf8",
        }
        .into(),
        speaker_rate: peer.speaker_rate,
        actions: peer.actions.to_vec(),
    }
}

fn link(conn: Option<&Conn>) -> Option<Link<'_>> {
    conn.map(|c| Link {
        peer: &c.peer,
        outbox: &c.outbox,
    })
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// The device's id for a message when it is a short, printable one (it reaches the
/// agent and its logs), else one of ours.
fn message_id(id: Option<String>) -> String {
    id.filter(|id| {
        (1..=limits::MAX_ID).contains(&id.len()) && id.chars().all(|c| c.is_ascii_graphic())
    })
    .unwrap_or_else(|| ids::random_hex(12))
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn only_short_printable_message_ids_are_kept() {
        assert_eq!(message_id(Some("m-1".into())), "m-1");
        for bad in [
            "x".repeat(limits::MAX_ID + 1),
            "a\u{1b}[2J".into(),
            String::new(),
        ] {
            let id = message_id(Some(bad.clone()));
            assert_ne!(id, bad);
            assert_eq!(id.len(), 12);
        }
        assert_eq!(message_id(None).len(), 12);
    }

    fn hub(dir: &std::path::Path) -> Arc<GadgetHub> {
        let store = crate::store::SqliteStore::open(&dir.join("herald.db")).unwrap();
        let inbox = crate::inbox::Inbox::open(dir.join("inbox"), &Default::default()).unwrap();
        Arc::new(GadgetHub::new(
            Default::default(),
            Arc::new(store),
            inbox,
            Default::default(),
        ))
    }

    fn typing(reply: Reply<()>) -> Event {
        Event::Command(Box::new(Command::Port(Call::Typing { on: true, reply })))
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_session_retires_and_what_reaches_it_meanwhile_is_answered() {
        let dir = tempfile::tempdir().unwrap();
        let hub = hub(dir.path());
        let first = hub.session("hg-0000000000000001");
        tokio::time::sleep(RETIRE_AFTER - Duration::from_secs(1)).await;
        assert!(hub.sessions.get("hg-0000000000000001").is_some());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(hub.sessions.get("hg-0000000000000001").is_none(), "retired");
        assert!(first.closed().now_or_never().is_some(), "closed");

        // A call due at the very instant a session retires is answered, by it or by
        // the next.
        let mut raced = 0;
        for i in 0..20 {
            let session = hub.session(&format!("hg-{i:016x}"));
            tokio::time::sleep(RETIRE_AFTER).await;
            let (reply, answer) = oneshot::channel();
            // Sent without waiting, or not at all: the session had retired.
            if !matches!(session.send(typing(reply)).now_or_never(), Some(Ok(()))) {
                continue;
            }
            raced += 1;
            let answer = tokio::time::timeout(Duration::from_secs(5), answer).await;
            assert!(matches!(answer, Ok(Ok(_))), "dropped: {answer:?}");
        }
        assert!(raced > 0, "no call met a retiring session");
    }
}
