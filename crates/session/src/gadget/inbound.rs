//! Device → agent: how the gadget core takes each frame the device sends.
//!
//! Messages become inbound events for the agent's queue (only from a paired device; an
//! unpaired one is shown its pairing code instead), utterances are collected and saved
//! as WAV files, answers settle questions and actions, and readings go to the store.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use herald_gadget_proto::{self as proto, limits, DeviceMessage, ServerMessage};
use herald_port::{
    ActionError, Command as ConvCommand, Inbound, InboundBody, PromptAnswer, RequestError,
    Response, Source,
};
use serde_json::Value;
use tracing::debug;

use super::core::{profile, protocol_error, Core, Effect};
use super::prompts::{Replied, Show};
use super::utterance::Utterance;
use crate::io::{Close, Failed};
use crate::note::{Note, NoteKind};
use crate::{Counted, SessionCore};

impl Core {
    /// A frame that could not be read: the device is told, and a connection that cannot
    /// read on is closed with `close`.
    pub fn handle_bad_frame(&mut self, reason: String, close: Option<Close>) {
        debug!(device = %self.device_id, %reason, "bad frame");
        self.effect(Effect::Count(Counted::Error("protocol")));
        self.send(protocol_error(reason));
        if let Some(code) = close {
            self.close(code, "protocol");
        }
    }

    pub fn handle_frame(&mut self, msg: DeviceMessage, now: Instant) {
        match msg {
            DeviceMessage::Ping(ping) => {
                self.send(ServerMessage::Pong(proto::Pong { ts: ping.ts }))
            }
            DeviceMessage::Pong(_) => {}
            DeviceMessage::Text(text) => {
                if text.text.chars().count() > limits::MAX_TEXT {
                    self.notice("That message is too long.");
                    return;
                }
                let id = self.message_id(text.id);
                self.forward(
                    id,
                    InboundBody::Text {
                        text: text.text,
                        reply_to: None,
                    },
                );
            }
            DeviceMessage::Cancel(_) => {
                self.interrupt_speech();
                self.stop_waiting();
                self.command(ConvCommand::Stop);
            }
            DeviceMessage::SessionNew(_) => {
                self.interrupt_speech();
                self.stop_waiting();
                self.command(ConvCommand::New);
            }
            // An unpaired device may not fill the inbox or the store: its voice and
            // readings go nowhere.
            DeviceMessage::AudioStart(_) if !self.paired => self.notice("Pair this device first."),
            DeviceMessage::State(_) if !self.paired => {
                debug!(device = %self.device_id, "readings of an unpaired device ignored");
            }
            DeviceMessage::AudioStart(start) => {
                // Speaking over the agent stops it (barge-in).
                self.interrupt_speech();
                match Utterance::start(&start, self.rules.max_utterance_s) {
                    Ok(utterance) => self.utterance = Some(Box::new(utterance)),
                    Err(why) => {
                        self.utterance = None;
                        self.notice(&why.to_string());
                    }
                }
            }
            DeviceMessage::AudioEnd(end) => self.end_utterance(end.stream, now),
            DeviceMessage::AudioCancel(cancel) => {
                self.utterance.take_if(|u| u.stream == cancel.stream);
            }
            DeviceMessage::PromptReply(reply) => self.on_prompt_reply(reply, now),
            DeviceMessage::ActionResult(result) => self.on_action_result(result),
            DeviceMessage::State(state) => {
                if let Some(readings) = self.sensors.take(&state.sensors, now) {
                    self.effect(Effect::SaveSensors(readings));
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
                let id = self.ids.hex(12);
                let device = self.conn.as_ref().and_then(|c| c.peer.name.as_deref());
                self.effect(Effect::Notify(Box::new(Note {
                    kind: NoteKind::Event,
                    title: device.unwrap_or(&self.device_id).to_owned(),
                    body: format!("{name} {data}"),
                    tag: format!("e-{id}"),
                    device: self.device_id.clone(),
                    message_id: None,
                    prompt_id: None,
                    options: Vec::new(),
                })));
                let body = InboundBody::Text {
                    text,
                    reply_to: None,
                };
                self.forward(id, body);
            }
            DeviceMessage::Hello(_) | DeviceMessage::Auth(_) => {
                self.send(protocol_error("already authenticated".into()));
            }
            DeviceMessage::OtaReady(_)
            | DeviceMessage::OtaAck(_)
            | DeviceMessage::OtaDone(_)
            | DeviceMessage::OtaError(_) => self.ota_message(&msg, now),
            other => debug!(device = %self.device_id, ?other, "message not handled"),
        }
    }

    /// A channel-1 frame of the utterance being received; anything else is dropped.
    pub fn handle_binary(&mut self, data: &[u8]) {
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

    fn command(&mut self, command: ConvCommand) {
        let id = self.ids.hex(12);
        self.forward(id, InboundBody::Command(command));
    }

    fn on_prompt_reply(&mut self, reply: proto::PromptReply, now: Instant) {
        let yes = reply.answer == proto::Answer::Yes;
        let ids = &mut self.ids;
        let (settled, next) = match self.prompts.reply(&reply.id, yes, || ids.hex(8)) {
            None => {
                self.notice("That question has expired");
                return;
            }
            Some(Replied::Next(step)) => (None, Some(step.clone())),
            Some(Replied::Settled { id, choice, show }) => {
                let next = match show {
                    Show::Ask(next) => Some(next.clone()),
                    _ => None,
                };
                (Some((id, choice)), next)
            }
        };
        if let Some((prompt_id, choice)) = settled {
            let id = self.ids.hex(12);
            self.forward(
                id,
                InboundBody::PromptAnswer(PromptAnswer { prompt_id, choice }),
            );
        }
        if let Some(next) = next {
            self.show(&next, now);
        }
        self.question_closed(now);
    }

    fn on_action_result(&mut self, result: proto::ActionResult) {
        let Some(at) = self.actions.iter().position(|(id, _)| *id == result.id) else {
            debug!(device = %self.device_id, id = %result.id, "result for no pending action");
            return;
        };
        let (_, action) = self.actions.swap_remove(at);
        let outcome = if result.ok {
            Ok(Response::ActionResult {
                result: match result.result {
                    Some(Value::Object(map)) => Value::Object(map),
                    Some(other) => serde_json::json!({ "value": other }),
                    None => Value::Object(Default::default()),
                },
            })
        } else {
            let error = result.error.unwrap_or_else(|| "the action failed".into());
            Err(RequestError::Action(ActionError::Device(error)))
        };
        self.answer(action.call, outcome);
    }

    /// The utterance is complete: too short gets a notice, the rest is saved (from the
    /// buffer it was received into) and then handed to the agent as voice.
    fn end_utterance(&mut self, stream: u8, now: Instant) {
        let Some(utterance) = self.utterance.take_if(|u| u.stream == stream) else {
            return;
        };
        if utterance.duration().as_millis() < u128::from(limits::MIN_UTTERANCE_MS) {
            self.notice("Too short: hold the button while you speak.");
            return;
        }
        if utterance.gaps > 0 || utterance.dropped > 0 {
            debug!(device = %self.device_id, gaps = utterance.gaps, dropped = utterance.dropped, "utterance was incomplete");
        }
        let message_id = self.message_id(utterance.id.clone());
        let rate = utterance.rate;
        self.effect(Effect::SaveUtterance {
            message_id,
            rate,
            pcm: utterance.into_pcm(),
        });
        self.heard(now);
    }

    /// Where the shell put an utterance's WAV file (and its length), or why it could not.
    pub fn handle_utterance_saved(
        &mut self,
        message_id: String,
        saved: Result<(PathBuf, Duration), Failed>,
    ) {
        match saved {
            Ok((path, duration)) => {
                let body = InboundBody::Voice {
                    path,
                    duration_ms: u32::try_from(duration.as_millis()).unwrap_or(u32::MAX),
                    transcript: None,
                };
                self.forward(message_id, body);
            }
            Err(Failed) => self.notice("Your message could not be saved."),
        }
    }

    /// Hand an event to the agent, in order, unless the device may not reach it.
    pub(super) fn forward(&mut self, message_id: String, body: InboundBody) {
        if !self.paired {
            self.ask_pairing_code();
            return;
        }
        let inbound = Inbound {
            source: Source {
                chat: self.chat(),
                user_id: self.device_id.clone(),
                user_name: self
                    .conn
                    .as_ref()
                    .and_then(|c| c.peer.name.as_deref().map(str::to_owned)),
            },
            message_id,
            body,
            profile: self
                .conn
                .as_ref()
                .map(|conn| Box::new(profile(&conn.peer, self.paired))),
        };
        self.effect(Effect::ToAgent(Box::new(inbound)));
    }

    /// The device's id for a message when it is a short, printable one (it reaches the
    /// agent and its logs), else one of ours.
    fn message_id(&mut self, id: Option<String>) -> String {
        id.filter(|id| {
            (1..=limits::MAX_ID).contains(&id.len()) && id.chars().all(|c| c.is_ascii_graphic())
        })
        .unwrap_or_else(|| self.ids.hex(12))
    }
}
