//! The mobile adapter: phone apps speaking the mobile protocol over WebSocket.
//!
//! - [`handshake`] checks `hello` (token, device filter, ownership), answers `ready` and
//!   hands the connection to the phone's session;
//! - [`socket`] says what each read from a phone's connection is, and serves the
//!   connections of deliver tokens, which have no session;
//! - [`session`] is what the one session loop (`crate::session`) does for a phone's
//!   core (`herald_session::mobile`: authorization, duplicate suppression, uploads,
//!   cards, replies shaped into chunks and streaming edits): its reads, keepalive,
//!   commands and own effects, among them the outbox (in the store) that keeps a
//!   turn's frames while the phone is away;
//! - the hub ([`MobileHub`], `crate::hub`) holds what phones share: who may reach the
//!   agent, which device each open card was shown to, and the upload budget.
//!
//! Like gadgets, a session outlives its connections: a phone that drops mid-turn gets
//! the rest of the turn when it comes back, even across a restart of the server, and
//! an id it already sent stays known.

mod handshake;
mod session;
mod socket;

use std::sync::Mutex;

use dashmap::DashMap;
use herald_mobile_proto::{limits, Capabilities, Deliver, PushCapability, TokenSet};
use herald_port::{DeliveryError, Platform};
use herald_session::mobile::link::Delivered;
use herald_session::mobile::uploads::UploadBudget;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::edge::listener;
use crate::hub::{DeviceKind, Hub};
use herald_config::MobileConfig;
use herald_store::StoreHandle;

pub(crate) use session::Command;

/// Where a generated app token is kept when `MOBILE_TOKEN` is not set.
pub const TOKEN_FILE: &str = "mobile.token";

/// The longest phone name or platform kept; longer ones are cut.
pub(crate) const MAX_LABEL: usize = 64;

use session::Event;

/// Phones, as the hub knows them.
pub(crate) struct Phones;

/// The hub of every phone session.
pub(crate) type MobileHub = Hub<Phones>;

impl DeviceKind for Phones {
    const PLATFORM: Platform = Platform::Mobile;
    type Own = PhoneParts;
    type Event = Event;
    type Command = Command;

    fn command(command: Command) -> Event {
        Event::Command(command)
    }

    fn shutdown() -> Command {
        Command::Shutdown
    }
}

/// What only phone sessions share.
pub(crate) struct PhoneParts {
    pub(crate) config: MobileConfig,
    /// App tokens: each stands for a user.
    tokens: TokenSet,
    /// Tokens that may only `deliver`.
    deliver_tokens: TokenSet,
    /// Which device each open card was shown to, so another device's answer is refused.
    cards: DashMap<String, String>,
    /// The bytes of unfinished uploads, per user and in all.
    upload_budget: Mutex<UploadBudget>,
    /// Push endpoints on private addresses are allowed (`push.allow_private_endpoints`).
    pub(crate) private_push: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum MobileSetupError {
    #[error("MOBILE_TOKEN / MOBILE_EXTRA_TOKENS: {0}")]
    Tokens(#[from] herald_mobile_proto::TokenError),
    #[error(
        "{which} is too short: a token is a password anyone who reaches the port may guess; \
         use at least {MIN_TOKEN_CHARS} characters (for example `openssl rand -hex 32`)"
    )]
    WeakToken { which: String },
}

/// The shortest app or deliver token accepted at start-up.
pub const MIN_TOKEN_CHARS: usize = 32;

/// Refuse tokens short enough to guess: each token as it will be matched, so a
/// `label:` prefix cannot pass a short token off as a long one.
fn check_strength(app_token: &str, extra: &str, deliver: &str) -> Result<(), MobileSetupError> {
    let weak = |token: &str| token.trim().chars().count() < MIN_TOKEN_CHARS;
    if weak(app_token) {
        return Err(MobileSetupError::WeakToken {
            which: "MOBILE_TOKEN".into(),
        });
    }
    for (list, entries) in [
        ("MOBILE_EXTRA_TOKENS", TokenSet::entries(extra)),
        ("MOBILE_DELIVER_TOKENS", TokenSet::entries(deliver)),
    ] {
        for (index, label, token) in entries {
            if weak(token) {
                let which = match label {
                    Some(label) => format!("{list} entry {index} ({label})"),
                    None => format!("{list} entry {index}"),
                };
                return Err(MobileSetupError::WeakToken { which });
            }
        }
    }
    Ok(())
}

impl PhoneParts {
    pub(crate) fn new(
        config: MobileConfig,
        app_token: &str,
        private_push: bool,
    ) -> Result<Self, MobileSetupError> {
        let extra = config.extra_tokens.as_ref().map_or("", |s| s.expose());
        let deliver = config
            .deliver_tokens
            .iter()
            .map(|t| t.expose())
            .collect::<Vec<_>>()
            .join(",");
        check_strength(app_token, extra, &deliver)?;
        let tokens = TokenSet::parse(Some(app_token), Some(extra))?;
        let deliver_tokens = TokenSet::parse(None, Some(&deliver))?;
        Ok(PhoneParts {
            config,
            tokens,
            deliver_tokens,
            cards: DashMap::new(),
            upload_budget: Mutex::new(UploadBudget::default()),
            private_push,
        })
    }
}

impl PhoneParts {
    /// The one user the app tokens stand for, when there is only one.
    pub(crate) fn sole_user(&self) -> Option<String> {
        let mut users = self.tokens.user_ids();
        let first = users.next()?;
        users.next().is_none().then(|| first.to_owned())
    }
}

impl MobileHub {
    /// The upload budget, for one reservation or release.
    fn upload_budget(&self) -> std::sync::MutexGuard<'_, UploadBudget> {
        // Counts are updated whole under the lock; a panic elsewhere leaves them valid.
        self.own
            .upload_budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an app token stands for `user_id`.
    pub(crate) fn is_token_user(&self, user_id: &str) -> bool {
        self.own.tokens.user_ids().any(|user| user == user_id)
    }

    /// Whether `user_id` may reach the agent from a phone: only then is a question shown
    /// on their phones.
    pub(crate) async fn may_see_questions(&self, user_id: &str) -> bool {
        let Some(authorizer) = self.shared.authorizer() else {
            return false;
        };
        let checked = self
            .authorized
            .check(authorizer.as_ref(), Platform::Mobile, user_id);
        matches!(checked.await, Ok(true))
    }

    /// Whether the phone `device_id` belongs to `user_id` (the first user who used it).
    pub(crate) async fn owns(&self, user_id: &str, device_id: &str) -> bool {
        let id = device_id.to_owned();
        match self
            .shared
            .store
            .run(move |store| store.phone_owner(&id))
            .await
        {
            Ok(owner) => owner.as_deref() == Some(user_id),
            Err(err) => {
                tracing::warn!(%err, "could not look up a phone's owner");
                false
            }
        }
    }

    fn capabilities(&self) -> Capabilities {
        let push = self
            .shared
            .notifications
            .public_key()
            .map(|key| PushCapability {
                vapid_key: key.to_owned(),
            });
        Capabilities {
            max_message_chars: self.own.config.max_message_chars,
            push,
            ..Capabilities::default()
        }
    }

    /// Push `deliver` to the phone it names, once `owner` (when there is one) is known
    /// to own it. A phone with no live connection is `device_offline` whoever asks, as
    /// the protocol says; only a connected phone's owner is checked.
    pub(crate) async fn deliver(&self, deliver: Deliver, owner: Option<String>) -> Delivered {
        let to = deliver.to.clone();
        if !self.devices.is_online(&to) {
            return Delivered::Failed(DeliveryError::Offline(herald_port::Chat::mobile(to)));
        }
        if let Some(user_id) = owner {
            if !self.owns(&user_id, &to).await {
                return Delivered::NotYours;
            }
        }
        let deliver = Box::new(deliver);
        let sent = self.call(&to, |reply| Command::Deliver { deliver, reply });
        match sent.await.and_then(|sent| sent) {
            Ok(()) => Delivered::Sent,
            Err(err) => Delivered::Failed(err),
        }
    }
}

/// How a phone is named to its person: its own name, else its id.
pub(crate) async fn phone_name(store: &StoreHandle, device_id: &str) -> String {
    let id = device_id.to_owned();
    let phones = store.run(|store| store.phones()).await.unwrap_or_default();
    phones
        .into_iter()
        .find(|phone| phone.id == id)
        .and_then(|phone| phone.info.name)
        .unwrap_or(id)
}

/// Frames a little over the limit are still read whole, so the phone gets a clean
/// `too_big` and close instead of a reset in the middle of its upload.
const READ_LIMIT: usize = limits::MAX_FRAME_BYTES + 1024 * 1024;

/// The mobile endpoint: frames up to 16 MiB (media), small buffers while idle.
pub(crate) fn endpoint(path: &str) -> listener::Endpoint {
    listener::Endpoint {
        path: path.to_owned(),
        subprotocol: None,
        ws: WebSocketConfig::default()
            .read_buffer_size(1024)
            .write_buffer_size(0)
            .max_write_buffer_size(limits::MAX_FRAME_BYTES * 2)
            .max_message_size(Some(READ_LIMIT))
            .max_frame_size(Some(READ_LIMIT)),
        refuse_url_token: true,
        about: "Herald's phone endpoint: apps connect here with a WebSocket (mobile protocol).\n",
        pages: herald_pages::MOBILE_PAGES,
    }
}

#[cfg(test)]
mod tests {
    use super::check_strength;

    const LONG: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn every_token_is_checked_as_it_will_be_matched() {
        assert!(check_strength(LONG, "", "").is_ok());
        assert!(check_strength("short", "", "").is_err());
        assert!(check_strength(LONG, &format!("alice:{LONG}"), LONG).is_ok());
        // A long label in front of a short token: the token that works is short.
        let err = check_strength(LONG, "", &format!("{LONG}:a")).unwrap_err();
        assert!(
            err.to_string().contains("MOBILE_DELIVER_TOKENS entry 0"),
            "{err}"
        );
        let err = check_strength(LONG, &format!("{LONG}:a"), "").unwrap_err();
        assert!(
            err.to_string().contains("MOBILE_EXTRA_TOKENS entry 0"),
            "{err}"
        );
    }
}
