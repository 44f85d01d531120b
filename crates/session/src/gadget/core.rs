//! The gadget core's state, its effects, its connection and its timers; how it takes
//! frames is `inbound.rs`, agent calls `calls.rs`, speech `speech.rs` and firmware
//! updates `firmware.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_gadget_proto::{self as proto, limits, ServerMessage};
use herald_media::cue::Cue;
use herald_media::text::{shape_reply, Charset};
use herald_port::{
    ActionError, Chat, DeviceProfile, Inbound, PairingCode, PcmFormat, Prompt, RequestError,
    Response,
};
use serde_json::{Map, Value};
use tracing::{debug, info};

use super::cues::CueTiming;
use super::ota::{OtaEffect, Timeouts, Updates};
use super::prompts::{PromptQueue, Question};
use super::sensors::SensorWrites;
use super::speech::{Speaking, SpeechChunk};
use super::utterance::Utterance;
use super::Peer;
use crate::io::{Close, Frame, Output, Transmit};
use crate::note::Note;
use crate::{CallId, Counted, Ids, SessionCore};

/// Work the shell carries out for the core, in order.
#[derive(Debug)]
pub enum Effect {
    /// The device is online on connection `conn`.
    Online {
        conn: u64,
    },
    /// The connection is gone; an unpaired device leaves a place in the waiting room.
    Offline {
        paired: bool,
    },
    /// The device was paired: it no longer waits.
    Paired,
    /// Ask the authorizer for a pairing code and hand it to
    /// [`Core::handle_pairing_code`].
    AskPairingCode {
        name: Option<String>,
    },
    /// Hand this to the agent, in order (and note it in the activity log);
    /// [`Core::handle_agent_full`] when it cannot take it.
    ToAgent(Box<Inbound>),
    /// Answer the agent's call `call`.
    Answer {
        call: CallId,
        answer: Result<Response, RequestError>,
    },
    /// Count this in the server's metrics.
    Count(Counted),
    /// Write an utterance's audio as a WAV file and hand the result to
    /// [`Core::handle_utterance_saved`].
    SaveUtterance {
        message_id: String,
        rate: u32,
        pcm: Vec<u8>,
    },
    RecordLastSeen,
    SaveSensors(Map<String, Value>),
    /// Work for the firmware updates, on the store or a staged image.
    Ota(OtaEffect),
    /// Open the speech file and, if it opens, start it with [`Core::start_speech`].
    OpenSpeech {
        path: PathBuf,
        rate: u32,
        /// The call to answer once it plays (or could not).
        call: CallId,
    },
    /// Start speech stream `stream` at `rate` Hz, fed PCM in `format` as it comes.
    BeginSpeech {
        stream: u8,
        rate: u32,
        format: PcmFormat,
        turn: Option<String>,
    },
    /// Queue PCM (or, with `path`, an audio file opened now) for speech stream `stream`,
    /// answering `call` once it is queued.
    FeedSpeech {
        stream: u8,
        input: SpeechChunk,
        call: CallId,
    },
    /// Speech stream `stream` gets nothing more: it plays out and ends.
    EndSpeech {
        stream: u8,
    },
    /// Stop the speech stream `stream` (with `audio.abort` if the device heard its start),
    /// then tell [`Core::handle_speech_stopped`].
    StopSpeech {
        stream: u8,
    },
    /// Fit a picture to the device's box and send it on stream `stream`.
    ShowImage(Box<ImageJob>),
    /// The device reported an event worth telling its person (`notify`): a
    /// notification, if none of their apps is in sight.
    Notify(Box<Note>),
    /// Play one of Herald's own cues on the speaker (rate `rate`), replacing what plays.
    PlayCue {
        cue: Cue,
        rate: u32,
    },
}

/// A picture to fit and send.
#[derive(Debug)]
pub struct ImageJob {
    /// The picture file.
    pub path: PathBuf,
    /// The box the device's screen fits pictures into.
    pub image_box: (u32, u32),
    /// The stream it goes out on.
    pub stream: u8,
    /// Shaped for the device; sent as a reply under the picture.
    pub caption: Option<String>,
    /// The turn it belongs to.
    pub turn: Option<String>,
    /// The call to answer once it is sent (or could not be): hand the outcome to
    /// [`Core::handle_image_sent`].
    pub call: CallId,
}

/// The live connection of a device.
pub(super) struct Conn {
    pub id: u64,
    pub peer: Peer,
    last_inbound: Instant,
    next_ping: Instant,
}

pub(super) struct PendingAction {
    pub call: CallId,
    pub deadline: Instant,
}

/// What every session of a hub goes by; shared, so an idle session does not carry a
/// copy.
#[derive(Debug, Clone)]
pub struct Rules {
    /// How often a quiet connection is pinged.
    pub heartbeat: Duration,
    /// The longest utterance taken.
    pub max_utterance_s: u32,
    /// How long a firmware transfer waits on the device.
    pub ota: Timeouts,
    /// When Herald's own cues play on a speaker while the agent is quiet; `None`: never.
    pub cues: Option<CueTiming>,
    /// A turn the agent leaves silent this long is ended as failed.
    pub turn_timeout: Duration,
}

/// A gadget's session: everything about its conversation that outlives a frame.
pub struct Core {
    pub(super) device_id: String,
    pub(super) rules: Arc<Rules>,
    pub(super) ids: Ids,
    pub(super) conn: Option<Conn>,
    pub(super) paired: bool,
    /// A pairing code was asked for and has not come back: one question at a time,
    /// however often an unpaired device knocks.
    pairing_asked: bool,
    pub(super) prompts: PromptQueue,
    /// Few at a time: a list holds them in less room than a map.
    pub(super) actions: Vec<(String, PendingAction)>,
    /// The turn replies belong to, between `turn_started` and `turn_ended`.
    pub(super) turn: Option<String>,
    /// The message id of the reply being streamed, if any.
    pub(super) streaming: Option<String>,
    /// The utterance being received, if any; boxed, so an idle session does not carry
    /// its room.
    pub(super) utterance: Option<Box<Utterance>>,
    /// The speech the device hears (or is about to), until its shell reports it done:
    /// the one place that knows what is being spoken. Boxed, as the utterance.
    pub(super) speaking: Option<Box<Speaking>>,
    /// Stream ids for audio and pictures to the device.
    next_stream: u8,
    /// A `turn.end` held back until the turn's speech has played.
    pub(super) deferred_end: Option<Box<ServerMessage>>,
    /// Readings on their way to the store, at most one write per window.
    pub(super) sensors: SensorWrites,
    /// Firmware updates: a sub-machine of its own.
    pub(super) ota: Updates,
    /// The next "still working" cue, while the agent has said nothing in a turn.
    pub(super) next_cue: Option<Instant>,
    /// Since when the agent has not called on the device, in a turn.
    pub(super) quiet_since: Option<Instant>,
    out: Output<Effect>,
}

impl Core {
    /// The session of `device_id`, under `rules` (shared by a hub's sessions); its ids
    /// come from `ids`.
    pub fn new(device_id: String, rules: Arc<Rules>, ids: Ids) -> Core {
        Core {
            device_id,
            rules,
            ids,
            conn: None,
            paired: false,
            pairing_asked: false,
            prompts: PromptQueue::default(),
            actions: Vec::new(),
            turn: None,
            streaming: None,
            utterance: None,
            speaking: None,
            next_stream: 1,
            deferred_end: None,
            sensors: SensorWrites::default(),
            ota: Updates::default(),
            next_cue: None,
            quiet_since: None,
            out: Output::default(),
        }
    }

    // ---- connections ----

    /// A connection finished its handshake; it replaces any other.
    pub fn handle_attach(
        &mut self,
        conn: u64,
        peer: Peer,
        paired: bool,
        session: String,
        heartbeat_s: u32,
        now: Instant,
    ) {
        self.close(Close::Normal, "replaced by a new connection");
        self.conn = Some(Conn {
            id: conn,
            peer,
            last_inbound: now,
            next_ping: now + self.rules.heartbeat,
        });
        self.paired = paired;
        self.out.effects.push(Effect::Online { conn });
        self.send(ServerMessage::Welcome(proto::Welcome {
            session,
            paired,
            heartbeat_s,
            server: "herald".into(),
            proto: proto::PROTO_VERSION,
        }));
        if paired {
            self.show_head(now);
        } else {
            self.ask_pairing_code();
        }
        self.ota.attached();
        self.drain_ota();
    }

    /// Proof of life from the current connection (any frame, control frames included).
    pub fn touch(&mut self, now: Instant) {
        if let Some(conn) = &mut self.conn {
            conn.last_inbound = now;
        }
    }

    /// Answer every action waiting for the device with `error`.
    pub fn fail_actions(&mut self, error: ActionError) {
        for (_, action) in std::mem::take(&mut self.actions) {
            self.answer(action.call, Err(RequestError::Action(error.clone())));
        }
    }

    // ---- time ----

    /// Time passed: `now` on the core's clock, `unix_ms` on the wall clock (a ping
    /// carries it).
    pub fn handle_timeout(&mut self, now: Instant, unix_ms: u64) {
        if let Some(readings) = self.sensors.due(now) {
            self.out.effects.push(Effect::SaveSensors(readings));
        }
        if let Some(conn) = &mut self.conn {
            if now >= conn.last_inbound + self.rules.heartbeat * limits::DEAD_AFTER_HEARTBEATS {
                info!(device = %self.device_id, "gadget silent for too long; closing");
                self.close(Close::Away, "heartbeat timeout");
            } else if now >= conn.next_ping {
                conn.next_ping = now + self.rules.heartbeat;
                self.send(ServerMessage::Ping(proto::Ping { ts: Some(unix_ms) }));
            }
        }
        let (expired, next) = self.prompts.expire(now);
        let next = next.cloned();
        if !expired.is_empty() {
            debug!(device = %self.device_id, ?expired, "questions expired");
            if let Some(next) = next {
                self.show(&next, now);
            }
            self.question_closed(now);
        }
        self.ota_timeout(now);
        let (overdue, pending) = std::mem::take(&mut self.actions)
            .into_iter()
            .partition(|(_, a)| a.deadline <= now);
        self.actions = pending;
        for (_, action) in overdue {
            self.answer(action.call, Err(RequestError::Action(ActionError::Timeout)));
        }
        self.cues_due(now);
    }

    // ---- authorization ----

    pub(super) fn ask_pairing_code(&mut self) {
        if !self.pairing_asked {
            self.pairing_asked = true;
            let name = self.conn.as_ref().and_then(|c| c.peer.name.as_deref());
            self.out.effects.push(Effect::AskPairingCode {
                name: name.map(str::to_owned),
            });
        }
    }

    /// The code the authorizer gave (none when it could not): shown while the device
    /// is connected and still unpaired.
    pub fn handle_pairing_code(&mut self, code: Option<PairingCode>) {
        self.pairing_asked = false;
        if let Some(PairingCode { code, command }) = code.filter(|_| !self.paired) {
            self.send(ServerMessage::Pairing(proto::Pairing { code, command }));
        }
    }

    /// Authorization changed (pairing approved or revoked).
    pub fn handle_paired(&mut self, paired: bool, now: Instant) {
        if self.paired == paired {
            return;
        }
        self.paired = paired;
        if paired {
            self.out.effects.push(Effect::Paired);
        }
        if self.conn.is_none() {
            return;
        }
        if paired {
            self.send(ServerMessage::Paired(proto::Paired {}));
            self.show_head(now);
        } else {
            self.send(ServerMessage::Unpaired(proto::Unpaired {}));
            self.ask_pairing_code();
        }
    }

    pub(super) fn stream_id(&mut self) -> u8 {
        let id = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        id
    }

    // ---- frames ----

    /// The device's chat, as the agent knows it.
    pub fn chat(&self) -> Chat {
        Chat::gadget(self.device_id.clone())
    }

    pub(super) fn send(&mut self, msg: ServerMessage) {
        if let Some(conn) = &self.conn {
            self.out.transmits.push(Transmit {
                conn: conn.id,
                frame: Frame::Text(msg.encode()),
            });
        }
    }

    pub(super) fn effect(&mut self, effect: Effect) {
        self.out.effects.push(effect);
    }

    pub(super) fn answer(&mut self, call: CallId, answer: Result<Response, RequestError>) {
        self.out.effects.push(Effect::Answer { call, answer });
    }

    pub(super) fn shape(&self, text: &str) -> String {
        let charset = self.conn.as_ref().map_or(Charset::Utf8, |c| c.peer.charset);
        shape_reply(text, charset)
    }

    pub(super) fn notice(&mut self, text: &str) {
        let text = self.shape(text);
        self.send(ServerMessage::Notice(proto::Notice { text, ttl_s: None }));
    }

    /// Put a question on screen (when the device is online and paired).
    pub(super) fn show(&mut self, question: &Question, now: Instant) {
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
            Prompt::Clarify {
                question: asked, ..
            } => match question.choice_on_screen() {
                Some((choice, at, of)) => (
                    format!("Question {}/{of}", at + 1),
                    format!("{asked}\n{choice}?"),
                ),
                None => ("Question".to_owned(), asked.clone()),
            },
        };
        // The remaining time, so a question shown again after a reconnect lapses on time.
        let ttl_s = question.expires.map(|at| {
            let left = at.saturating_duration_since(now).as_millis();
            u32::try_from(left.div_ceil(1000).max(1)).unwrap_or(u32::MAX)
        });
        let prompt = ServerMessage::Prompt(proto::Prompt {
            id: question.shown.clone(),
            title: self.shape(&title),
            text: self.shape(&text),
            ttl_s,
        });
        self.send(prompt);
    }

    fn show_head(&mut self, now: Instant) {
        if let Some(head) = self.prompts.head().cloned() {
            self.show(&head, now);
        }
    }
}

pub(super) fn protocol_error(message: String) -> ServerMessage {
    ServerMessage::Error(proto::Error {
        code: proto::ErrorCode::Protocol,
        message,
    })
}

/// The device as the agent should know it, from its `hello`.
pub(super) fn profile(peer: &Peer, paired: bool) -> DeviceProfile {
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

impl SessionCore for Core {
    type Effect = Effect;

    fn current_conn(&self) -> Option<u64> {
        self.conn.as_ref().map(|conn| conn.id)
    }

    /// The device is told to slow down.
    fn handle_agent_full(&mut self) {
        self.notice("Too many messages at once; try again in a moment.");
    }

    fn device_id(&self) -> &str {
        &self.device_id
    }

    fn output(&mut self) -> &mut Output<Effect> {
        &mut self.out
    }

    /// The earliest instant [`Core::handle_timeout`] has work.
    fn poll_timeout(&self) -> Option<Instant> {
        let conn = self.conn.as_ref().map(|c| {
            c.next_ping
                .min(c.last_inbound + self.rules.heartbeat * limits::DEAD_AFTER_HEARTBEATS)
        });
        [
            conn,
            self.prompts.next_deadline(),
            self.actions.iter().map(|(_, a)| a.deadline).min(),
            self.sensors.deadline(),
            self.ota.next_deadline(),
            self.cues_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Nothing open: no connection, turn, question, action or firmware transfer
    /// (updates resume from the store).
    fn is_idle(&self) -> bool {
        self.conn.is_none()
            && self.turn.is_none()
            && self.prompts.head().is_none()
            && self.actions.is_empty()
            && !self.ota.is_running()
    }

    fn is_current(&self, conn: u64) -> bool {
        self.conn.as_ref().is_some_and(|c| c.id == conn)
    }

    /// The connection ended on its own (closed, failed or timed out).
    fn handle_closed(&mut self) {
        // Their outbox is gone with the connection.
        if let Some(speaking) = self.speaking.take() {
            self.out.effects.push(Effect::StopSpeech {
                stream: speaking.stream,
            });
        }
        self.deferred_end = None;
        self.utterance = None;
        if self.conn.take().is_none() {
            return;
        }
        self.out.effects.push(Effect::Offline {
            paired: self.paired,
        });
        self.ota.detached();
        self.drain_ota();
        self.fail_actions(ActionError::Disconnected);
        self.streaming = None;
        if let Some(readings) = self.sensors.flush() {
            self.out.effects.push(Effect::SaveSensors(readings));
        }
        self.out.effects.push(Effect::RecordLastSeen);
    }
}
