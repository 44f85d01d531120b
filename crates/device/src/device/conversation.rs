//! Frames from the server, turns, device actions, telemetry and the application's
//! commands.
//!
//! A turn is tracked just enough to drive the mode: the device is *awaiting* from the
//! moment it sends a message (or the server starts a turn) until `turn.end`, a reply
//! outside any turn, a cancel or the 180 s no-reply timeout, which every sign of progress
//! (status, transcript, partial reply) pushes back. It is *replying* once reply text for
//! that turn has arrived. The text area shows the latest of: what was asked, the
//! transcript, the streaming reply, the final reply.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use herald_gadget_proto::limits::{MAX_TEXT, NO_REPLY_SECS};
use herald_gadget_proto::{
    self as proto, decode_frame, ActionResult, ActionSpec, Channel, DecodeError, Event, Outcome,
    Pong, ServerMessage, State, Text,
};
use serde_json::{json, Value};

use super::{CommandError, Device, ACTION_ANSWER_SECS, STATE_INTERVAL_SECS};
use crate::config::PCM16;
use crate::host::Host;
use crate::io::Action;
use crate::text::Pager;
use crate::time::{due, secs, Instant};
use crate::view::Phase;

/// Built-in action: speaker volume in percent.
pub const VOLUME_ACTION: &str = "speaker.volume";
/// Built-in action: screen brightness in percent.
pub const BRIGHTNESS_ACTION: &str = "screen.brightness";
/// Most application actions waiting for an answer; more are refused at once.
const MAX_INVOKED: usize = 16;
/// How long after `ota.done` the device restarts.
const RESTART_DELAY_SECS: u64 = 1;

/// The conversation as the screen needs it.
#[derive(Debug)]
pub(super) struct Chat {
    pub(super) awaiting: bool,
    pub(super) replying: bool,
    /// A `reply.delta` series is in progress: the next text revises it in place.
    streaming: bool,
    turn: Option<String>,
    pub(super) status: String,
    pub(super) text: Pager,
    pub(super) no_reply_at: Option<Instant>,
}

impl Chat {
    pub(super) fn new(text: Pager) -> Chat {
        Chat {
            awaiting: false,
            replying: false,
            streaming: false,
            turn: None,
            status: String::new(),
            text,
            no_reply_at: None,
        }
    }

    /// The device asked something; `shown` is what the text area shows meanwhile.
    pub(super) fn request(&mut self, shown: &str, now: Instant) {
        self.end_turn();
        self.awaiting = true;
        self.no_reply_at = Some(now + secs(NO_REPLY_SECS));
        self.text.show(shown);
    }

    /// `turn.start`: the device's own request, or one the server started (an event the
    /// agent reacts to), which keeps what the screen shows until text arrives.
    fn start_turn(&mut self, turn: String, now: Instant) {
        if !self.awaiting {
            self.end_turn();
            self.awaiting = true;
        }
        self.turn = Some(turn);
        self.no_reply_at = Some(now + secs(NO_REPLY_SECS));
    }

    pub(super) fn end_turn(&mut self) {
        self.awaiting = false;
        self.replying = false;
        self.streaming = false;
        self.turn = None;
        self.status.clear();
        self.no_reply_at = None;
    }

    /// Progress from the agent pushes the no-reply timeout back.
    fn progress(&mut self, now: Instant) {
        if self.no_reply_at.is_some() {
            self.no_reply_at = Some(now + secs(NO_REPLY_SECS));
        }
    }

    fn show_reply(&mut self, text: &str) {
        if self.streaming {
            self.text.update(text);
        } else {
            self.text.show(text);
        }
    }
}

/// An application action waiting for [`Device::complete_action`].
#[derive(Debug)]
pub(super) struct Invoked {
    id: String,
    pub(super) deadline: Instant,
}

/// `percent` of a built-in action's arguments: an integer from 0 to 100.
fn percent(args: &Value) -> Option<u8> {
    args.get("percent")
        .and_then(Value::as_u64)
        .and_then(|p| u8::try_from(p).ok())
        .filter(|p| *p <= 100)
}

fn percent_spec(name: &str, description: &str) -> ActionSpec {
    ActionSpec {
        name: name.to_string(),
        description: Some(description.to_string()),
        params: Some(json!({
            "type": "object",
            "properties": {"percent": {"type": "integer", "minimum": 0, "maximum": 100}},
            "required": ["percent"],
        })),
    }
}

impl<H: Host> Device<H> {
    /// Sends a typed message to the agent.
    pub fn send_text(&mut self, text: &str, now: Instant) -> Result<(), CommandError> {
        if self.phase != Phase::Online {
            return Err(CommandError::Offline);
        }
        if text.trim().is_empty() {
            return Err(CommandError::Empty);
        }
        if text.chars().count() > MAX_TEXT {
            return Err(CommandError::TooLong);
        }
        // Typing is doing something else: a CANCEL hold under way must not wipe it.
        self.cancel_hold = None;
        let id = self.next_message_id('t');
        self.send(Text {
            id: Some(id),
            text: text.to_string(),
        });
        self.chat.request(text, now);
        self.touch();
        self.finish();
        Ok(())
    }

    /// Records a sensor reading. It goes in every `hello`, and online it is reported in
    /// `state`, at most once per [`STATE_INTERVAL_SECS`]: readings in between are merged
    /// and sent when the interval has passed.
    pub fn set_sensor(&mut self, name: &str, value: Value, now: Instant) {
        self.sensors.insert(name.to_string(), value.clone());
        self.pending_sensors.insert(name.to_string(), value);
        if self.phase == Phase::Online {
            self.report_state(now);
        }
        self.finish();
    }

    /// Sends an `event`; with `notify` the agent receives it as a message.
    pub fn emit_event(
        &mut self,
        name: &str,
        data: Option<Value>,
        notify: bool,
    ) -> Result<(), CommandError> {
        if self.phase != Phase::Online {
            return Err(CommandError::Offline);
        }
        self.send(Event {
            name: name.to_string(),
            data,
            notify,
        });
        self.finish();
        Ok(())
    }

    /// Adds an action to the device's manifest (replacing one of the same name); the
    /// server learns it from the next `hello`. The built-in names are refused.
    pub fn register_action(&mut self, spec: ActionSpec) -> Result<(), CommandError> {
        if [VOLUME_ACTION, BRIGHTNESS_ACTION].contains(&spec.name.as_str()) {
            return Err(CommandError::ReservedName);
        }
        self.app_actions.retain(|a| a.name != spec.name);
        self.app_actions.push(spec);
        Ok(())
    }

    /// Answers an [`Action::Invoke`]: `Ok` with what it produced, `Err` with what went
    /// wrong. Each invocation is answered once; a late answer is refused.
    pub fn complete_action(
        &mut self,
        id: &str,
        result: Result<Value, String>,
    ) -> Result<(), CommandError> {
        let at = self
            .invoked
            .iter()
            .position(|i| i.id == id)
            .ok_or(CommandError::UnknownAction)?;
        let invoked = self.invoked.swap_remove(at);
        self.answer_action(invoked.id, result);
        self.finish();
        Ok(())
    }

    /// The manifest sent in `hello`: the built-in actions the board supports, then the
    /// application's.
    pub fn manifest(&self) -> Vec<ActionSpec> {
        let mut specs = Vec::new();
        if self.config.speaker_rate.is_some() {
            specs.push(percent_spec(
                VOLUME_ACTION,
                "Set the speaker volume, in percent.",
            ));
        }
        if self.config.display.is_some() {
            specs.push(percent_spec(
                BRIGHTNESS_ACTION,
                "Set the screen brightness, in percent.",
            ));
        }
        specs.extend(self.app_actions.iter().cloned());
        specs
    }

    pub(super) fn on_text(&mut self, text: &str, now: Instant) {
        if !matches!(self.phase, Phase::Handshake | Phase::Online) {
            return;
        }
        self.last_inbound = now;
        match ServerMessage::decode(text) {
            Ok(msg) => self.on_message(msg, now),
            Err(DecodeError::InvalidFields {
                type_name: "ota.offer",
                ..
            }) if self.phase == Phase::Online => {
                let reply = self.ota.bad_offer(&mut self.host);
                self.send(reply);
            }
            Err(_) => self.stats.bad_frames += 1,
        }
    }

    pub(super) fn on_binary(&mut self, bytes: &[u8], now: Instant) {
        if !matches!(self.phase, Phase::Handshake | Phase::Online) {
            return;
        }
        self.last_inbound = now;
        let Ok((header, payload)) = decode_frame(bytes) else {
            self.stats.bad_frames += 1;
            return;
        };
        if self.phase != Phase::Online {
            return;
        }
        match header.channel {
            Channel::Audio => {
                self.player.push(header.stream, header.seq, payload);
                self.pump_player(now);
            }
            Channel::Image => self.image_data(header.stream, payload),
            Channel::Firmware => {
                let reply = self
                    .ota
                    .data(header.stream, header.seq, payload, &mut self.host, now);
                if let Some(reply) = reply {
                    // Acks every 16 KB also move the progress bar.
                    self.send(reply);
                    self.touch();
                }
            }
        }
    }

    fn on_message(&mut self, msg: ServerMessage, now: Instant) {
        match msg {
            ServerMessage::Challenge(c) => self.on_challenge(&c),
            ServerMessage::Welcome(w) => {
                self.on_welcome(&w, now);
                self.report_state(now);
            }
            ServerMessage::Error(e) => self.on_error(e.code),
            ServerMessage::Ping(p) => self.send(Pong { ts: p.ts }),
            ServerMessage::Pong(_) | ServerMessage::Unknown(_) => {}
            // Everything else belongs to an established session.
            _ if self.phase != Phase::Online => {}
            ServerMessage::Pairing(p) => {
                self.paired = false;
                self.pairing = Some(p);
                self.touch();
            }
            ServerMessage::Paired(_) => {
                self.paired = true;
                self.pairing = None;
                self.show_notice("Paired", None, now);
            }
            ServerMessage::Unpaired(_) => {
                self.paired = false;
                self.touch();
            }
            // A new turn takes the screen from a card an earlier one left; within the
            // card's own turn its replies wait under it.
            ServerMessage::TurnStart(t) => {
                self.chat.start_turn(t.turn, now);
                self.card = None;
                self.touch();
            }
            ServerMessage::Transcript(t) => {
                if !self.chat.replying {
                    self.chat.text.show(&t.text);
                }
                self.chat.progress(now);
                self.touch();
            }
            ServerMessage::Status(s) => {
                self.chat.status = s.text;
                self.chat.progress(now);
                self.touch();
            }
            ServerMessage::ReplyDelta(d) => {
                self.chat.show_reply(&d.text);
                self.chat.streaming = true;
                self.chat.replying = self.chat.awaiting;
                self.chat.progress(now);
                self.touch();
            }
            ServerMessage::Reply(r) => {
                self.on_reply(&r, now);
                self.touch();
            }
            ServerMessage::TurnEnd(e) => self.on_turn_end(&e.turn, e.outcome, now),
            ServerMessage::Notice(n) => self.show_notice(&n.text, n.ttl_s, now),
            ServerMessage::Prompt(p) => self.show_prompt(p, now),
            ServerMessage::PromptClose(c) => self.close_prompt(&c.id),
            ServerMessage::Display(d) => self.show_card(d, now),
            ServerMessage::ImageStart(i) => self.image_start(i),
            ServerMessage::ImageEnd(e) => self.image_end(e.stream, now),
            ServerMessage::AudioStart(a) => {
                if self.config.speaker_rate.is_some() && a.format == PCM16 {
                    if self.player.start(a.stream, a.rate) {
                        self.act(Action::StopPlayback);
                    }
                    self.touch();
                }
            }
            ServerMessage::AudioEnd(a) => {
                self.player.end(a.stream);
                self.pump_player(now);
            }
            ServerMessage::AudioAbort(a) => {
                if self.player.abort(a.stream) {
                    self.act(Action::StopPlayback);
                    self.touch();
                }
            }
            ServerMessage::Action(a) => self.on_action(a, now),
            ServerMessage::OtaOffer(o) => {
                let max_size = self.config.ota_max_size;
                let reply = self.ota.offer(&o, max_size, &mut self.host, now);
                self.send(reply);
                self.touch();
            }
            ServerMessage::OtaBegin(b) => {
                let reply = self.ota.begin(&b, &self.identity, &mut self.host, now);
                self.send(reply);
                self.touch();
            }
            ServerMessage::OtaEnd(_) => {
                let reply = self.ota.end(&self.config.board, &mut self.host);
                if matches!(reply, proto::DeviceMessage::OtaDone(_)) {
                    self.restart_at = Some(now + secs(RESTART_DELAY_SECS));
                }
                self.send(reply);
                self.touch();
            }
            ServerMessage::OtaAbort(_) => {
                self.ota.abandon(&mut self.host);
                self.touch();
            }
        }
    }

    fn on_reply(&mut self, reply: &proto::Reply, now: Instant) {
        if reply.interim {
            // Commentary while the agent works: shown, but the answer is still to come.
            self.chat.text.show(&reply.text);
            self.chat.progress(now);
            return;
        }
        self.chat.show_reply(&reply.text);
        self.chat.streaming = false;
        if self.chat.awaiting && self.chat.turn.is_some() {
            // The answer is in; turn.end follows.
            self.chat.replying = true;
            self.chat.no_reply_at = None;
        } else {
            self.chat.end_turn();
        }
    }

    fn on_turn_end(&mut self, turn: &str, outcome: Outcome, now: Instant) {
        let stale = self.chat.turn.as_deref().is_some_and(|t| t != turn);
        if stale || !self.chat.awaiting {
            return;
        }
        self.chat.end_turn();
        match outcome {
            Outcome::Success => {}
            Outcome::Failure => self.show_notice("Something went wrong", None, now),
            Outcome::Cancelled => self.show_notice("Cancelled", None, now),
        }
        self.touch();
    }

    fn on_action(&mut self, action: proto::Action, now: Instant) {
        let volume = action.name == VOLUME_ACTION && self.config.speaker_rate.is_some();
        let brightness = action.name == BRIGHTNESS_ACTION && self.config.display.is_some();
        if volume || brightness {
            let result = match percent(&action.args) {
                Some(p) if volume => {
                    self.volume = p;
                    self.act(Action::SetVolume(p));
                    Ok(json!({ "percent": p }))
                }
                Some(p) => {
                    self.brightness = p;
                    self.act(Action::SetBrightness(p));
                    Ok(json!({ "percent": p }))
                }
                None => Err("percent must be an integer from 0 to 100".to_string()),
            };
            self.answer_action(action.id, result);
        } else if !self.app_actions.iter().any(|a| a.name == action.name) {
            let error = format!("unknown action {}", action.name);
            self.answer_action(action.id, Err(error));
        } else if self.invoked.len() >= MAX_INVOKED {
            self.answer_action(action.id, Err("too many actions at once".to_string()));
        } else {
            self.invoked.push(Invoked {
                id: action.id.clone(),
                deadline: now + secs(ACTION_ANSWER_SECS),
            });
            self.act(Action::Invoke {
                id: action.id,
                name: action.name,
                args: action.args,
            });
        }
    }

    fn answer_action(&mut self, id: String, result: Result<Value, String>) {
        if self.phase != Phase::Online {
            // The server failed every pending action when the connection dropped.
            return;
        }
        let (ok, result, error) = match result {
            Ok(value) => (true, Some(value), None),
            Err(error) => (false, None, Some(error)),
        };
        self.send(ActionResult {
            id,
            ok,
            result,
            error,
        });
    }

    /// Sends the readings gathered since the last `state`, if the interval allows.
    fn report_state(&mut self, now: Instant) {
        if self.pending_sensors.is_empty() {
            return;
        }
        let allowed = self.last_state_at.map(|t| t + secs(STATE_INTERVAL_SECS));
        if allowed.is_some_and(|t| now < t) {
            self.state_flush_at = allowed;
            return;
        }
        let sensors = core::mem::take(&mut self.pending_sensors);
        self.send(State { sensors });
        self.last_state_at = Some(now);
        self.state_flush_at = None;
    }

    /// Hands the speaker what the jitter buffer releases at `now`.
    fn pump_player(&mut self, now: Instant) {
        let was_active = self.player.is_active();
        if let Some(release) = self.player.poll(now) {
            if !release.samples.is_empty() {
                self.act(Action::Play {
                    rate: release.rate,
                    samples: release.samples,
                });
            }
        }
        if was_active != self.player.is_active() {
            self.touch();
        }
    }

    pub(super) fn conversation_timers(&mut self, now: Instant) {
        if due(self.chat.no_reply_at, now) {
            self.chat.end_turn();
            self.chat.text.show("No reply");
            self.touch();
        }
        if due(self.state_flush_at, now) {
            self.state_flush_at = None;
            if self.phase == Phase::Online {
                self.report_state(now);
            }
        }
        if due(self.player.deadline(), now) {
            self.pump_player(now);
        }
        if due(self.ota.deadline(), now) {
            let reply = self.ota.timeout(&mut self.host);
            self.send(reply);
            self.touch();
        }
        while let Some(at) = self.invoked.iter().position(|i| i.deadline <= now) {
            let invoked = self.invoked.swap_remove(at);
            let error = "the device did not answer in time".to_string();
            self.answer_action(invoked.id, Err(error));
        }
    }

    /// Forgets everything that lived on the connection that just ended.
    pub(super) fn drop_session(&mut self) {
        if self.recording.take().is_some() {
            self.act(Action::StopMic);
        }
        if self.player.stop() {
            self.act(Action::StopPlayback);
        }
        self.chat.end_turn();
        self.invoked.clear();
        self.ota.abandon(&mut self.host);
        self.cancel_hold = None;
        self.prompt = None;
        self.incoming_image = None;
    }

    pub(super) fn next_message_id(&mut self, prefix: char) -> String {
        self.next_id = self.next_id.wrapping_add(1);
        format!("{prefix}{}", self.next_id)
    }
}
