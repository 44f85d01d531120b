//! The transports' side of the conversation port: routes each call to the platform
//! that serves the chat.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use herald_port::{
    ActionError, ActionSpec, Card, Chat, DeliveryError, Outbound, Outcome, Platform, Prompt,
    SendOptions,
};
use serde_json::Value;

use crate::gadget::{Command, GadgetHub};

pub(crate) struct Router {
    gadget: Arc<GadgetHub>,
}

impl Router {
    pub(crate) fn new(gadget: Arc<GadgetHub>) -> Self {
        Router { gadget }
    }

    fn gadget(&self, chat: &Chat) -> Result<&GadgetHub, DeliveryError> {
        match chat.platform {
            Platform::Gadget => Ok(&self.gadget),
            Platform::Mobile => Err(DeliveryError::UnknownChat(chat.clone())),
        }
    }

    fn unsupported(chat: &Chat, reason: &str) -> DeliveryError {
        DeliveryError::Unsupported {
            chat: chat.clone(),
            reason: reason.into(),
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
        let text = text.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::SendText {
                text,
                options,
                reply,
            })
            .await?
    }

    async fn edit_text(
        &self,
        chat: &Chat,
        message_id: &str,
        text: &str,
        finalize: bool,
    ) -> Result<(), DeliveryError> {
        let (message_id, text) = (message_id.to_owned(), text.to_owned());
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::EditText {
                message_id,
                text,
                finalize,
                reply,
            })
            .await?
    }

    async fn typing(&self, chat: &Chat, _on: bool) -> Result<(), DeliveryError> {
        // Gadgets show "thinking" from turn.start; they have no typing indicator.
        self.gadget(chat).map(|_| ())
    }

    async fn status(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Status { text, reply })
            .await?
    }

    async fn turn_started(&self, chat: &Chat) -> Result<String, DeliveryError> {
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::TurnStarted { reply })
            .await?
    }

    async fn turn_ended(
        &self,
        chat: &Chat,
        turn_id: &str,
        outcome: Outcome,
    ) -> Result<(), DeliveryError> {
        let turn = turn_id.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::TurnEnded {
                turn,
                outcome,
                reply,
            })
            .await?
    }

    async fn ask(
        &self,
        chat: &Chat,
        prompt: Prompt,
        ttl_s: Option<u32>,
    ) -> Result<String, DeliveryError> {
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Ask {
                prompt,
                ttl_s,
                reply,
            })
            .await?
    }

    async fn withdraw(&self, chat: &Chat, prompt_id: &str) -> Result<(), DeliveryError> {
        let prompt_id = prompt_id.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Withdraw { prompt_id, reply })
            .await?
    }

    async fn send_voice(&self, chat: &Chat, _path: PathBuf) -> Result<(), DeliveryError> {
        self.gadget(chat)?;
        Err(Self::unsupported(
            chat,
            "speech output is not available yet",
        ))
    }

    async fn send_image(
        &self,
        chat: &Chat,
        _path: PathBuf,
        _caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        self.gadget(chat)?;
        Err(Self::unsupported(chat, "images are not available yet"))
    }

    async fn send_document(
        &self,
        chat: &Chat,
        _path: PathBuf,
        _caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        self.gadget(chat)?;
        Err(Self::unsupported(chat, "gadgets cannot show documents"))
    }

    async fn display(&self, chat: &Chat, card: Card) -> Result<(), DeliveryError> {
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Display { card, reply })
            .await?
    }

    async fn notice(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Notice { text, reply })
            .await?
    }

    async fn invoke_action(
        &self,
        chat: &Chat,
        name: &str,
        args: Value,
    ) -> Result<Value, ActionError> {
        let name = name.to_owned();
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::InvokeAction {
                name,
                args,
                reply,
            })
            .await?
    }

    async fn actions(&self, chat: &Chat) -> Result<Vec<ActionSpec>, DeliveryError> {
        self.gadget(chat)?
            .call(&chat.id, |reply| Command::Actions { reply })
            .await?
    }

    async fn set_authorized(&self, platform: Platform, user_id: &str, authorized: bool) {
        if platform == Platform::Gadget {
            self.gadget
                .tell(user_id, Command::SetPaired(authorized))
                .await;
        }
    }
}
