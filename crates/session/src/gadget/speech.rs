//! The turn's speech, on the core's side: which stream the device hears, whose it is
//! (a whole file, or the agent's `speech_id` for a reply spoken as it is made), and
//! what stops it. Barge-in, abort, "already spoken" and the `turn.end` held back until
//! the speech is over all live here; the shell's `Playback` carries out the wire side.

use std::path::PathBuf;

use herald_port::{InboundBody, Request, RequestError, Response, SpeechId, SpeechStopReason};

use super::core::{Core, Effect};
use crate::CallId;

/// The speech the device hears.
pub(super) struct Speaking {
    pub stream: u8,
    /// The agent's id for a streamed reply; `None` for a whole file.
    pub speech_id: Option<SpeechId>,
}

/// What a speech write brings.
#[derive(Debug)]
pub enum SpeechChunk {
    /// PCM in the stream's format.
    Pcm(Vec<u8>),
    /// A whole audio file, to open and queue.
    File(PathBuf),
}

impl Core {
    /// A `speech_*` request: the ones for a stream that is not playing any more are
    /// dropped quietly, as the agent may still be writing when it was stopped.
    pub(super) fn speech_request(&mut self, request: Request, call: CallId) {
        let answer = match request {
            Request::SpeechBegin { speech_id, format } => match self.speaker() {
                Ok(rate) => {
                    let stream = self.take_speaker(Some(speech_id));
                    let turn = self.turn.clone();
                    self.effect(Effect::BeginSpeech {
                        stream,
                        rate,
                        format,
                        turn,
                    });
                    Ok(Response::Done {})
                }
                Err(err) => Err(err.into()),
            },
            Request::SpeechWrite { speech_id, pcm } => {
                return self.feed_speech(&speech_id, SpeechChunk::Pcm(pcm.0), call);
            }
            Request::SpeechFile { speech_id, path } => {
                return self.feed_speech(&speech_id, SpeechChunk::File(path), call);
            }
            Request::SpeechEnd { speech_id } => {
                if let Some(stream) = self.speaking_stream(&speech_id) {
                    self.effect(Effect::EndSpeech { stream });
                }
                Ok(Response::Done {})
            }
            Request::SpeechAbort { speech_id } => {
                if self.speaking_stream(&speech_id).is_some() {
                    self.stop_speech();
                }
                Ok(Response::Done {})
            }
            other => Err(RequestError::Delivery(herald_port::DeliveryError::Failed(
                format!("not a speech request: {other:?}"),
            ))),
        };
        self.answer(call, answer);
    }

    fn feed_speech(&mut self, speech_id: &SpeechId, input: SpeechChunk, call: CallId) {
        match self.speaking_stream(speech_id) {
            Some(stream) => self.effect(Effect::FeedSpeech {
                stream,
                input,
                call,
            }),
            None => self.answer(call, Ok(Response::Dropped { dropped: true })),
        }
    }

    /// The stream of `speech_id`, while it is the speech the device hears.
    fn speaking_stream(&self, speech_id: &SpeechId) -> Option<u8> {
        self.speaking
            .as_ref()
            .filter(|s| s.speech_id.as_ref() == Some(speech_id))
            .map(|s| s.stream)
    }

    /// The speech file opened: stop what plays and take a stream for the new speech.
    /// Returns its stream and turn, or `None` when the device went away meanwhile.
    pub fn start_speech(&mut self) -> Option<(u8, Option<String>)> {
        self.conn.as_ref()?;
        let stream = self.take_speaker(None);
        Some((stream, self.turn.clone()))
    }

    /// New speech replaces what plays (the agent's own doing: no interruption to report).
    fn take_speaker(&mut self, speech_id: Option<SpeechId>) -> u8 {
        self.stop_speech();
        let stream = self.stream_id();
        self.speaking = Some(Box::new(Speaking { stream, speech_id }));
        stream
    }

    /// Speech stream `stream` played to its end (or failed).
    pub fn handle_speech_done(&mut self, stream: u8) {
        if self.speaking.as_ref().is_some_and(|s| s.stream == stream) {
            self.speaking = None;
            self.send_deferred_end();
        }
    }

    /// A stop asked for by [`Effect::StopSpeech`] is done: the `audio.abort` is out, so
    /// a `turn.end` held back for the speech may follow it.
    pub fn handle_speech_stopped(&mut self) {
        if self.speaking.is_none() {
            self.send_deferred_end();
        }
    }

    /// Stop the speech at once; the device hears `audio.abort` from the shell.
    pub(super) fn stop_speech(&mut self) -> Option<Speaking> {
        let speaking = self.speaking.take()?;
        self.effect(Effect::StopSpeech {
            stream: speaking.stream,
        });
        Some(*speaking)
    }

    /// The user spoke over the speech, cancelled, or started anew: stop it, and tell the
    /// agent when it was streaming the reply, so it stops writing.
    pub(super) fn interrupt_speech(&mut self) {
        let Some(Speaking {
            speech_id: Some(speech_id),
            ..
        }) = self.stop_speech()
        else {
            return;
        };
        let body = InboundBody::SpeechStopped {
            speech_id,
            reason: SpeechStopReason::Interrupted,
        };
        let id = self.ids.hex(12);
        self.forward(id, body);
    }

    pub(super) fn send_deferred_end(&mut self) {
        if let Some(end) = self.deferred_end.take() {
            self.send(*end);
        }
    }
}
