//! The transports' side of the conversation port: each call becomes a [`Call`] for the
//! session of the chat's device, on the hub of its platform.
//!
//! What reaches a device (replies, cards, prompts, files, actions) is also noted in the
//! console's recent events (`admin/activity.rs`), whichever backend sent it.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use herald_port::{
    ActionError, ActionSpec, Card, Chat, DeliveryError, DeviceProfile, DeviceSummary, Outbound,
    Outcome, Platform, Prompt, SendOptions,
};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::admin::activity::{Activity, EventKind};
use crate::calls::Call;
use crate::gadget::{self, GadgetHub};
use crate::mobile::{self, MobileHub};
use crate::store::{blocking, StoreError};

pub(crate) struct Router {
    gadget: Arc<GadgetHub>,
    mobile: Arc<MobileHub>,
}

impl Router {
    pub(crate) fn new(gadget: Arc<GadgetHub>, mobile: Arc<MobileHub>) -> Self {
        Router { gadget, mobile }
    }

    fn activity(&self) -> &Activity {
        &self.gadget.metrics.activity
    }

    /// Note a call's event for the console, with its error if it failed.
    fn note<T, E: std::fmt::Display>(
        &self,
        chat: &Chat,
        kind: EventKind,
        text: Option<&str>,
        result: &Result<T, E>,
    ) {
        let error = result.as_ref().err().map(ToString::to_string);
        self.activity().record(chat, kind, text, error);
    }

    /// Send `make(reply)` to the chat's session and wait for its result.
    async fn call<T>(
        &self,
        chat: &Chat,
        make: impl FnOnce(oneshot::Sender<Result<T, DeliveryError>>) -> Call,
    ) -> Result<T, DeliveryError> {
        self.deliver(chat, make).await?
    }

    /// Send `make(reply)` to the chat's session; the answer is whatever the call replies.
    async fn deliver<T>(
        &self,
        chat: &Chat,
        make: impl FnOnce(oneshot::Sender<T>) -> Call,
    ) -> Result<T, DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Port(make(reply)))
                    .await
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::Port(make(reply)))
                    .await
            }
        }
    }
}

#[async_trait]
impl Outbound for Router {
    async fn send_text(
        &self,
        chat: &Chat,
        text: &str,
        options: SendOptions,
    ) -> Result<String, DeliveryError> {
        let sent = text.to_owned();
        let result = self
            .call(chat, |reply| Call::SendText {
                text: sent,
                options,
                reply,
            })
            .await;
        let noted = result.as_deref().map_err(ToString::to_string);
        self.activity().message(chat, text, noted);
        result
    }

    async fn edit_text(
        &self,
        chat: &Chat,
        message_id: &str,
        text: &str,
        finalize: bool,
    ) -> Result<(), DeliveryError> {
        self.activity().edited(chat, message_id, text);
        let (message_id, text) = (message_id.to_owned(), text.to_owned());
        self.call(chat, |reply| Call::EditText {
            message_id,
            text,
            finalize,
            reply,
        })
        .await
    }

    async fn typing(&self, chat: &Chat, on: bool) -> Result<(), DeliveryError> {
        self.call(chat, |reply| Call::Typing { on, reply }).await
    }

    async fn status(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        self.call(chat, |reply| Call::Status { text, reply }).await
    }

    async fn transcript(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let said = text.to_owned();
        let result = self
            .call(chat, |reply| Call::Transcript { text: said, reply })
            .await;
        self.note(chat, EventKind::Transcript, Some(text), &result);
        result
    }

    async fn turn_started(&self, chat: &Chat) -> Result<String, DeliveryError> {
        self.call(chat, |reply| Call::TurnStarted { reply }).await
    }

    async fn turn_ended(
        &self,
        chat: &Chat,
        turn_id: &str,
        outcome: Outcome,
    ) -> Result<(), DeliveryError> {
        let turn = turn_id.to_owned();
        let label = format!("{outcome:?}").to_lowercase();
        let result = self
            .call(chat, |reply| Call::TurnEnded {
                turn,
                outcome,
                reply,
            })
            .await;
        self.note(chat, EventKind::TurnEnded, Some(&label), &result);
        result
    }

    async fn ask(
        &self,
        chat: &Chat,
        prompt: Prompt,
        ttl_s: Option<u32>,
    ) -> Result<String, DeliveryError> {
        let question = prompt_text(&prompt);
        let result = self
            .call(chat, |reply| Call::Ask {
                prompt,
                ttl_s,
                reply,
            })
            .await;
        self.note(chat, EventKind::Prompt, Some(&question), &result);
        result
    }

    async fn withdraw(&self, chat: &Chat, prompt_id: &str) -> Result<(), DeliveryError> {
        let prompt_id = prompt_id.to_owned();
        let result = self
            .call(chat, |reply| Call::Withdraw { prompt_id, reply })
            .await;
        self.note(chat, EventKind::Withdrawn, None, &result);
        result
    }

    async fn send_voice(&self, chat: &Chat, path: PathBuf) -> Result<(), DeliveryError> {
        let name = file_name(&path);
        let result = self.call(chat, |reply| Call::Voice { path, reply }).await;
        self.note(chat, EventKind::Voice, Some(&name), &result);
        result
    }

    async fn send_image(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        let name = caption.clone().unwrap_or_else(|| file_name(&path));
        let result = self
            .call(chat, |reply| Call::Image {
                path,
                caption,
                reply,
            })
            .await;
        self.note(chat, EventKind::Image, Some(&name), &result);
        result
    }

    async fn send_document(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        let name = caption.clone().unwrap_or_else(|| file_name(&path));
        let result = self
            .call(chat, |reply| Call::Document {
                path,
                caption,
                reply,
            })
            .await;
        self.note(chat, EventKind::Document, Some(&name), &result);
        result
    }

    async fn display(&self, chat: &Chat, card: Card) -> Result<(), DeliveryError> {
        let shown = format!("{}\n{}", card.title, card.body);
        let result = self.call(chat, |reply| Call::Display { card, reply }).await;
        self.note(chat, EventKind::Card, Some(shown.trim()), &result);
        result
    }

    async fn notice(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let notice = text.to_owned();
        let result = self
            .call(chat, |reply| Call::Notice {
                text: notice,
                reply,
            })
            .await;
        self.note(chat, EventKind::Notice, Some(text), &result);
        result
    }

    async fn invoke_action(
        &self,
        chat: &Chat,
        name: &str,
        args: Value,
    ) -> Result<Value, ActionError> {
        let called = format!("{name} {args}");
        let name = name.to_owned();
        let result = match self
            .deliver(chat, |reply| Call::InvokeAction { name, args, reply })
            .await
        {
            Ok(result) => result,
            Err(err) => Err(err.into()),
        };
        let text = match &result {
            Ok(value) => format!("{called} → {value}"),
            Err(_) => called,
        };
        self.note(chat, EventKind::Action, Some(&text), &result);
        result
    }

    async fn actions(&self, chat: &Chat) -> Result<Vec<ActionSpec>, DeliveryError> {
        self.call(chat, |reply| Call::Actions { reply }).await
    }

    async fn profile(&self, chat: &Chat) -> Result<DeviceProfile, DeliveryError> {
        self.call(chat, |reply| Call::Profile { reply }).await
    }

    async fn devices(&self) -> Result<Vec<DeviceSummary>, DeliveryError> {
        let (gadgets, phones) = (self.gadget.store.clone(), self.mobile.store.clone());
        let failed = |err: StoreError| DeliveryError::Failed(err.to_string());
        let gadgets = blocking(move || gadgets.devices()).await.map_err(failed)?;
        let phones = blocking(move || phones.phones()).await.map_err(failed)?;
        // Each connected gadget's session knows what it is; all are asked at once, and
        // one gone meanwhile is offline.
        let gadgets = gadgets.into_iter().map(|gadget| async move {
            let chat = Chat::gadget(gadget.id);
            let profile = match self.gadget.is_online(&chat.id) {
                true => self.profile(&chat).await.ok(),
                false => None,
            };
            DeviceSummary {
                online: profile.is_some(),
                chat,
                name: gadget.name,
                profile,
            }
        });
        let mut devices = futures_util::future::join_all(gadgets).await;
        devices.extend(phones.into_iter().map(|p| DeviceSummary {
            online: self.mobile.is_online(&p.id),
            chat: Chat::mobile(p.id),
            name: p.info.name,
            profile: None,
        }));
        Ok(devices)
    }

    async fn set_authorized(&self, platform: Platform, user_id: &str, authorized: bool) {
        match platform {
            Platform::Gadget => {
                self.gadget
                    .tell(user_id, gadget::Command::SetPaired(authorized))
                    .await;
            }
            // A phone's messages check the remembered answer; its connections stay.
            Platform::Mobile => self.mobile.shared.authorized.set(user_id, authorized),
        }
    }
}

/// A prompt as one line for the console.
fn prompt_text(prompt: &Prompt) -> String {
    match prompt {
        Prompt::ExecApproval { command, .. } => format!("Run {command}?"),
        Prompt::Confirm { title, text } => format!("{title}: {text}"),
        Prompt::Clarify { question, choices } => format!("{question} ({})", choices.join(", ")),
    }
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
