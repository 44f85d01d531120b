//! Notifications to a person none of whose apps is in sight (Web Push).
//!
//! A phone's core says what is worth telling while its app is away (a question, a
//! finished reply, a delivery), a gadget's of an event it reports, and the router says
//! it of a question asked of a gadget.
//! Here that becomes a push to every subscription of the person, unless one of their
//! apps is connected and in sight, with the payload docs/mobile-protocol.md describes,
//! cut to fit. The same thing reaching one person twice within a minute (a question
//! copied to two phones) is pushed once.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use herald_push::{Pusher, Settings, Target, VapidKey};
use herald_session::note::{Note, NoteKind};
use herald_store::StoreHandle;
use tracing::warn;

use herald_config::PushConfig;

/// The VAPID key's file in the data directory.
pub const VAPID_KEY_FILE: &str = "vapid.key";
/// The most a payload holds before encryption; a push service takes 4096 bytes in all.
const MAX_PAYLOAD: usize = 3072;
/// The same tag for the same person within this long is pushed once.
const SAME_NOTE: Duration = Duration::from_secs(60);

/// The sender, with the server's key (made on first start) and a way to drop the
/// subscriptions push services say are gone.
pub fn start_pusher(
    data_dir: &Path,
    config: &PushConfig,
    store: &StoreHandle,
) -> Result<Pusher, herald_push::PushError> {
    let key = VapidKey::load_or_create(&data_dir.join(VAPID_KEY_FILE))?;
    let settings = Settings {
        contact: config.contact.clone(),
        allow_private: config.allow_private_endpoints,
    };
    let store = store.clone();
    let gone = Arc::new(move |device: &str| {
        let (store, device) = (store.clone(), device.to_owned());
        tokio::spawn(async move {
            let removed = store
                .run(move |s| s.remove_push_subscription(&device))
                .await;
            if let Err(err) = removed {
                warn!(%err, "could not drop a push subscription that is gone");
            }
        });
    });
    Ok(Pusher::start(key, settings, gone))
}

/// Who is looking, what was pushed lately, and the sender: held once, for every
/// session that has something to tell.
#[derive(Default)]
pub struct Notifications {
    pusher: Option<Pusher>,
    /// Phones whose app is connected and in sight, with their user: who needs no
    /// notification now.
    in_sight: DashMap<String, String>,
    /// What was pushed to whom lately, so one thing is pushed once.
    recent: Recent,
}

impl Notifications {
    pub fn new(pusher: Option<Pusher>) -> Self {
        Notifications {
            pusher,
            ..Notifications::default()
        }
    }

    /// The server's VAPID key, when notifications are on.
    pub fn public_key(&self) -> Option<&str> {
        self.pusher.as_ref().map(Pusher::public_key)
    }

    /// Phone `device` (of `user`) is connected and in sight, or no longer.
    pub fn set_in_sight(&self, device: &str, user: &str, in_sight: bool) {
        match in_sight {
            true => {
                self.in_sight.insert(device.to_owned(), user.to_owned());
            }
            false => {
                self.in_sight.remove(device);
            }
        }
    }

    /// Whether one of `user`'s apps is connected and in sight.
    fn in_sight_of(&self, user: &str) -> bool {
        self.in_sight.iter().any(|entry| entry.value() == user)
    }

    /// Tell `person` of `note` on every subscription of theirs, unless one of their
    /// apps is in sight or they were told the same lately.
    pub async fn notify(&self, store: &StoreHandle, person: &str, note: &Note) {
        let Some(pusher) = &self.pusher else {
            return;
        };
        if person.is_empty()
            || self.in_sight_of(person)
            || !self.recent.first(person, &note.tag, Instant::now())
        {
            return;
        }
        let user = person.to_owned();
        let subscriptions = match store.run(move |s| s.push_subscriptions(Some(&user))).await {
            Ok(subscriptions) => subscriptions,
            Err(err) => {
                warn!(%err, "could not read push subscriptions");
                return;
            }
        };
        let payload = payload(note);
        let urgent = note.kind == NoteKind::Question;
        for sub in subscriptions {
            let target = Target {
                device: sub.device_id,
                person: person.to_owned(),
                endpoint: sub.endpoint,
                p256dh: sub.p256dh,
                auth: sub.auth,
            };
            pusher.push(target, payload.clone(), urgent);
        }
    }
}

/// Tags pushed lately, per person.
#[derive(Default)]
struct Recent(Mutex<HashMap<(String, String), Instant>>);

impl Recent {
    /// Whether `tag` for `person` is new (and now noted).
    fn first(&self, person: &str, tag: &str, now: Instant) -> bool {
        let mut recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|_, at| now.duration_since(*at) < SAME_NOTE);
        let key = (person.to_owned(), tag.to_owned());
        if recent.contains_key(&key) {
            return false;
        }
        recent.insert(key, now);
        true
    }
}

/// `note` as the app decrypts it, at most [`MAX_PAYLOAD`] bytes: a long body is cut (at
/// a character) and marked `truncated`.
fn payload(note: &Note) -> Vec<u8> {
    let mut note = note.clone();
    let mut truncated = false;
    loop {
        let mut value = serde_json::to_value(&note).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("v".into(), 1.into());
            if truncated {
                object.insert("truncated".into(), true.into());
            }
        }
        let bytes = value.to_string().into_bytes();
        if bytes.len() <= MAX_PAYLOAD || note.body.is_empty() {
            return bytes;
        }
        // Cut what is over, and a little more for the escapes it may have held.
        let over = bytes.len() - MAX_PAYLOAD;
        let mut keep = note.body.len().saturating_sub(over + 16);
        while !note.body.is_char_boundary(keep) {
            keep -= 1;
        }
        note.body.truncate(keep);
        note.body.push('…');
        truncated = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(body: &str) -> Note {
        Note {
            kind: NoteKind::Reply,
            title: "Reply".into(),
            body: body.into(),
            tag: "m-1".into(),
            device: "tel-1".into(),
            message_id: Some("1".into()),
            prompt_id: None,
            options: Vec::new(),
        }
    }

    #[test]
    fn a_long_body_is_cut_to_fit_and_says_so() {
        let short: serde_json::Value = serde_json::from_slice(&payload(&note("Hi"))).unwrap();
        assert_eq!(short["v"], 1);
        assert_eq!(short["kind"], "reply");
        assert_eq!(short["body"], "Hi");
        assert!(short.get("truncated").is_none());

        let long = "é\"".repeat(4000);
        let bytes = payload(&note(&long));
        assert!(bytes.len() <= MAX_PAYLOAD, "{}", bytes.len());
        let cut: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(cut["truncated"], true);
        assert!(cut["body"].as_str().unwrap().ends_with('…'));
    }

    #[test]
    fn the_same_note_reaches_a_person_once_a_minute() {
        let recent = Recent::default();
        let now = Instant::now();
        assert!(recent.first("u-a", "q-1", now));
        assert!(!recent.first("u-a", "q-1", now + Duration::from_secs(5)));
        assert!(recent.first("u-b", "q-1", now), "another person");
        assert!(recent.first("u-a", "q-1", now + SAME_NOTE));
    }
}
