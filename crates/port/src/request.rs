//! The agent → device vocabulary: one [`Request`] variant per operation, and the
//! [`Response`] it answers with; and the one-way [`Notification`]s, which nothing
//! answers, so nobody waits on them.
//!
//! Both are serde-derived in the shape of Herald's Hermes bridge, `{"op": "send_text",
//! "args": {...}}` with the answer as the result object, so the bridge decodes Hermes's
//! requests straight into a `Request` and writes the `Response` back as it is. Adding an
//! operation means a variant here and its rendering in each transport's session.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ActionError, ActionSpec, Card, DeliveryError, DeviceProfile, Outcome, PcmChunk, PcmFormat,
    Prompt, SendOptions, SpeechId,
};

/// Something the agent asks of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub enum Request {
    /// A reply; answers [`Response::MessageId`], which `edit_text` refers to.
    SendText {
        text: String,
        #[serde(flatten)]
        options: SendOptions,
    },
    /// Replace the text of a streamed message; `finalize` marks the last edit.
    EditText {
        message_id: String,
        text: String,
        #[serde(default)]
        finalize: bool,
    },
    /// Put a question to the user; answers [`Response::PromptId`], and the answer
    /// arrives later as an inbound prompt answer with that id.
    Ask {
        prompt: Prompt,
        #[serde(default)]
        ttl_s: Option<u32>,
    },
    /// Withdraw a question that no longer needs an answer.
    Withdraw {
        prompt_id: String,
    },
    /// Speak an audio file (any common format) on the device.
    SendVoice {
        path: PathBuf,
    },
    /// Start speaking a reply as it is made, replacing any speech playing; writes and
    /// files for `speech_id` follow, then its end or abort. Only for a device with a
    /// speaker (phones get speech as `send_voice`).
    SpeechBegin {
        speech_id: SpeechId,
        #[serde(flatten)]
        format: PcmFormat,
    },
    /// PCM for the stream, in the format it began with; answered once the chunk fits in
    /// the stream's bounded buffer, or with [`Response::Dropped`] when `speech_id` is not
    /// the stream playing (any more).
    SpeechWrite {
        speech_id: SpeechId,
        pcm: PcmChunk,
    },
    /// A whole audio file (any format and rate) for the stream, after what is queued; it
    /// is opened before the answer. Answered like a write.
    SpeechFile {
        speech_id: SpeechId,
        path: PathBuf,
    },
    /// Nothing more comes: what is queued plays out, then the stream ends.
    SpeechEnd {
        speech_id: SpeechId,
    },
    /// Stop the stream now.
    SpeechAbort {
        speech_id: SpeechId,
    },
    SendImage {
        path: PathBuf,
        #[serde(default)]
        caption: Option<String>,
    },
    SendDocument {
        path: PathBuf,
        #[serde(default)]
        caption: Option<String>,
    },
    Display {
        card: Card,
    },
    /// A short transient line, not part of the conversation.
    Notice {
        text: String,
    },
    /// What speech-to-text heard in the user's last voice message, for a device that
    /// shows it apart from the reply.
    Transcript {
        text: String,
    },
    /// Run a device action; answers [`Response::ActionResult`] once the device has.
    InvokeAction {
        name: String,
        /// Device actions take any JSON; the device checks it.
        #[serde(default)]
        args: Value,
    },
    /// The actions a connected device offers.
    Actions {},
    /// What a connected gadget is (phones refuse).
    Profile {},
}

/// News for one device's session that needs no answer: the agent goes on at once, and
/// a device that cannot show it (offline, say) simply does not. Ids are the sender's:
/// the one who starts a turn names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub enum Notification {
    /// The agent started on a message, as turn `turn_id`; replies until the turn ends
    /// belong to it.
    TurnStarted {
        turn_id: TurnId,
    },
    /// End the turn `turn_id`; one that already ended (or was replaced) is ignored, so
    /// a late end never closes a newer turn.
    TurnEnded {
        turn_id: TurnId,
        outcome: Outcome,
    },
    Typing {
        on: bool,
    },
    /// A live working phrase ("Searching the web"); empty text clears it.
    Status {
        #[serde(default)]
        text: String,
    },
}

/// A turn's id, as its sender named it: 1 to 64 printable ASCII characters, since a
/// gadget's `turn.start` carries it to the device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TurnId(String);

impl TurnId {
    /// A fresh id (`t1`, `t2`, ...) from a counter of this process, for an agent that
    /// needs nothing more.
    pub fn next() -> TurnId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        TurnId(format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TurnId {
    type Error = String;
    fn try_from(id: String) -> Result<Self, String> {
        if (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()) {
            Ok(TurnId(id))
        } else {
            Err("a turn id is 1 to 64 printable ASCII characters".into())
        }
    }
}

impl From<TurnId> for String {
    fn from(id: TurnId) -> String {
        id.0
    }
}

/// What a request answers when it succeeds; the object the bridge hands Hermes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Response {
    MessageId {
        message_id: String,
    },
    PromptId {
        prompt_id: String,
    },
    ActionResult {
        result: Value,
    },
    Actions {
        actions: Vec<ActionSpec>,
    },
    Profile {
        profile: DeviceProfile,
    },
    /// A speech write or file for a stream that was stopped, ended or never began: it
    /// was dropped, which is no error (`{"dropped": true}`).
    Dropped {
        dropped: bool,
    },
    /// Done, with nothing to say (`{}`).
    Done {},
}

/// Why a request failed: it could not reach the device, or the device's action failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    #[error(transparent)]
    Action(ActionError),
}

impl From<ActionError> for RequestError {
    fn from(err: ActionError) -> Self {
        match err {
            ActionError::Delivery(err) => RequestError::Delivery(err),
            err => RequestError::Action(err),
        }
    }
}

impl From<RequestError> for ActionError {
    fn from(err: RequestError) -> Self {
        match err {
            RequestError::Delivery(err) => ActionError::Delivery(err),
            RequestError::Action(err) => err,
        }
    }
}

impl From<RequestError> for DeliveryError {
    /// Only an action fails with an action error; from any other request it would be a
    /// transport's mistake, reported as a failure.
    fn from(err: RequestError) -> Self {
        match err {
            RequestError::Delivery(err) => err,
            RequestError::Action(err) => DeliveryError::Failed(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(op: &str, args: Value) -> Request {
        serde_json::from_value(json!({"op": op, "args": args})).unwrap()
    }

    #[test]
    fn requests_read_the_bridge_shape_and_ignore_what_is_not_theirs() {
        let sent = decode(
            "send_text",
            json!({"chat": {"platform": "gadget", "id": "hg-1"}, "text": "hi", "streaming": true}),
        );
        assert_eq!(
            sent,
            Request::SendText {
                text: "hi".into(),
                options: SendOptions {
                    streaming: true,
                    ..Default::default()
                }
            }
        );
        let started = json!({"op": "turn_started", "args": {"chat": "x", "turn_id": "t-1"}});
        let Ok(Notification::TurnStarted { turn_id }) = serde_json::from_value(started) else {
            panic!("not a turn start")
        };
        assert_eq!(turn_id.as_str(), "t-1");
        for turn_id in [json!(""), json!("a b"), json!("x".repeat(65)), json!(7)] {
            let bad = json!({"op": "turn_started", "args": {"turn_id": turn_id}});
            assert!(
                serde_json::from_value::<Notification>(bad).is_err(),
                "{turn_id}"
            );
        }
        let asked = json!({"op": "typing", "args": {"on": true}});
        assert!(
            serde_json::from_value::<Request>(asked).is_err(),
            "typing is news"
        );
        let Request::Ask { prompt, ttl_s } = decode(
            "ask",
            json!({"prompt": {"kind": "exec_approval", "command": "rm -rf /tmp/x"}}),
        ) else {
            panic!("not an ask")
        };
        assert_eq!(ttl_s, None);
        assert_eq!(
            prompt,
            Prompt::ExecApproval {
                command: "rm -rf /tmp/x".into(),
                description: String::new(),
                allow_permanent: true,
                allow_session: true,
            }
        );
        for (op, args) in [("send_text", json!({})), ("fly", json!({}))] {
            let wrong = serde_json::from_value::<Request>(json!({"op": op, "args": args}));
            assert!(wrong.is_err(), "{op}");
        }
    }

    #[test]
    fn every_request_goes_back_to_the_wire_under_its_op() {
        let requests = [
            ("profile", json!({})),
            ("invoke_action", json!({"name": "led", "args": null})),
            (
                "display",
                json!({"card": {"title": "T", "body": "", "ttl_s": null}}),
            ),
        ];
        for (op, args) in requests {
            let wire = serde_json::to_value(decode(op, args.clone())).unwrap();
            assert_eq!(wire, json!({"op": op, "args": args}));
        }
    }

    #[test]
    fn speech_requests_are_checked_as_they_are_read() {
        let begin = decode(
            "speech_begin",
            json!({"chat": "x", "speech_id": "s1", "sample_rate": 24000, "channels": 2}),
        );
        let Request::SpeechBegin { speech_id, format } = &begin else {
            panic!("{begin:?}")
        };
        assert_eq!(speech_id.as_str(), "s1");
        assert_eq!((format.sample_rate, format.channels), (24_000, 2));
        let write = decode("speech_write", json!({"speech_id": "s1", "pcm": "AAEC"}));
        assert!(matches!(write, Request::SpeechWrite { pcm, .. } if pcm.0 == [0, 1, 2]));
        let long_id = "x".repeat(65);
        let oversized = "A".repeat((crate::MAX_SPEECH_CHUNK + 3) / 3 * 4 + 4);
        for (op, args) in [
            (
                "speech_begin",
                json!({"speech_id": "s", "sample_rate": 7999, "channels": 1}),
            ),
            (
                "speech_begin",
                json!({"speech_id": "s", "sample_rate": 48001, "channels": 1}),
            ),
            (
                "speech_begin",
                json!({"speech_id": "s", "sample_rate": 16000, "channels": 3}),
            ),
            (
                "speech_begin",
                json!({"speech_id": "", "sample_rate": 16000, "channels": 1}),
            ),
            ("speech_end", json!({"speech_id": long_id})),
            (
                "speech_write",
                json!({"speech_id": "s", "pcm": "not base64!"}),
            ),
            ("speech_write", json!({"speech_id": "s", "pcm": oversized})),
        ] {
            let wrong = serde_json::from_value::<Request>(json!({"op": op, "args": args}));
            assert!(wrong.is_err(), "{op} {args}");
        }
        let dropped = Response::Dropped { dropped: true };
        assert_eq!(
            serde_json::to_value(dropped).unwrap(),
            json!({"dropped": true})
        );
    }

    #[test]
    fn responses_are_the_objects_hermes_reads() {
        let id = Response::MessageId {
            message_id: "m1".into(),
        };
        assert_eq!(
            serde_json::to_value(id).unwrap(),
            json!({"message_id": "m1"})
        );
        assert_eq!(serde_json::to_value(Response::Done {}).unwrap(), json!({}));
        let result = Response::ActionResult {
            result: json!({"on": true}),
        };
        assert_eq!(
            serde_json::to_value(result).unwrap(),
            json!({"result": {"on": true}})
        );
    }

    #[test]
    fn errors_keep_their_kind_both_ways() {
        let offline = DeliveryError::Failed("gone".into());
        let request: RequestError = ActionError::Delivery(offline.clone()).into();
        assert_eq!(request, RequestError::Delivery(offline));
        assert_eq!(
            ActionError::from(RequestError::Action(ActionError::Timeout)),
            ActionError::Timeout
        );
    }
}
