//! Agent → device: how the gadget core answers each conversation-port call.
//!
//! Most calls are answered at once from the core's state; speech and pictures become
//! effects, and an action's answer waits in the core for the device's result or its
//! deadline.

use std::time::Duration;

use herald_gadget_proto::{self as proto, limits, ServerMessage};
use herald_port::{ActionError, DeliveryError, Outcome, Platform, Prompt, SendOptions};
use tokio::time::Instant;

use super::super::prompts::{Question, Show};
use super::core::{profile, Conn, Core, Effect, ImageJob, PendingAction};
use crate::calls::Call;
use crate::ids;

impl Core {
    pub(crate) fn handle_call(&mut self, call: Call, now: Instant) {
        match call {
            Call::SendText {
                text,
                options,
                reply,
            } => {
                let _ = reply.send(self.send_text(&text, options));
            }
            Call::EditText {
                message_id,
                text,
                finalize,
                reply,
            } => {
                let _ = reply.send(self.edit_text(&message_id, &text, finalize));
            }
            Call::Status { text, reply } => {
                let status = ServerMessage::Status(proto::Status {
                    text: self.shape(&text),
                });
                let _ = reply.send(self.deliver(status));
            }
            Call::TurnStarted { reply } => {
                self.metrics.turn(Platform::Gadget);
                let turn = ids::random_hex(12);
                self.turn = Some(turn.clone());
                self.streaming = None;
                let start = ServerMessage::TurnStart(proto::TurnStart { turn: turn.clone() });
                let _ = reply.send(self.deliver(start).map(|()| turn));
            }
            Call::TurnEnded {
                turn,
                outcome,
                reply,
            } => {
                let _ = reply.send(self.end_turn(&turn, outcome));
            }
            Call::Ask {
                prompt,
                ttl_s,
                reply,
            } => {
                let _ = reply.send(self.ask(prompt, ttl_s, now));
            }
            Call::Withdraw { prompt_id, reply } => {
                let result = match self.prompts.withdraw(&prompt_id) {
                    Some(Show::Close { closed, next }) => {
                        let next = next.cloned();
                        self.send(ServerMessage::PromptClose(proto::PromptClose {
                            id: closed,
                        }));
                        if let Some(next) = next {
                            self.show(&next, now);
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
                let _ = reply.send(self.deliver(display));
            }
            Call::Transcript { text, reply } => {
                let transcript = ServerMessage::Transcript(proto::Transcript {
                    text: self.shape(&text),
                });
                let _ = reply.send(self.deliver(transcript));
            }
            Call::Notice { text, reply } => {
                let result = self.reachable().map(|_| ());
                if result.is_ok() {
                    self.notice(&text);
                }
                let _ = reply.send(result);
            }
            Call::Voice { path, reply } => match self.speaker() {
                Ok(rate) => self.effect(Effect::OpenSpeech { path, rate, reply }),
                Err(err) => {
                    let _ = reply.send(Err(err));
                }
            },
            Call::Image {
                path,
                caption,
                reply,
            } => {
                let image_box = match self.reachable() {
                    Ok(conn) => conn.peer.image_box,
                    Err(err) => {
                        let _ = reply.send(Err(err));
                        return;
                    }
                };
                let Some(image_box) = image_box else {
                    self.notice("This device cannot show pictures.");
                    let _ = reply.send(Ok(()));
                    return;
                };
                let job = ImageJob {
                    path,
                    image_box,
                    stream: self.stream_id(),
                    caption: caption.map(|c| self.shape(&c)),
                    turn: self.turn.clone(),
                    reply,
                };
                self.effect(Effect::ShowImage(Box::new(job)));
            }
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
            Call::InvokeAction { name, args, reply } => {
                let known = match self.reachable() {
                    Ok(conn) => conn.peer.actions.iter().any(|a| a.name == name),
                    Err(err) => {
                        let _ = reply.send(Err(ActionError::Delivery(err)));
                        return;
                    }
                };
                if !known {
                    let _ = reply.send(Err(ActionError::UnknownAction(name)));
                    return;
                }
                let id = ids::random_hex(12);
                let deadline = now + Duration::from_secs(limits::ACTION_TIMEOUT_SECS);
                self.actions
                    .insert(id.clone(), PendingAction { reply, deadline });
                self.send(ServerMessage::Action(proto::Action { id, name, args }));
            }
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
    fn speaker(&self) -> Result<u32, DeliveryError> {
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

    fn end_turn(&mut self, ended: &str, outcome: Outcome) -> Result<(), DeliveryError> {
        let Some(turn) = self.turn.take_if(|t| t == ended) else {
            return Ok(());
        };
        self.streaming = None;
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
            expires: ttl_s.map(|s| now + Duration::from_secs(u64::from(s))),
        };
        let id = question.id.clone();
        if let Show::Ask(head) = self.prompts.push(question) {
            let head = head.clone();
            self.show(&head, now);
        }
        Ok(id)
    }
}
