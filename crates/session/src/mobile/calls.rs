//! Agent → phone: how the phone core answers each conversation-port call and each
//! `deliver` push. Files to send are read by the shell; everything else is answered at
//! once from the core's state.

use std::path::Path;
use std::time::{Duration, Instant};

use herald_mobile_proto::{
    self as proto, limits, AvatarState, Chunk, Deliver, MediaKindDown, PromptCard, PromptKind,
    ServerFrame,
};
use herald_port::{
    ActionError, DeliveryError, Notification, Outcome, Prompt, Request, RequestError, Response,
    SendOptions,
};

use super::core::{Core, Effect, OpenCard};
use super::media::{mime_for, split_chunks, FileDown};
use super::push::question_note;
use crate::{done, CallId, Counted, FAILED_NOTICE};

/// Under a multi-select question: a card takes one tap, so several choices are typed.
const MULTI_SELECT_HINT: &str = "(Tap one, or type several with commas between.)";

/// The avatar rests this long after a turn before it goes idle.
const IDLE_PAUSE: Duration = Duration::from_millis(1500);
/// How long the avatar thinks over a voice message before the agent's turn begins
/// (speech-to-text comes first), at most: no turn by then, and it rests.
const VOICE_TAKEN_FOR: Duration = Duration::from_secs(10);
/// Largest file the agent may send to a phone (sent in chunks).
const MAX_MEDIA_DOWN: u64 = 64 * 1024 * 1024;

impl Core {
    /// The agent's call `call`; its answer comes back as [`Effect::Answer`], at once or
    /// once the shell has sent a file.
    pub fn handle_call(&mut self, call: CallId, request: Request, now: Instant) {
        self.agent_heard_from(now);
        let answer = match request {
            Request::SendText { text, options } => self
                .send_text(&text, options)
                .map(|message_id| Response::MessageId { message_id }),
            Request::EditText {
                message_id,
                text,
                finalize,
            } => {
                if finalize {
                    self.note_message(&message_id, &text);
                }
                let frame = ServerFrame::Message(proto::Message {
                    id: message_id,
                    text: self.cap(&text),
                    chunk: Some(Chunk { index: 0, total: 1 }),
                    final_: finalize,
                    edit: true,
                    reply_to: None,
                });
                done(self.emit(&frame))
            }
            Request::Ask { prompt, ttl_s } => {
                let id = self.ids.hex(16);
                self.ask(id, prompt, ttl_s, None, now)
                    .map(|prompt_id| Response::PromptId { prompt_id })
            }
            Request::Withdraw { prompt_id } => match self.cards.remove(&prompt_id) {
                Some(_) => {
                    self.effect(Effect::CardClosed {
                        prompt_id: prompt_id.clone(),
                    });
                    done(self.emit(&ServerFrame::PromptDone {
                        prompt_id,
                        option_id: None,
                        expired: true,
                    }))
                }
                None => Err(DeliveryError::UnknownMessage(prompt_id)),
            },
            Request::SendVoice { path } => {
                let kind = MediaKindDown::Voice;
                let caption = None;
                return self.effect(Effect::SendFile {
                    kind,
                    path,
                    caption,
                    call,
                });
            }
            Request::SendImage { path, caption } => {
                let kind = MediaKindDown::Image;
                return self.effect(Effect::SendFile {
                    kind,
                    path,
                    caption,
                    call,
                });
            }
            Request::SendDocument { path, caption } => {
                let kind = MediaKindDown::Document;
                return self.effect(Effect::SendFile {
                    kind,
                    path,
                    caption,
                    call,
                });
            }
            Request::Display { card } => {
                let text = format!("{}\n{}", card.title, card.body);
                done(
                    self.send_text(text.trim(), SendOptions::default())
                        .map(drop),
                )
            }
            Request::Notice { text } => {
                done(self.send_text(&text, SendOptions::default()).map(drop))
            }
            // Phones show their own voice message instead of a transcript.
            Request::Transcript { .. } => Ok(Response::Done {}),
            Request::InvokeAction { name, .. } => {
                let unknown = ActionError::UnknownAction(name);
                return self.answer(call, Err(RequestError::Action(unknown)));
            }
            Request::Actions {} => Ok(Response::Actions {
                actions: Vec::new(),
            }),
            Request::Profile {} => Err(DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "phones have no device profile".into(),
            }),
            // A phone plays a reply's voice as one message (`send_voice`), not as it is made.
            Request::SpeechBegin { .. }
            | Request::SpeechWrite { .. }
            | Request::SpeechFile { .. }
            | Request::SpeechEnd { .. }
            | Request::SpeechAbort { .. } => Err(DeliveryError::Unsupported {
                chat: self.chat(),
                reason: "phones take speech as a voice message".into(),
            }),
        };
        self.answer(call, answer.map_err(RequestError::from));
    }

    /// News from the agent; what the phone cannot be shown (offline) is dropped.
    pub fn handle_notification(&mut self, notification: Notification, now: Instant) {
        let shown = match notification {
            Notification::Typing { on } => self.emit(&ServerFrame::Typing { stop: !on }),
            Notification::TurnStarted { turn_id } => {
                self.effect(Effect::Count(Counted::Turn));
                self.turn = Some(turn_id.into());
                self.speaking = false;
                self.idle_at = None;
                self.quiet_since = Some(now);
                self.emit(&ServerFrame::Typing { stop: false })
                    .and_then(|()| {
                        self.emit(&ServerFrame::Avatar {
                            state: AvatarState::Thinking,
                        })
                    })
            }
            Notification::TurnEnded { turn_id, outcome } => {
                if self.turn.as_deref() != Some(turn_id.as_str()) {
                    return;
                }
                // A reply already shown has the agent's own words for what went wrong.
                let unsaid_failure = outcome == Outcome::Failure && !self.speaking;
                self.turn_over(unsaid_failure, now)
            }
            // Phones show typing and the avatar instead of a working phrase.
            Notification::Status { .. } => Ok(()),
        };
        if let Err(err) = shown {
            tracing::debug!(device = %self.device_id, %err, "news not shown");
        }
    }

    /// A voice message went to the agent: the avatar thinks at once, as a gadget hears its
    /// "heard you" cue, instead of after the transcription the agent's turn waits for.
    pub(super) fn voice_taken(&mut self, now: Instant) {
        if self.turn.is_some() {
            return;
        }
        let thinking = ServerFrame::Avatar {
            state: AvatarState::Thinking,
        };
        if self.emit(&thinking).is_ok() {
            self.idle_at = Some(now + VOICE_TAKEN_FOR);
        }
    }

    /// The turn is over: typing stops and the avatar rests. With `failed`, the phone is
    /// told in a message (which the avatar speaks), so it is never left waiting in silence.
    pub(super) fn turn_over(&mut self, failed: bool, now: Instant) -> Result<(), DeliveryError> {
        self.quiet_since = None;
        let said = if failed {
            self.send_text(FAILED_NOTICE, SendOptions::default())
                .map(drop)
        } else {
            Ok(())
        };
        let sent = self.emit(&ServerFrame::Typing { stop: true });
        self.turn = None;
        self.idle_at = Some(now + IDLE_PAUSE);
        said.and(sent)
    }

    /// Text within the phone's limit, cut at a character boundary.
    fn cap(&self, text: &str) -> String {
        text.chars().take(self.max_message_chars).collect()
    }

    fn send_text(&mut self, text: &str, options: SendOptions) -> Result<String, DeliveryError> {
        let id = self.ids.hex(12);
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
        self.note_message(&id, text);
        let chunks = split_chunks(text, self.max_message_chars);
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

    /// Another device's question `prompt_id`, shown here too: the card names the device
    /// that asks, and answering it answers the question there (the hub sees to it that
    /// the first answer anywhere wins and the other copies are withdrawn).
    pub fn handle_copy(
        &mut self,
        prompt_id: String,
        prompt: Prompt,
        ttl_s: Option<u32>,
        asked_by: &str,
        now: Instant,
    ) -> Result<(), DeliveryError> {
        if self.cards.contains_key(&prompt_id) {
            return Ok(());
        }
        self.ask(prompt_id, prompt, ttl_s, Some(asked_by), now)
            .map(drop)
    }

    /// Show card `id` for `prompt`; `asked_by` names the device that asked, when it is
    /// another one.
    fn ask(
        &mut self,
        id: String,
        prompt: Prompt,
        ttl_s: Option<u32>,
        asked_by: Option<&str>,
        now: Instant,
    ) -> Result<String, DeliveryError> {
        let timeout = ttl_s.unwrap_or(limits::PROMPT_TIMEOUT_SECS);
        let session = proto::session_key(&self.device_id);
        let card = card_for(id.clone(), prompt, timeout, session, asked_by);
        self.emit(&ServerFrame::Prompt(card.clone()))?;
        self.note_away(question_note(&card, asked_by, &self.device_id));
        self.effect(Effect::CardShown {
            prompt_id: id.clone(),
        });
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
    pub fn start_file(
        &mut self,
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
        let id = self.ids.hex(12);
        Ok(FileDown::new(id, kind, mime, filename, caption, size))
    }

    /// A push from a `deliver` frame: only to a phone that is connected now.
    pub fn handle_deliver(&mut self, deliver: Deliver) -> Result<(), DeliveryError> {
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
            let id = self.ids.hex(12);
            let file_down =
                FileDown::new(id, media.kind, mime, media.filename, media.caption, size);
            for (part, piece) in (0..).zip(proto::media_pieces(&bytes)) {
                self.emit(&file_down.frame(part, piece))?;
            }
        }
        Ok(())
    }
}

/// The card for question `id` (shown for `timeout` seconds in session `session`): its
/// text, named after `asked_by` when another device asked, and only the options the
/// agent allows.
pub fn card_for(
    id: String,
    prompt: Prompt,
    timeout: u32,
    session: String,
    asked_by: Option<&str>,
) -> PromptCard {
    // An option the agent does not offer is not on the card, so it is not accepted
    // either: "always" needs both permissions, "session" its own.
    let (allow_session, permanent) = match &prompt {
        Prompt::ExecApproval {
            allow_session,
            allow_permanent,
            ..
        } => (*allow_session, *allow_session && *allow_permanent),
        _ => (true, true),
    };
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
        Prompt::Clarify {
            question,
            choices,
            multi_select,
        } => {
            // One option per tap: several are typed as one answer, commas between.
            let text = if multi_select && !choices.is_empty() {
                format!("{question}\n{}", MULTI_SELECT_HINT)
            } else {
                question
            };
            (PromptKind::Clarify, text, choices, None, None)
        }
    };
    let text = match asked_by {
        Some(device) => format!("{device} asks: {text}"),
        None => text,
    };
    PromptCard {
        id,
        options: kind
            .options(&choices)
            .into_iter()
            .filter(|option| match option.id.as_str() {
                "always" => permanent,
                "session" => allow_session,
                _ => true,
            })
            .collect(),
        kind,
        text,
        session,
        timeout_seconds: timeout,
        command,
        description,
    }
}
