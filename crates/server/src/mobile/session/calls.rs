//! Agent → phone: how the phone core answers each conversation-port call and each
//! `deliver` push. Files to send are read by the shell; everything else is answered at
//! once from the core's state.

use std::path::Path;
use std::time::Duration;

use herald_mobile_proto::{
    self as proto, limits, AvatarState, Chunk, Deliver, MediaKindDown, PromptCard, PromptKind,
    ServerFrame,
};
use herald_port::{ActionError, DeliveryError, Platform, Prompt, SendOptions};
use tokio::time::Instant;

use super::core::{Core, Effect, OpenCard};
use super::media::{mime_for, split_chunks, FileDown};
use crate::calls::Call;
use crate::ids;

/// The avatar rests this long after a turn before it goes idle.
const IDLE_PAUSE: Duration = Duration::from_millis(1500);
/// Largest file the agent may send to a phone (sent in chunks).
const MAX_MEDIA_DOWN: u64 = 64 * 1024 * 1024;

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
                let frame = ServerFrame::Message(proto::Message {
                    id: message_id,
                    text: self.cap(&text),
                    chunk: Some(Chunk { index: 0, total: 1 }),
                    final_: finalize,
                    edit: true,
                    reply_to: None,
                });
                let _ = reply.send(self.emit(&frame));
            }
            Call::Typing { on, reply } => {
                let _ = reply.send(self.emit(&ServerFrame::Typing { stop: !on }));
            }
            Call::TurnStarted { reply } => {
                self.shared.metrics.turn(Platform::Mobile);
                let turn = ids::random_hex(12);
                self.turn = Some(turn.clone());
                self.speaking = false;
                self.idle_at = None;
                let result = self
                    .emit(&ServerFrame::Typing { stop: false })
                    .and_then(|()| {
                        self.emit(&ServerFrame::Avatar {
                            state: AvatarState::Thinking,
                        })
                    });
                let _ = reply.send(result.map(|()| turn));
            }
            Call::TurnEnded { turn, reply, .. } => {
                let result = if self.turn.as_deref() == Some(turn.as_str()) {
                    let result = self.emit(&ServerFrame::Typing { stop: true });
                    self.turn = None;
                    self.idle_at = Some(now + IDLE_PAUSE);
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
                let _ = reply.send(self.ask(prompt, ttl_s, now));
            }
            Call::Withdraw { prompt_id, reply } => {
                let result = match self.cards.remove(&prompt_id) {
                    Some(_) => {
                        self.shared.cards.remove(&prompt_id);
                        self.emit(&ServerFrame::PromptDone {
                            prompt_id,
                            option_id: None,
                            expired: true,
                        })
                    }
                    None => Err(DeliveryError::UnknownMessage(prompt_id)),
                };
                let _ = reply.send(result);
            }
            Call::Voice { path, reply } => self.effect(Effect::SendFile {
                kind: MediaKindDown::Voice,
                path,
                caption: None,
                reply,
            }),
            Call::Image {
                path,
                caption,
                reply,
            } => self.effect(Effect::SendFile {
                kind: MediaKindDown::Image,
                path,
                caption,
                reply,
            }),
            Call::Document {
                path,
                caption,
                reply,
            } => self.effect(Effect::SendFile {
                kind: MediaKindDown::Document,
                path,
                caption,
                reply,
            }),
            Call::Display { card, reply } => {
                let text = format!("{}\n{}", card.title, card.body);
                let result = self.send_text(text.trim(), SendOptions::default());
                let _ = reply.send(result.map(drop));
            }
            Call::Notice { text, reply } => {
                let result = self.send_text(&text, SendOptions::default());
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
        text.chars().take(self.shared.max_message_chars).collect()
    }

    fn send_text(&mut self, text: &str, options: SendOptions) -> Result<String, DeliveryError> {
        let id = ids::random_hex(12);
        if self.turn.is_some() && !self.speaking {
            self.speaking = true;
            self.emit(&ServerFrame::Avatar {
                state: AvatarState::Speaking,
            })?;
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
            self.emit(&frame)?;
            return Ok(id);
        }
        let chunks = split_chunks(text, self.shared.max_message_chars);
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
            self.emit(&frame)?;
        }
        Ok(id)
    }

    fn ask(
        &mut self,
        prompt: Prompt,
        ttl_s: Option<u32>,
        now: Instant,
    ) -> Result<String, DeliveryError> {
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
        self.emit(&ServerFrame::Prompt(card.clone()))?;
        self.shared.cards.insert(id.clone(), self.device_id.clone());
        self.cards.insert(
            id.clone(),
            OpenCard {
                card,
                expires: now + Duration::from_secs(u64::from(timeout)),
            },
        );
        Ok(id)
    }

    /// A file of `size` bytes the shell is about to read and send in parts, each through
    /// [`Core::emit`]; refused when it is too large for a phone.
    pub(crate) fn start_file(
        &self,
        kind: MediaKindDown,
        path: &Path,
        caption: Option<String>,
        size: u64,
    ) -> Result<FileDown, DeliveryError> {
        if size > MAX_MEDIA_DOWN {
            return Err(DeliveryError::Failed(format!(
                "{} is {size} bytes; phones take at most {MAX_MEDIA_DOWN}",
                path.display()
            )));
        }
        let filename = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let mime = mime_for(filename.as_deref());
        Ok(FileDown::new(kind, mime, filename, caption, size))
    }

    /// A push from a `deliver` frame: only to a phone that is connected now.
    pub(crate) fn handle_deliver(&mut self, deliver: Deliver) -> Result<(), DeliveryError> {
        if self.conn.is_none() {
            return Err(DeliveryError::Offline(self.chat()));
        }
        if let Some(text) = deliver.text.filter(|t| !t.is_empty()) {
            self.send_text(&text, SendOptions::default())?;
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
                self.emit(&file_down.frame(part, piece))?;
            }
        }
        Ok(())
    }
}
