//! The agent's side of the port: [`Outbound`], which the transports implement.
//!
//! A transport implements four methods: [`Outbound::request`], which carries any
//! [`Request`] to the device of a chat and waits for its answer, [`Outbound::notify`],
//! which hands a [`Notification`] on without waiting, plus the two that are not about
//! one device. The typed methods (`send_text`, `ask`, ...) are written once here over
//! those, for backends that prefer them.

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    ActionError, ActionSpec, Card, Chat, DeliveryError, DeviceProfile, DeviceSummary, Notification,
    Outcome, Platform, Prompt, Request, RequestError, Response, SendOptions, TurnId,
};

/// Everything a backend can do to a conversation. Every call names its [`Chat`], so one
/// value serves all devices of all platforms.
#[async_trait]
pub trait Outbound: Send + Sync {
    /// Carry out `request` on the device of `chat`.
    async fn request(&self, chat: &Chat, request: Request) -> Result<Response, RequestError>;

    /// Hand `notification` to the session of `chat`'s device, without waiting for the
    /// device (only for room in its mailbox).
    async fn notify(&self, chat: &Chat, notification: Notification);

    /// Every device the transports know, online or not.
    async fn devices(&self) -> Result<Vec<DeviceSummary>, DeliveryError>;

    /// Authorization of `user_id` changed (a pairing was approved or revoked): connected
    /// devices learn it at once, without reconnecting.
    async fn set_authorized(&self, platform: Platform, user_id: &str, authorized: bool);

    /// Send a reply; returns its message id, which [`Outbound::edit_text`] refers to.
    async fn send_text(
        &self,
        chat: &Chat,
        text: &str,
        options: SendOptions,
    ) -> Result<String, DeliveryError> {
        let text = text.to_owned();
        match self
            .request(chat, Request::SendText { text, options })
            .await?
        {
            Response::MessageId { message_id } => Ok(message_id),
            other => Err(unexpected(other)),
        }
    }

    async fn edit_text(
        &self,
        chat: &Chat,
        message_id: &str,
        text: &str,
        finalize: bool,
    ) -> Result<(), DeliveryError> {
        let (message_id, text) = (message_id.to_owned(), text.to_owned());
        let edit = Request::EditText {
            message_id,
            text,
            finalize,
        };
        done(self.request(chat, edit).await)
    }

    async fn typing(&self, chat: &Chat, on: bool) {
        self.notify(chat, Notification::Typing { on }).await;
    }

    async fn status(&self, chat: &Chat, text: &str) {
        let text = text.to_owned();
        self.notify(chat, Notification::Status { text }).await;
    }

    /// The agent started turn `turn_id` (its own name for it).
    async fn turn_started(&self, chat: &Chat, turn_id: TurnId) {
        self.notify(chat, Notification::TurnStarted { turn_id })
            .await;
    }

    async fn turn_ended(&self, chat: &Chat, turn_id: TurnId, outcome: Outcome) {
        self.notify(chat, Notification::TurnEnded { turn_id, outcome })
            .await;
    }

    /// Returns the question's id; the answer arrives as an inbound prompt answer.
    async fn ask(
        &self,
        chat: &Chat,
        prompt: Prompt,
        ttl_s: Option<u32>,
    ) -> Result<String, DeliveryError> {
        match self.request(chat, Request::Ask { prompt, ttl_s }).await? {
            Response::PromptId { prompt_id } => Ok(prompt_id),
            other => Err(unexpected(other)),
        }
    }

    async fn withdraw(&self, chat: &Chat, prompt_id: &str) -> Result<(), DeliveryError> {
        let prompt_id = prompt_id.to_owned();
        done(self.request(chat, Request::Withdraw { prompt_id }).await)
    }

    async fn send_voice(&self, chat: &Chat, path: PathBuf) -> Result<(), DeliveryError> {
        done(self.request(chat, Request::SendVoice { path }).await)
    }

    async fn send_image(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        done(
            self.request(chat, Request::SendImage { path, caption })
                .await,
        )
    }

    async fn send_document(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        done(
            self.request(chat, Request::SendDocument { path, caption })
                .await,
        )
    }

    async fn display(&self, chat: &Chat, card: Card) -> Result<(), DeliveryError> {
        done(self.request(chat, Request::Display { card }).await)
    }

    async fn transcript(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        done(self.request(chat, Request::Transcript { text }).await)
    }

    async fn notice(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        done(self.request(chat, Request::Notice { text }).await)
    }

    /// Run a device action and wait for its result.
    async fn invoke_action(
        &self,
        chat: &Chat,
        name: &str,
        args: Value,
    ) -> Result<Value, ActionError> {
        let name = name.to_owned();
        match self
            .request(chat, Request::InvokeAction { name, args })
            .await?
        {
            Response::ActionResult { result } => Ok(result),
            other => Err(unexpected(other).into()),
        }
    }

    async fn actions(&self, chat: &Chat) -> Result<Vec<ActionSpec>, DeliveryError> {
        match self.request(chat, Request::Actions {}).await? {
            Response::Actions { actions } => Ok(actions),
            other => Err(unexpected(other)),
        }
    }

    async fn profile(&self, chat: &Chat) -> Result<DeviceProfile, DeliveryError> {
        match self.request(chat, Request::Profile {}).await? {
            Response::Profile { profile } => Ok(profile),
            other => Err(unexpected(other)),
        }
    }
}

fn done(result: Result<Response, RequestError>) -> Result<(), DeliveryError> {
    result.map(drop).map_err(DeliveryError::from)
}

/// A transport answered with the response of another request: its bug, not the agent's.
fn unexpected(response: Response) -> DeliveryError {
    DeliveryError::Failed(format!("the transport answered {response:?}"))
}
