//! The transports' side of the conversation port: routes each call to the hub of the
//! chat's platform, which hands it to the device's session.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use herald_mobile_proto::MediaKindDown;
use herald_port::{
    ActionError, ActionSpec, Card, Chat, DeliveryError, DeviceSummary, Outbound, Outcome, Platform,
    Prompt, SendOptions,
};
use serde_json::Value;

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

    async fn send_media(
        &self,
        chat: &Chat,
        kind: MediaKindDown,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        self.mobile
            .call(&chat.id, |reply| mobile::Command::SendMedia {
                kind,
                path,
                caption,
                reply,
            })
            .await?
    }
}

fn unsupported(chat: &Chat, reason: &str) -> DeliveryError {
    DeliveryError::Unsupported {
        chat: chat.clone(),
        reason: reason.into(),
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
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::SendText {
                        text,
                        options,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::SendText {
                        text,
                        options,
                        reply,
                    })
                    .await?
            }
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
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::EditText {
                        message_id,
                        text,
                        finalize,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::EditText {
                        message_id,
                        text,
                        finalize,
                        reply,
                    })
                    .await?
            }
        }
    }

    async fn typing(&self, chat: &Chat, on: bool) -> Result<(), DeliveryError> {
        match chat.platform {
            // Gadgets show "thinking" from turn.start; they have no typing indicator.
            Platform::Gadget => Ok(()),
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::Typing { on, reply })
                    .await?
            }
        }
    }

    async fn status(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        let text = text.to_owned();
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Status { text, reply })
                    .await?
            }
            // Phones show typing and the avatar instead of a working phrase.
            Platform::Mobile => Ok(()),
        }
    }

    async fn turn_started(&self, chat: &Chat) -> Result<String, DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::TurnStarted { reply })
                    .await?
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::TurnStarted { reply })
                    .await?
            }
        }
    }

    async fn turn_ended(
        &self,
        chat: &Chat,
        turn_id: &str,
        outcome: Outcome,
    ) -> Result<(), DeliveryError> {
        let turn = turn_id.to_owned();
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::TurnEnded {
                        turn,
                        outcome,
                        reply,
                    })
                    .await?
            }
            // A phone's typing and avatar end the same way whatever the outcome.
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::TurnEnded { turn, reply })
                    .await?
            }
        }
    }

    async fn ask(
        &self,
        chat: &Chat,
        prompt: Prompt,
        ttl_s: Option<u32>,
    ) -> Result<String, DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Ask {
                        prompt,
                        ttl_s,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::Ask {
                        prompt,
                        ttl_s,
                        reply,
                    })
                    .await?
            }
        }
    }

    async fn withdraw(&self, chat: &Chat, prompt_id: &str) -> Result<(), DeliveryError> {
        let prompt_id = prompt_id.to_owned();
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Withdraw {
                        prompt_id,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| mobile::Command::Withdraw {
                        prompt_id,
                        reply,
                    })
                    .await?
            }
        }
    }

    async fn send_voice(&self, chat: &Chat, path: PathBuf) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Speak { path, reply })
                    .await?
            }
            Platform::Mobile => {
                self.send_media(chat, MediaKindDown::Voice, path, None)
                    .await
            }
        }
    }

    async fn send_image(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::ShowImage {
                        path,
                        caption,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => {
                self.send_media(chat, MediaKindDown::Image, path, caption)
                    .await
            }
        }
    }

    async fn send_document(
        &self,
        chat: &Chat,
        path: PathBuf,
        caption: Option<String>,
    ) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => Err(unsupported(chat, "gadgets cannot show documents")),
            Platform::Mobile => {
                self.send_media(chat, MediaKindDown::Document, path, caption)
                    .await
            }
        }
    }

    async fn display(&self, chat: &Chat, card: Card) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Display { card, reply })
                    .await?
            }
            Platform::Mobile => {
                let text = format!("{}\n{}", card.title, card.body);
                self.send_text(chat, text.trim(), SendOptions::default())
                    .await
                    .map(drop)
            }
        }
    }

    async fn transcript(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                let text = text.to_owned();
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Transcript {
                        text,
                        reply,
                    })
                    .await?
            }
            // A phone shows its own voice message; the transcript adds nothing there.
            Platform::Mobile => Ok(()),
        }
    }

    async fn notice(&self, chat: &Chat, text: &str) -> Result<(), DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                let text = text.to_owned();
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Notice { text, reply })
                    .await?
            }
            Platform::Mobile => self
                .send_text(chat, text, SendOptions::default())
                .await
                .map(drop),
        }
    }

    async fn invoke_action(
        &self,
        chat: &Chat,
        name: &str,
        args: Value,
    ) -> Result<Value, ActionError> {
        match chat.platform {
            Platform::Gadget => {
                let name = name.to_owned();
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::InvokeAction {
                        name,
                        args,
                        reply,
                    })
                    .await?
            }
            Platform::Mobile => Err(ActionError::UnknownAction(name.to_owned())),
        }
    }

    async fn actions(&self, chat: &Chat) -> Result<Vec<ActionSpec>, DeliveryError> {
        match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| gadget::Command::Actions { reply })
                    .await?
            }
            Platform::Mobile => Ok(Vec::new()),
        }
    }

    async fn devices(&self) -> Result<Vec<DeviceSummary>, DeliveryError> {
        let (gadgets, phones) = (self.gadget.store.clone(), self.mobile.store.clone());
        let failed = |err: StoreError| DeliveryError::Failed(err.to_string());
        let gadgets = blocking(move || gadgets.devices()).await.map_err(failed)?;
        let phones = blocking(move || phones.phones()).await.map_err(failed)?;
        let gadgets = gadgets.into_iter().map(|d| DeviceSummary {
            online: self.gadget.is_online(&d.id),
            chat: Chat::gadget(d.id),
            name: d.name,
        });
        let phones = phones.into_iter().map(|p| DeviceSummary {
            online: self.mobile.is_online(&p.id),
            chat: Chat::mobile(p.id),
            name: p.info.name,
        });
        Ok(gadgets.chain(phones).collect())
    }

    async fn set_authorized(&self, platform: Platform, user_id: &str, authorized: bool) {
        match platform {
            Platform::Gadget => {
                self.gadget
                    .tell(user_id, gadget::Command::SetPaired(authorized))
                    .await;
            }
            // Phones are authorized message by message; nothing to push.
            Platform::Mobile => {}
        }
    }
}
