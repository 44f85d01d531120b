//! The transports' side of the conversation port: each [`Request`] goes, as a [`Call`],
//! to the session of the chat's device, on the hub of its platform.
//!
//! What reaches a device (replies, cards, prompts, files, actions) is also noted in the
//! console's recent events (`activity.rs`), whichever backend sent it.

use std::sync::Arc;

use async_trait::async_trait;
use herald_port::{
    Chat, DeliveryError, DeviceSummary, Notification, Outbound, Platform, Prompt, Request,
    RequestError, Response,
};

use crate::activity::{Activity, EventKind};
use crate::calls::Call;
use crate::gadget::{self, GadgetHub};
use crate::hub::Shared;
use crate::mobile::{self, MobileHub};
use herald_questions::Question;
use herald_session::mobile::card_for;
use herald_session::mobile::push::question_note;
use herald_store::{PhoneRecord, StoreError};

pub(crate) struct Router {
    shared: Arc<Shared>,
    gadget: Arc<GadgetHub>,
    mobile: Arc<MobileHub>,
    sharing: Sharing,
}

impl Router {
    pub(crate) fn new(shared: Arc<Shared>, gadget: Arc<GadgetHub>, mobile: Arc<MobileHub>) -> Self {
        let sharing = Sharing {
            shared: shared.clone(),
            mobile: mobile.clone(),
        };
        Router {
            shared,
            gadget,
            mobile,
            sharing,
        }
    }

    fn activity(&self) -> &Activity {
        &self.shared.metrics.activity
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

    /// Hand `request` to the session of the chat's device and wait for its answer.
    async fn send(&self, chat: &Chat, request: Request) -> Result<Response, RequestError> {
        let answer = match chat.platform {
            Platform::Gadget => {
                self.gadget
                    .call(&chat.id, |reply| {
                        gadget::Command::Port(Call { request, reply })
                    })
                    .await
            }
            Platform::Mobile => {
                self.mobile
                    .call(&chat.id, |reply| {
                        mobile::Command::Port(Call { request, reply })
                    })
                    .await
            }
        };
        answer?
    }

    /// The agent withdrew question `prompt_id`: so are its copies.
    async fn withdraw_copies(&self, prompt_id: &str) {
        for chat in self.shared.questions.close(prompt_id) {
            let withdraw = Request::Withdraw {
                prompt_id: prompt_id.to_owned(),
            };
            let _ = self.send(&chat, withdraw).await;
        }
    }
}

/// Who is asked, as the copies of a question name them.
struct Asker {
    /// The person whose devices see the question.
    person: String,
    /// The user id the asking device's messages come from.
    user: String,
    /// What the copies call the asking device.
    name: String,
}

/// What a question asked of one device becomes for its person's other devices: copies
/// on their connected phones and, when none is in sight, a notification.
#[derive(Clone)]
struct Sharing {
    shared: Arc<Shared>,
    mobile: Arc<MobileHub>,
}

impl Sharing {
    /// Tell the person whose phone `chat` is of `text`, which it could not take.
    async fn unheard(&self, chat: &Chat, text: String) {
        let id = chat.id.clone();
        let store = &self.shared.store;
        let Ok(Some(person)) = store.run(move |s| s.phone_owner(&id)).await else {
            return;
        };
        let note = herald_session::note::Note {
            kind: herald_session::note::NoteKind::Deliver,
            title: "Message".to_owned(),
            body: text,
            tag: format!("m-{}-{}", chat.id, crate::clock::now_ms()),
            device: chat.id.clone(),
            message_id: None,
            prompt_id: None,
            options: Vec::new(),
        };
        self.shared
            .notifications
            .notify(store, &person, &note)
            .await;
    }

    /// Whose device `chat` is, when someone's: a phone's user, a gadget's owner (or the
    /// server's only user).
    async fn asker(&self, chat: &Chat, phones: &[PhoneRecord]) -> Option<Asker> {
        match chat.platform {
            Platform::Gadget => {
                let id = chat.id.clone();
                let store = &self.shared.store;
                let record = store.run(move |s| s.device(&id)).await.ok()??;
                Some(Asker {
                    person: self.shared.person_of(&record)?,
                    user: chat.id.clone(),
                    name: record.name.unwrap_or_else(|| chat.id.clone()),
                })
            }
            Platform::Mobile => {
                let phone = phones.iter().find(|phone| phone.id == chat.id)?;
                Some(Asker {
                    person: phone.user_id.clone(),
                    user: phone.user_id.clone(),
                    name: phone.info.name.clone().unwrap_or_else(|| chat.id.clone()),
                })
            }
        }
    }

    /// Show question `prompt_id`, just asked on `chat`, on every other connected phone
    /// of the same person, and keep it open for those that connect before it is answered
    /// (`crate::questions`); a person with no phone at all is not asked about.
    async fn question(&self, chat: &Chat, prompt_id: &str, prompt: Prompt, ttl_s: Option<u32>) {
        let phones = match self.shared.store.run(|s| s.phones()).await {
            Ok(phones) => phones,
            Err(err) => {
                tracing::warn!(%err, "could not list phones to show a question on");
                return;
            }
        };
        let Some(asker) = self.asker(chat, &phones).await else {
            return;
        };
        let theirs: Vec<_> = phones
            .into_iter()
            .filter(|phone| phone.user_id == asker.person)
            .collect();
        if theirs.is_empty() || !self.mobile.may_see_questions(&asker.person).await {
            return;
        }
        let now = std::time::Instant::now();
        let ttl = ttl_s.unwrap_or(QUESTION_TTL_S);
        let question = Question {
            origin: chat.clone(),
            origin_user: asker.user,
            person: asker.person,
            asked_by: asker.name,
            prompt,
            ttl_s,
            expires: now + std::time::Duration::from_secs(u64::from(ttl)),
            copies: Vec::new(),
        };
        let questions = &self.shared.questions;
        if !questions.open(prompt_id.to_owned(), question.clone(), now) {
            return;
        }
        // Nobody looking at any of their apps: a notification (`crate::notify`).
        let card = card_for(
            prompt_id.to_owned(),
            question.prompt.clone(),
            ttl,
            String::new(),
            Some(&question.asked_by),
        );
        let note = question_note(&card, Some(&question.asked_by), &chat.id);
        let (store, notifications) = (&self.shared.store, &self.shared.notifications);
        notifications.notify(store, &question.person, &note).await;
        let theirs = theirs.into_iter().filter(|phone| {
            questions.shares_with(&question.person, &phone.id)
                && !(chat.platform == Platform::Mobile && phone.id == chat.id)
                && self.mobile.devices.is_online(&phone.id)
        });
        for phone in theirs {
            // Answered meanwhile (on the asking device, or a copy shown already): no
            // more copies.
            if !questions.is_open(prompt_id) {
                return;
            }
            // Listed before it goes out, so an answer on that phone, however quick, is
            // known as given there.
            let chat = Chat::mobile(phone.id.clone());
            let name = phone.info.name.unwrap_or_else(|| phone.id.clone());
            questions.shown(prompt_id, chat.clone(), name);
            let copy = Box::new(question.clone());
            let shown = self
                .mobile
                .call(&phone.id, |reply| mobile::Command::ShowCopy {
                    prompt_id: prompt_id.to_owned(),
                    question: copy,
                    reply,
                })
                .await;
            if !matches!(shown, Ok(Ok(()))) {
                questions.not_shown(prompt_id, &chat);
            } else if !questions.is_open(prompt_id) {
                // Answered while this copy went out: the withdrawal may have missed it.
                let withdraw = Request::Withdraw {
                    prompt_id: prompt_id.to_owned(),
                };
                let call = |reply| {
                    mobile::Command::Port(Call {
                        request: withdraw,
                        reply,
                    })
                };
                let _ = self.mobile.call(&chat.id, call).await;
            }
        }
    }
}

/// How long a question stays open when the agent gives no time: as long as a phone
/// shows a card.
const QUESTION_TTL_S: u32 = herald_mobile_proto::limits::PROMPT_TIMEOUT_SECS;

/// What the console's recent events say of a request, before its answer.
enum Note {
    /// Recorded with the answer: its kind and text.
    Event(EventKind, Option<String>),
    /// A reply: recorded with its message id.
    Message(String),
    /// An action: recorded with its result.
    Action(String),
    Nothing,
}

impl Note {
    fn of(request: &Request) -> Note {
        let file = |path: &std::path::Path, caption: &Option<String>| {
            Some(caption.clone().unwrap_or_else(|| file_name(path)))
        };
        match request {
            Request::SendText { text, .. } => Note::Message(text.clone()),
            Request::Transcript { text } => Note::Event(EventKind::Transcript, Some(text.clone())),
            Request::Ask { prompt, .. } => {
                Note::Event(EventKind::Prompt, Some(prompt_text(prompt)))
            }
            Request::Withdraw { .. } => Note::Event(EventKind::Withdrawn, None),
            Request::SendVoice { path } => Note::Event(EventKind::Voice, Some(file_name(path))),
            Request::SpeechBegin { speech_id, .. } => Note::Event(
                EventKind::Voice,
                Some(format!("streamed speech {}", speech_id.as_str())),
            ),
            Request::SendImage { path, caption } => {
                Note::Event(EventKind::Image, file(path, caption))
            }
            Request::SendDocument { path, caption } => {
                Note::Event(EventKind::Document, file(path, caption))
            }
            Request::Display { card } => Note::Event(
                EventKind::Card,
                Some(format!("{}\n{}", card.title, card.body).trim().to_owned()),
            ),
            Request::Notice { text } => Note::Event(EventKind::Notice, Some(text.clone())),
            Request::InvokeAction { name, args } => Note::Action(format!("{name} {args}")),
            Request::EditText { .. }
            | Request::Actions {}
            | Request::Profile {}
            | Request::SpeechWrite { .. }
            | Request::SpeechFile { .. }
            | Request::SpeechEnd { .. }
            | Request::SpeechAbort { .. } => Note::Nothing,
        }
    }
}

#[async_trait]
impl Outbound for Router {
    async fn request(&self, chat: &Chat, request: Request) -> Result<Response, RequestError> {
        if let Request::EditText {
            message_id, text, ..
        } = &request
        {
            self.activity().edited(chat, message_id, text);
        }
        let note = Note::of(&request);
        let shared_later = match &request {
            Request::Ask { prompt, ttl_s } => Some((prompt.clone(), *ttl_s)),
            _ => None,
        };
        let withdrawn = match &request {
            Request::Withdraw { prompt_id } => Some(prompt_id.clone()),
            _ => None,
        };
        // A message for a phone with no session (its app has not connected since the
        // server started): no core can tell its person, so this does.
        let unheard = match &request {
            Request::SendText { text, .. }
                if chat.platform == Platform::Mobile
                    && self.mobile.devices.session(&chat.id).is_none() =>
            {
                Some(text.clone())
            }
            _ => None,
        };
        let result = self.send(chat, request).await;
        if let (Some(text), Err(RequestError::Delivery(DeliveryError::Offline(_)))) =
            (unheard, &result)
        {
            self.sharing.unheard(chat, text).await;
        }
        match (&result, shared_later) {
            // Beside the answer: the agent need not wait for the copies.
            (Ok(Response::PromptId { prompt_id }), Some((prompt, ttl_s))) => {
                let share = self.sharing.clone();
                let (chat, prompt_id) = (chat.clone(), prompt_id.clone());
                tokio::spawn(async move { share.question(&chat, &prompt_id, prompt, ttl_s).await });
            }
            _ => {
                if let Some(prompt_id) = withdrawn {
                    self.withdraw_copies(&prompt_id).await;
                }
            }
        }
        match note {
            Note::Event(kind, text) => self.note(chat, kind, text.as_deref(), &result),
            Note::Message(text) => {
                let id = match &result {
                    Ok(Response::MessageId { message_id }) => Ok(message_id.as_str()),
                    Ok(_) => Ok(""),
                    Err(err) => Err(err.to_string()),
                };
                self.activity().message(chat, &text, id);
            }
            Note::Action(called) => {
                let text = match &result {
                    Ok(Response::ActionResult { result }) => format!("{called} → {result}"),
                    _ => called,
                };
                self.note(chat, EventKind::Action, Some(&text), &result);
            }
            Note::Nothing => {}
        }
        result
    }

    async fn notify(&self, chat: &Chat, notification: Notification) {
        if let Notification::TurnEnded { outcome, .. } = &notification {
            let outcome = format!("{outcome:?}").to_lowercase();
            self.activity()
                .record(chat, EventKind::TurnEnded, Some(&outcome), None);
        }
        match chat.platform {
            Platform::Gadget => {
                let notify = gadget::Command::Notify(notification);
                self.gadget.tell(&chat.id, notify).await;
            }
            Platform::Mobile => {
                let notify = mobile::Command::Notify(notification);
                self.mobile.tell(&chat.id, notify).await;
            }
        }
    }

    async fn devices(&self) -> Result<Vec<DeviceSummary>, DeliveryError> {
        let failed = |err: StoreError| DeliveryError::Failed(err.to_string());
        let store = &self.shared.store;
        let gadgets = store.run(|store| store.devices()).await.map_err(failed)?;
        let phones = store.run(|store| store.phones()).await.map_err(failed)?;
        // Each connected gadget's session knows what it is; all are asked at once, and
        // one gone meanwhile is offline.
        let gadgets = gadgets.into_iter().map(|gadget| async move {
            let chat = Chat::gadget(gadget.id);
            let profile = match self.gadget.devices.is_online(&chat.id) {
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
            online: self.mobile.devices.is_online(&p.id),
            chat: Chat::mobile(p.id),
            name: p.info.name,
            profile: None,
        }));
        Ok(devices)
    }

    async fn set_authorized(&self, platform: Platform, user_id: &str, authorized: bool) {
        match platform {
            Platform::Gadget => {
                self.gadget.authorized.set(user_id, authorized);
                self.gadget
                    .tell(user_id, gadget::Command::SetPaired(authorized))
                    .await;
            }
            // A phone's messages check the remembered answer; its connections stay. An
            // approved user's phones hear it at once and send on what they kept.
            Platform::Mobile => {
                self.mobile.authorized.set(user_id, authorized);
                if authorized {
                    let approved = || mobile::Command::Approved {
                        user_id: user_id.to_owned(),
                    };
                    self.mobile.tell_all(approved).await;
                }
            }
        }
    }
}

/// A prompt as one line for the console.
fn prompt_text(prompt: &Prompt) -> String {
    match prompt {
        Prompt::ExecApproval { command, .. } => format!("Run {command}?"),
        Prompt::Confirm { title, text } => format!("{title}: {text}"),
        Prompt::Clarify {
            question, choices, ..
        } => format!("{question} ({})", choices.join(", ")),
    }
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
