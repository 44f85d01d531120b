//! Phone → agent: how the phone core takes each frame.
//!
//! Text, voice, finished uploads and card answers go to the agent once the user is
//! known to be allowed (see `Core::for_agent`); each id counts once. Voice and uploads
//! are checked here and written by the shell only after that, so an unauthorized
//! user's bytes never reach the disk.

use std::path::PathBuf;

use herald_mobile_proto::{self as proto, limits, ClientFrame, ErrorCode, ServerFrame};
use std::time::Instant;

use herald_port::{InboundBody, MediaKind, PromptAnswer};

use super::core::{Core, Effect, Held, SaveFile, Saved};
use super::link::{Delivered, Delivers};
use super::media::choice_of;
use super::push;
use super::uploads::{Accepted, Upload, UploadError};
use crate::io::{Close, Failed};
use crate::SessionCore;

impl Core {
    pub fn handle_frame(&mut self, frame: ClientFrame, now: Instant) {
        match frame {
            ClientFrame::Text(text) => {
                if !self.seen.insert(&text.id, now) {
                    return;
                }
                let body = InboundBody::Text {
                    text: text.text,
                    reply_to: text.reply_to,
                };
                let work = Held::Forward {
                    message_id: text.id,
                    body,
                };
                self.for_agent(work);
            }
            ClientFrame::Audio(audio) => {
                if !self.seen.contains(&audio.id) {
                    self.for_agent(Held::Voice(Box::new(audio)));
                }
            }
            ClientFrame::Media(media) => {
                if self.seen.contains(&media.id) {
                    return;
                }
                let accepted = self.uploads.accept(media);
                self.on_upload(accepted);
            }
            ClientFrame::Prompt(answer) => {
                self.on_answer(answer);
                self.agent_heard_from(now);
            }
            ClientFrame::Ping => {
                let _ = self.emit(&ServerFrame::Pong);
            }
            ClientFrame::Hello(_) => self.error(ErrorCode::BadFrame, "hello was already accepted"),
            ClientFrame::PushSubscribe(sub) => match push::check(&sub, self.private_push) {
                Ok(sub) => self.for_agent(Held::Subscribe(Box::new(sub))),
                Err(why) => self.error(ErrorCode::BadFrame, format!("push_subscribe: {why}")),
            },
            ClientFrame::PushUnsubscribe => self.effect(Effect::RemovePush),
            ClientFrame::Visibility(visibility) => {
                if self.visible != visibility.visible {
                    self.visible = visibility.visible;
                    self.effect(Effect::Visible(visibility.visible));
                }
            }
            ClientFrame::Deliver(deliver) => {
                let owner = match &self.delivers {
                    Delivers::Anywhere => None,
                    Delivers::ToDevicesOf(user) => Some(user.clone()),
                    Delivers::Nowhere => {
                        let message = "deliver needs a deliver token (MOBILE_DELIVER_TOKENS)";
                        return self.error(ErrorCode::Forbidden, message);
                    }
                };
                let Some(conn) = self.conn else { return };
                // The shell reads no frame while a push is out (`reads_frames`); one
                // that comes anyway is refused, so pushes never pile up (up to 16 MiB
                // each) behind a slow device.
                if self.pushing {
                    let message = "one push at a time; send the next when this one is answered";
                    return self.error(ErrorCode::RateLimited, message);
                }
                self.pushing = true;
                let deliver = Box::new(deliver);
                self.effect(Effect::Deliver {
                    conn,
                    deliver,
                    owner,
                });
            }
        }
    }

    /// A read that is no frame the phone may send: it hears `code` and `message`, and
    /// with `close`, the connection ends.
    pub fn handle_bad_frame(&mut self, code: ErrorCode, message: String, close: Option<Close>) {
        self.error(code, message);
        if let Some(close) = close {
            self.close(close, code.as_str());
        }
    }

    /// How the `deliver` to `to` that connection `conn` sent ended: it hears why, if
    /// it failed and is still connected.
    pub fn handle_delivered(&mut self, conn: u64, to: &str, delivered: Delivered) {
        self.pushing = false;
        if let Some((code, message)) = delivered.refusal(to) {
            self.error_to(conn, code, message);
        }
    }

    /// The hub's answer to [`Effect::ReserveUpload`].
    pub fn handle_upload_budget(&mut self, granted: Result<(), UploadError>) {
        let accepted = self.uploads.budget_answer(granted);
        self.on_upload(accepted);
    }

    fn on_upload(&mut self, accepted: Result<Accepted, UploadError>) {
        match accepted {
            Ok(Accepted::Complete(upload)) => self.for_agent(Held::Upload(Box::new(upload))),
            Ok(Accepted::NeedsBudget { bytes }) => {
                let user = self.user_id.clone();
                self.effect(Effect::ReserveUpload { user, bytes });
            }
            Ok(Accepted::Partial | Accepted::Duplicate) => {}
            Err(UploadError::TooBig(message)) => self.error(ErrorCode::TooBig, message),
            Err(UploadError::BadFrame(message)) => self.error(ErrorCode::BadFrame, message),
        }
        self.release_uploads();
    }

    /// Work the user may send on: text goes to the agent, files to the shell to save.
    pub(super) fn admit(&mut self, work: Held, now: Instant) {
        match work {
            Held::Forward { message_id, body } => self.hand_over(message_id, body),
            Held::Voice(audio) => match voice(&audio) {
                Ok(save) => self.effect(Effect::SaveFile(Box::new(save))),
                Err((code, message)) => self.error(code, message),
            },
            Held::Upload(upload) => {
                // Not marked seen when refused: sent again after pairing, it counts.
                self.seen.insert(&upload.id, now);
                self.effect(Effect::SaveFile(Box::new(upload_file(*upload))));
            }
            Held::Subscribe(sub) => self.effect(Effect::SavePush(sub)),
        }
    }

    /// Where the shell wrote a file, or why it could not.
    pub fn handle_file_saved(
        &mut self,
        message_id: String,
        saved: Saved,
        path: Result<PathBuf, Failed>,
        now: Instant,
    ) {
        let Ok(path) = path else {
            self.error(ErrorCode::Internal, "the server could not save the file");
            return;
        };
        let body = match saved {
            Saved::Voice {
                duration_ms,
                transcript,
            } => {
                self.seen.insert(&message_id, now);
                self.voice_taken(now);
                InboundBody::Voice {
                    path,
                    duration_ms,
                    transcript,
                }
            }
            Saved::Media {
                kind,
                mime,
                caption,
            } => InboundBody::Media {
                path,
                kind,
                mime,
                caption,
            },
        };
        self.hand_over(message_id, body);
    }

    fn on_answer(&mut self, answer: proto::PromptAnswer) {
        let Some(open) = self.cards.get(&answer.prompt_id) else {
            let prompt_id = answer.prompt_id;
            return self.effect(Effect::WhoseCard { prompt_id });
        };
        let resolution = open.card.resolve(&answer);
        let option_id = resolution.option_id.to_owned();
        let choice = choice_of(open.card.kind, &option_id, resolution.response);
        self.cards.remove(&answer.prompt_id);
        self.effect(Effect::CardClosed {
            prompt_id: answer.prompt_id.clone(),
        });
        let done = ServerFrame::PromptDone {
            prompt_id: answer.prompt_id.clone(),
            option_id: Some(option_id),
            expired: false,
        };
        let _ = self.emit(&done);
        let body = InboundBody::PromptAnswer(PromptAnswer {
            prompt_id: answer.prompt_id,
            choice,
        });
        // An answer is never a chat message, but it still needs an authorized user.
        let work = Held::Forward {
            message_id: self.ids.hex(12),
            body,
        };
        self.for_agent(work);
    }

    /// The hub's answer to [`Effect::WhoseCard`]: the device the card was shown to, if
    /// it is still open anywhere.
    pub fn handle_card_owner(&mut self, prompt_id: String, owner: Option<String>) {
        match owner {
            Some(owner) if owner != self.device_id => {
                self.error(
                    ErrorCode::Forbidden,
                    "that card was shown to another device",
                );
            }
            _ => {
                let _ = self.emit(&ServerFrame::PromptDone {
                    prompt_id,
                    option_id: None,
                    expired: true,
                });
            }
        }
    }
}

/// A voice message checked (a WAV within the limit) and ready to save.
fn voice(audio: &proto::Audio) -> Result<SaveFile, (ErrorCode, String)> {
    if !audio.format.eq_ignore_ascii_case("wav") {
        return Err((
            ErrorCode::BadFrame,
            format!("audio format {:?} is not supported; send wav", audio.format),
        ));
    }
    if proto::base64_decoded_len(&audio.data) > limits::MAX_MEDIA_BYTES {
        return Err((
            ErrorCode::TooBig,
            "voice messages are limited to 8 MiB".into(),
        ));
    }
    let bytes = audio
        .bytes()
        .map_err(|e| (ErrorCode::BadFrame, e.to_string()))?;
    let duration = herald_media::wav::inspect(&bytes)
        .map(|info| info.duration)
        .map_err(|e| (ErrorCode::BadFrame, e.to_string()))?;
    Ok(SaveFile {
        message_id: audio.id.clone(),
        extension: "wav".into(),
        parts: vec![bytes],
        saved: Saved::Voice {
            duration_ms: u32::try_from(duration.as_millis()).unwrap_or(u32::MAX),
            transcript: audio.text.clone(),
        },
    })
}

/// A finished upload as a file to save; its name is of our own making, with the
/// extension of the phone's file name when that is a plain one.
fn upload_file(upload: Upload) -> SaveFile {
    let extension = upload
        .filename
        .as_deref()
        .and_then(|f| f.rsplit_once('.'))
        .map(|(_, ext)| ext)
        .filter(|ext| ext.len() <= 8 && ext.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("bin")
        .to_owned();
    let kind = match upload.kind {
        proto::MediaKind::Image => MediaKind::Image,
        proto::MediaKind::Video => MediaKind::Video,
        proto::MediaKind::Document => MediaKind::Document,
        proto::MediaKind::Audio => MediaKind::Audio,
    };
    SaveFile {
        message_id: upload.id,
        extension,
        parts: upload.parts,
        saved: Saved::Media {
            kind,
            mime: upload.mime,
            caption: upload.caption,
        },
    }
}
