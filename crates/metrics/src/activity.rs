//! What the console shows of each conversation, and what it hears live.
//!
//! Nothing else records conversations, and the console only needs the last few
//! exchanges of a device, so this keeps a small ring of events per chat in memory
//! ([`RECENT`] each, [`MAX_CHATS`] chats at most, texts cut to [`MAX_TEXT`] characters,
//! [`MAX_BYTES`] in all): gone on restart, bounded whatever devices do. The ring is fed where agent calls reach
//! the transports (`router.rs`), which sees every reply, card, prompt, file and action
//! whatever backend sent it, including the console's own messages.
//!
//! It lives inside [`Metrics`](crate::Metrics), the one object the hubs, the
//! router and the admin API already share, and it doubles as the console's event bus:
//! every recorded event, and a nudge after each change the admin API makes, goes to a
//! broadcast channel that the live stream (`live.rs`) listens to.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use herald_port::{Chat, InboundBody, Platform};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::clock::now_ms;

/// Events kept per chat.
pub const RECENT: usize = 50;
/// Chats kept at most; past it the one quiet for longest makes room.
pub const MAX_CHATS: usize = 1024;
/// Characters of a text kept; longer ones are cut.
pub const MAX_TEXT: usize = 500;
/// What all rings hold at most, in bytes of events; past it the quietest chats make
/// room. (Without it, full rings of long texts in every chat would be some 200 MB.)
pub const MAX_BYTES: usize = 8 * 1024 * 1024;
/// The longest chat id recorded: no gadget or phone has a longer one (the phone
/// protocol's limit is the larger), so a call to a longer one (the agent's or the admin
/// API's mistake) reaches nobody and is not kept, whose key would be as long as it is.
pub const MAX_CHAT_ID: usize = herald_mobile_proto::limits::MAX_ID_BYTES;
/// Live messages a slow listener may fall behind by before it misses some.
const LIVE_CAPACITY: usize = 256;

/// What happened in a conversation, as the console lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A text reply (streamed replies are one event, updated by each edit).
    Message,
    /// What the device's user sent the agent: text as typed, voice and files by kind.
    Said,
    /// What the device's user said, as speech-to-text heard it.
    Transcript,
    Card,
    /// A question for the user (yes/no, approval, choice).
    Prompt,
    Withdrawn,
    Voice,
    Image,
    Document,
    Notice,
    /// A device action the agent (or the console) ran, with its result.
    Action,
    TurnEnded,
}

/// One entry of a conversation's ring.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationEvent {
    /// Increasing over the whole server; an edited message keeps its number.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at: i64,
    pub kind: EventKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why the call failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The reply's message id, so edits find it.
    #[serde(skip)]
    message_id: Option<String>,
}

/// What the live stream hears.
#[derive(Debug, Clone)]
pub enum Live {
    /// A conversation event was added or (an edit) updated.
    Conversation {
        platform: Platform,
        id: String,
        event: ConversationEvent,
    },
    /// Something the console lists may have changed: look again now.
    Changed,
}

type Key = (Platform, String);

struct Ring {
    events: VecDeque<ConversationEvent>,
    /// The number of its latest event: the lowest is the quietest chat.
    last: u64,
    /// What its events cost, by [`cost`].
    bytes: usize,
}

/// The rings, and what they cost in all.
#[derive(Default)]
struct Chats {
    rings: HashMap<Key, Ring>,
    bytes: usize,
}

impl Chats {
    fn remove(&mut self, key: &Key) {
        if let Some(ring) = self.rings.remove(key) {
            self.bytes -= ring.bytes;
        }
    }

    /// Remove the chat quiet for longest but `keep`; false when there is no other.
    fn evict_quietest(&mut self, keep: &Key) -> bool {
        let quietest = self
            .rings
            .iter()
            .filter(|(key, _)| *key != keep)
            .min_by_key(|(_, ring)| ring.last)
            .map(|(key, _)| key.clone());
        match quietest {
            Some(key) => {
                self.remove(&key);
                true
            }
            None => false,
        }
    }
}

/// The memory an event holds, near enough.
fn cost(event: &ConversationEvent) -> usize {
    let len = |text: &Option<String>| text.as_ref().map_or(0, String::len);
    std::mem::size_of::<ConversationEvent>()
        + len(&event.text)
        + len(&event.error)
        + len(&event.message_id)
}

pub struct Activity {
    chats: Mutex<Chats>,
    seq: AtomicU64,
    live: broadcast::Sender<Live>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            chats: Mutex::default(),
            seq: AtomicU64::new(1),
            live: broadcast::channel(LIVE_CAPACITY).0,
        }
    }
}

/// `text` cut to [`MAX_TEXT`] characters.
fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

impl Activity {
    fn lock(&self) -> std::sync::MutexGuard<'_, Chats> {
        self.chats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Listen to what happens from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Live> {
        self.live.subscribe()
    }

    /// Tell live listeners to look again (a pairing, a forget, a push).
    pub fn changed(&self) {
        // Nobody listening is fine.
        let _ = self.live.send(Live::Changed);
    }

    /// Record an event of `chat`; `error` is why the call failed, if it did.
    pub fn record(&self, chat: &Chat, kind: EventKind, text: Option<&str>, error: Option<String>) {
        self.push(chat, kind, text, error, None);
    }

    /// Record what a device's user sent, as it goes to the agent.
    pub fn said(&self, chat: &Chat, body: &InboundBody) {
        let text = match body {
            InboundBody::Text { text, .. } => text.clone(),
            InboundBody::Voice {
                duration_ms,
                transcript,
                ..
            } => match transcript {
                Some(heard) => {
                    format!("(voice, {:.1} s) {heard}", f64::from(*duration_ms) / 1000.0)
                }
                None => format!("(voice, {:.1} s)", f64::from(*duration_ms) / 1000.0),
            },
            InboundBody::Media { kind, caption, .. } => {
                let kind = format!("{kind:?}").to_lowercase();
                match caption {
                    Some(caption) => format!("({kind}) {caption}"),
                    None => format!("({kind})"),
                }
            }
            InboundBody::Command(command) => format!("({command:?})").to_lowercase(),
            InboundBody::PromptAnswer(_)
            | InboundBody::SpeechStopped { .. }
            | InboundBody::TurnTimedOut { .. } => return,
        };
        self.record(chat, EventKind::Said, Some(&text), None);
    }

    /// Record a reply that later edits update.
    pub fn message(&self, chat: &Chat, text: &str, result: Result<&str, String>) {
        let (id, error) = match result {
            Ok(id) => (Some(id.to_owned()), None),
            Err(error) => (None, Some(error)),
        };
        self.push(chat, EventKind::Message, Some(text), error, id);
    }

    fn push(
        &self,
        chat: &Chat,
        kind: EventKind,
        text: Option<&str>,
        error: Option<String>,
        message_id: Option<String>,
    ) {
        if chat.id.len() > MAX_CHAT_ID {
            return;
        }
        let now = now_ms();
        let event = ConversationEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            at: now,
            kind,
            text: text.map(bounded),
            error: error.as_deref().map(bounded),
            message_id,
        };
        {
            let mut chats = self.lock();
            let key = (chat.platform, chat.id.clone());
            if !chats.rings.contains_key(&key) && chats.rings.len() >= MAX_CHATS {
                chats.evict_quietest(&key);
            }
            let added = cost(&event);
            let ring = chats.rings.entry(key.clone()).or_insert_with(|| Ring {
                events: VecDeque::with_capacity(8),
                last: event.seq,
                bytes: 0,
            });
            let mut freed = 0;
            if ring.events.len() >= RECENT {
                freed = ring.events.pop_front().map_or(0, |old| cost(&old));
            }
            ring.last = event.seq;
            ring.bytes = ring.bytes + added - freed;
            ring.events.push_back(event.clone());
            chats.bytes = chats.bytes + added - freed;
            while chats.bytes > MAX_BYTES && chats.evict_quietest(&key) {}
        }
        self.announce(chat, event);
    }

    /// A streamed reply's new text replaces the recorded one.
    pub fn edited(&self, chat: &Chat, message_id: &str, text: &str) {
        let updated = {
            let mut chats = self.lock();
            let key = (chat.platform, chat.id.clone());
            let Some(ring) = chats.rings.get_mut(&key) else {
                return;
            };
            let Some(event) = ring
                .events
                .iter_mut()
                .rev()
                .find(|e| e.message_id.as_deref() == Some(message_id))
            else {
                return;
            };
            let before = cost(event);
            event.text = Some(bounded(text));
            let (after, updated) = (cost(event), event.clone());
            ring.bytes = ring.bytes + after - before;
            chats.bytes = chats.bytes + after - before;
            while chats.bytes > MAX_BYTES && chats.evict_quietest(&key) {}
            updated
        };
        self.announce(chat, updated);
    }

    fn announce(&self, chat: &Chat, event: ConversationEvent) {
        let _ = self.live.send(Live::Conversation {
            platform: chat.platform,
            id: chat.id.clone(),
            event,
        });
    }

    /// The recent events of a chat, oldest first.
    pub fn recent(&self, chat: &Chat) -> Vec<ConversationEvent> {
        self.lock()
            .rings
            .get(&(chat.platform, chat.id.clone()))
            .map(|ring| ring.events.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Drop a chat's events (its device was forgotten).
    pub fn forget(&self, chat: &Chat) {
        self.lock().remove(&(chat.platform, chat.id.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_chat_keeps_its_last_events_and_edits_update_in_place() {
        let activity = Activity::default();
        let chat = Chat::gadget("hg-a");
        let mut live = activity.subscribe();
        for i in 0..RECENT + 5 {
            activity.record(&chat, EventKind::Notice, Some(&format!("n{i}")), None);
        }
        activity.message(&chat, "You said", Ok("m1"));
        activity.edited(&chat, "m1", "You said: hi");
        activity.edited(&chat, "unknown", "ignored");
        let events = activity.recent(&chat);
        assert_eq!(events.len(), RECENT);
        assert_eq!(events[0].text.as_deref(), Some("n6"));
        let last = events.last().unwrap();
        assert_eq!(last.kind, EventKind::Message);
        assert_eq!(last.text.as_deref(), Some("You said: hi"));
        assert!(activity.recent(&Chat::mobile("hg-a")).is_empty());
        // The edit was announced with the message's own number.
        let mut seen = Vec::new();
        while let Ok(Live::Conversation { event, .. }) = live.try_recv() {
            seen.push(event);
        }
        assert_eq!(seen.len(), RECENT + 5 + 2);
        assert_eq!(seen[seen.len() - 1].seq, seen[seen.len() - 2].seq);
        activity.forget(&chat);
        assert!(activity.recent(&chat).is_empty());
    }

    #[test]
    fn texts_and_chats_are_bounded() {
        let activity = Activity::default();
        let long = "é".repeat(MAX_TEXT + 10);
        activity.record(&Chat::gadget("hg-0"), EventKind::Card, Some(&long), None);
        let text = activity.recent(&Chat::gadget("hg-0"))[0]
            .text
            .clone()
            .unwrap();
        assert_eq!(text.chars().count(), MAX_TEXT + 1);
        assert!(text.ends_with('…'));
        for i in 1..=MAX_CHATS {
            activity.record(
                &Chat::gadget(format!("hg-{i}")),
                EventKind::Notice,
                None,
                None,
            );
        }
        assert_eq!(activity.lock().rings.len(), MAX_CHATS);
        // The quietest chat (the first) made room.
        assert!(activity.recent(&Chat::gadget("hg-0")).is_empty());
        // A chat id no device can have is not kept, nor does it push a chat out.
        let long = Chat::gadget("x".repeat(MAX_CHAT_ID + 1));
        activity.record(&long, EventKind::Notice, Some("lost"), None);
        assert!(activity.recent(&long).is_empty());
        assert!(!activity.recent(&Chat::gadget("hg-1")).is_empty());
        let longest = Chat::mobile("p".repeat(MAX_CHAT_ID));
        activity.record(&longest, EventKind::Notice, None, None);
        assert_eq!(activity.recent(&longest).len(), 1);
    }

    #[test]
    fn all_rings_together_keep_to_the_byte_budget() {
        let activity = Activity::default();
        // Texts of four-byte characters: a full ring is some 100 KB, far past the
        // budget over a few hundred chats.
        let long = "𝄞".repeat(MAX_TEXT);
        let chats = 300;
        for i in 0..chats {
            let chat = Chat::gadget(format!("hg-{i}"));
            for _ in 0..RECENT {
                activity.record(&chat, EventKind::Message, Some(&long), None);
            }
        }
        let held = activity.lock();
        let counted: usize = held
            .rings
            .values()
            .flat_map(|ring| ring.events.iter())
            .map(cost)
            .sum();
        assert_eq!(held.bytes, counted);
        assert!(held.bytes <= MAX_BYTES, "{}", held.bytes);
        assert!(held.rings.len() < chats, "nothing was evicted");
        // The latest chat is whole; the earliest made room.
        let latest = (Platform::Gadget, format!("hg-{}", chats - 1));
        assert_eq!(held.rings[&latest].events.len(), RECENT);
        assert!(!held
            .rings
            .contains_key(&(Platform::Gadget, "hg-0".to_owned())));
        drop(held);
        // Edits are counted too.
        let chat = Chat::gadget("hg-edit");
        activity.message(&chat, "short", Ok("m1"));
        activity.edited(&chat, "m1", &long);
        let held = activity.lock();
        let counted: usize = held
            .rings
            .values()
            .map(|r| r.events.iter().map(cost).sum::<usize>())
            .sum();
        assert_eq!(held.bytes, counted);
        assert!(held.bytes <= MAX_BYTES);
    }
}
