//! Agent → device: how the gadget core answers each conversation-port call.
//!
//! Most calls are answered at once from the core's state; speech and pictures become
//! effects, and an action's answer waits in the core for the device's result or its
//! deadline.

use std::time::{Duration, Instant};

use herald_gadget_proto::{self as proto, limits, ServerMessage};
use herald_port::{
    ActionError, DeliveryError, Notification, Outcome, Prompt, Request, RequestError, Response,
    SendOptions, TurnId,
};
use serde_json::Value;

use super::core::{profile, Conn, Core, Effect, ImageJob, PendingAction};
use super::prompts::{Question, Show};
use crate::{done, CallId, Counted};

/// Why a picture the agent sent did not reach the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PictureNotSent {
    /// The file could not be read, or is no picture the device can be shown: the
    /// agent is told why, in words.
    #[error("{0}")]
    Unusable(String),
    /// The device went away while it was sent.
    #[error("the device went away")]
    Gone,
}

impl Core {
    /// The agent's call `call`; its answer comes back as [`Effect::Answer`], at once or
    /// when the device (or the shell's work) settles it.
    pub fn handle_call(&mut self, call: CallId, request: Request, now: Instant) {
        let said = matches!(
            request,
            Request::SendText { .. }
                | Request::EditText { .. }
                | Request::Ask { .. }
                | Request::Display { .. }
                | Request::Notice { .. }
                | Request::SendVoice { .. }
                | Request::SpeechBegin { .. }
                | Request::SendImage { .. }
        );
        if !matches!(request, Request::Actions {} | Request::Profile {}) {
            self.agent_active(now, said);
        }
        let answer = match request {
            Request::SendText { text, options } => self
                .send_text(&text, options)
                .map(|message_id| Response::MessageId { message_id }),
            Request::EditText {
                message_id,
                text,
                finalize,
            } => done(self.edit_text(&message_id, &text, finalize)),
            Request::Ask { prompt, ttl_s } => self
                .ask(prompt, ttl_s, now)
                .map(|prompt_id| Response::PromptId { prompt_id }),
            Request::Withdraw { prompt_id } => match self.prompts.withdraw(&prompt_id) {
                Some(Show::Close { closed, next }) => {
                    let next = next.cloned();
                    self.send(ServerMessage::PromptClose(proto::PromptClose {
                        id: closed,
                    }));
                    if let Some(next) = next {
                        self.show(&next, now);
                    }
                    Ok(Response::Done {})
                }
                Some(_) => Ok(Response::Done {}),
                None => Err(DeliveryError::UnknownMessage(prompt_id)),
            },
            Request::Display { card } => {
                let display = ServerMessage::Display(proto::Display {
                    title: self.shape(&card.title),
                    body: self.shape(&card.body),
                    ttl_s: card.ttl_s,
                });
                done(self.deliver(display))
            }
            Request::Transcript { text } => {
                let transcript = ServerMessage::Transcript(proto::Transcript {
                    text: self.shape(&text),
                });
                done(self.deliver(transcript))
            }
            Request::Notice { text } => {
                let reachable = self.reachable().map(|_| ());
                if reachable.is_ok() {
                    self.notice(&text);
                }
                done(reachable)
            }
            Request::SendVoice { path } => match self.speaker() {
                Ok(rate) => return self.effect(Effect::OpenSpeech { path, rate, call }),
                Err(err) => Err(err),
            },
            request @ (Request::SpeechBegin { .. }
            | Request::SpeechWrite { .. }
            | Request::SpeechFile { .. }
            | Request::SpeechEnd { .. }
            | Request::SpeechAbort { .. }) => return self.speech_request(request, call),
            Request::SendImage { path, caption } => match self.reachable() {
                Ok(conn) => match conn.peer.image_box {
                    Some(image_box) => {
                        let job = ImageJob {
                            path,
                            image_box,
                            stream: self.stream_id(),
                            caption: caption.map(|c| self.shape(&c)),
                            turn: self.turn.clone(),
                            call,
                        };
                        return self.effect(Effect::ShowImage(Box::new(job)));
                    }
                    None => {
                        self.notice("This device cannot show pictures.");
                        Ok(Response::Done {})
                    }
                },
                Err(err) => Err(err),
            },
            Request::SendDocument { .. } => Err(DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "gadgets cannot show documents".into(),
            }),
            Request::InvokeAction { name, args } => {
                return self.invoke(name, args, call, now);
            }
            Request::Actions {} => self.reachable().map(|conn| Response::Actions {
                actions: conn.peer.actions.to_vec(),
            }),
            Request::Profile {} => match &self.conn {
                Some(conn) => Ok(Response::Profile {
                    profile: profile(&conn.peer, self.paired),
                }),
                None => Err(DeliveryError::Offline(self.chat())),
            },
        };
        self.answer(call, answer.map_err(RequestError::from));
    }

    /// News from the agent; what the device cannot show (offline, unpaired) is dropped.
    pub fn handle_notification(&mut self, notification: Notification, now: Instant) {
        let shown = match notification {
            Notification::Status { text } => {
                self.agent_active(now, false);
                let status = ServerMessage::Status(proto::Status {
                    text: self.shape(&text),
                });
                self.deliver(status)
            }
            Notification::TurnStarted { turn_id } => {
                self.effect(Effect::Count(Counted::Turn));
                // A voice turn has been waited for since it was heard.
                if self.quiet_since.is_none() {
                    self.wait_for_agent(now);
                }
                self.turn = Some(turn_id.as_str().to_owned());
                self.streaming = None;
                let turn = String::from(turn_id);
                self.deliver(ServerMessage::TurnStart(proto::TurnStart { turn }))
            }
            Notification::TurnEnded { turn_id, outcome } => self.end_turn(&turn_id, outcome),
            // Gadgets show "thinking" from turn.start; they have no typing indicator.
            Notification::Typing { .. } => Ok(()),
        };
        if let Err(err) = shown {
            tracing::debug!(device = %self.device_id, %err, "news not shown");
        }
    }

    /// The shell sent the picture of call `call` (or could not, and why): its caption
    /// follows it as a reply, and the call is answered.
    pub fn handle_image_sent(
        &mut self,
        call: CallId,
        caption: Option<String>,
        turn: Option<String>,
        sent: Result<(), PictureNotSent>,
    ) {
        let answer = match sent {
            Ok(()) => {
                // A reply, not a notice: devices hide notices behind a picture, while a
                // reply stays in the conversation under it.
                if let Some(text) = caption.filter(|c| !c.is_empty()) {
                    let reply = proto::Reply {
                        turn,
                        text,
                        interim: false,
                    };
                    self.send(ServerMessage::Reply(reply));
                }
                Ok(Response::Done {})
            }
            Err(PictureNotSent::Unusable(reason)) => {
                Err(RequestError::from(DeliveryError::Unsupported {
                    chat: self.chat(),
                    reason,
                }))
            }
            Err(PictureNotSent::Gone) => Err(DeliveryError::Offline(self.chat()).into()),
        };
        self.answer(call, answer);
    }

    /// Run a device action: its answer waits for the device's result or the deadline.
    fn invoke(&mut self, name: String, args: Value, call: CallId, now: Instant) {
        let known = match self.reachable() {
            Ok(conn) => conn.peer.actions.iter().any(|a| a.name == name),
            Err(err) => return self.answer(call, Err(err.into())),
        };
        if !known {
            let unknown = ActionError::UnknownAction(name);
            return self.answer(call, Err(RequestError::Action(unknown)));
        }
        let id = self.ids.hex(12);
        let deadline = now + Duration::from_secs(limits::ACTION_TIMEOUT_SECS);
        self.actions
            .push((id.clone(), PendingAction { call, deadline }));
        self.send(ServerMessage::Action(proto::Action { id, name, args }));
    }

    /// The agent may reach only a connected device that is paired: an unpaired one
    /// shows its pairing code and nothing from the agent (tools, cards, `hermes send`).
    pub(super) fn reachable(&self) -> Result<&Conn, DeliveryError> {
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

    fn deliver(&mut self, msg: ServerMessage) -> Result<(), DeliveryError> {
        self.reachable()?;
        self.send(msg);
        Ok(())
    }

    /// The rate the device's speaker plays, when speech may go to it.
    pub(super) fn speaker(&self) -> Result<u32, DeliveryError> {
        self.reachable()?
            .peer
            .speaker_rate
            .ok_or_else(|| DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "the device has no speaker".into(),
            })
    }

    fn send_text(&mut self, text: &str, options: SendOptions) -> Result<String, DeliveryError> {
        self.reachable()?;
        let id = self.ids.hex(12);
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
        self.send(msg);
        Ok(id)
    }

    fn edit_text(
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
        self.send(msg);
        Ok(())
    }

    pub(super) fn end_turn(
        &mut self,
        ended: &TurnId,
        outcome: Outcome,
    ) -> Result<(), DeliveryError> {
        let Some(turn) = self.turn.take_if(|t| t == ended.as_str()) else {
            return Ok(());
        };
        self.streaming = None;
        self.turn_over(outcome);
        let outcome = match outcome {
            Outcome::Success => proto::Outcome::Success,
            Outcome::Failure => proto::Outcome::Failure,
            Outcome::Cancelled => proto::Outcome::Cancelled,
        };
        let end = ServerMessage::TurnEnd(proto::TurnEnd { turn, outcome });
        if self.speaking.is_some() {
            // The turn is over when the device has heard it: end it after the speech,
            // so the screen does not go idle in between.
            self.deferred_end = Some(Box::new(end));
            Ok(())
        } else {
            self.deliver(end)
        }
    }

    fn ask(
        &mut self,
        prompt: Prompt,
        ttl_s: Option<u32>,
        now: Instant,
    ) -> Result<String, DeliveryError> {
        let ttl_s = match &prompt {
            // Gadgets have two buttons: a question without choices is the agent's to ask
            // in words (choices are asked one by one, see `prompts`).
            Prompt::Clarify { choices, .. } if choices.is_empty() => {
                return Err(DeliveryError::Unsupported {
                    chat: self.chat(),
                    reason: "gadgets answer only yes or no".into(),
                })
            }
            Prompt::ExecApproval { .. } | Prompt::Clarify { .. } => ttl_s,
            Prompt::Confirm { .. } => ttl_s.or(Some(limits::CONFIRM_PROMPT_TTL_SECS)),
        };
        let expires = ttl_s.map(|s| now + Duration::from_secs(u64::from(s)));
        let question = Question::new(self.ids.hex(8), prompt, ttl_s, expires);
        let id = question.id.clone();
        if let Show::Ask(head) = self.prompts.push(question) {
            let head = head.clone();
            self.show(&head, now);
        }
        Ok(id)
    }
}
