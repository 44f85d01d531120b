//! The phone core's state, its effects, its connection and its timers; how it takes
//! frames is `inbound.rs`, agent calls `calls.rs`.
//!
//! Whether the user may reach the agent is the hub's to say: work waits in order in the
//! core while the shell asks (from memory when it can), so nothing from an unauthorized
//! user is written to disk and nothing overtakes.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use herald_mobile_proto::{self as proto, limits, AvatarState, ErrorCode, PromptCard, ServerFrame};
use herald_port::{
    AccessError, Chat, DeliveryError, Inbound, InboundBody, MediaKind, PairingCode, RequestError,
    Response, Source, TurnId,
};
use tracing::warn;

use super::link::{Delivers, Due, Keepalive};
use super::push::Subscription;
use super::seen::SeenIds;
use super::uploads::{Upload, Uploads};
use crate::io::{Close, Failed, Frame, Output, Transmit};
use crate::note::{Note, NoteKind};
use crate::{CallId, Counted, Ids, SessionCore};

/// Work for the agent that may wait on the authorizer, at most: a phone that sends more
/// while one answer is out is told to slow down.
const MAX_HELD: usize = 32;
/// How long an unpaired user's messages wait for the owner's approval: as long as the
/// pairing code they were given lives.
pub const KEEP_UNTIL_PAIRED: Duration =
    Duration::from_secs(herald_gadget_proto::limits::PAIRING_CODE_TTL_SECS);
/// How long the agent may leave a turn quiet unless the shell says otherwise.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(180);

/// Work the shell carries out for the core, in order.
#[derive(Debug)]
pub enum Effect {
    /// The phone is online on connection `conn`.
    Online { conn: u64 },
    /// The connection is gone.
    Offline,
    /// Send the connection what the phone missed of a turn while it was away, in order.
    Replay,
    /// Keep a frame for the phone, away during a turn, in the store.
    Keep(String),
    /// Ask whether the user may reach the agent; the answer goes to
    /// [`Core::handle_authorization`].
    Authorize { user_id: String },
    /// Ask for a pairing code for [`Core::handle_pairing_code`].
    AskPairingCode {
        user_id: String,
        user_name: Option<String>,
    },
    /// Hand this to the agent, in order (and note it in the activity log);
    /// [`Core::handle_agent_full`] when it cannot take it.
    ToAgent(Box<Inbound>),
    /// Answer the agent's call `call`.
    Answer {
        call: CallId,
        answer: Result<Response, RequestError>,
    },
    /// Count this in the server's metrics.
    Count(Counted),
    /// Reserve `bytes` of `user`'s upload budget and hand the answer to
    /// [`Core::handle_upload_budget`].
    ReserveUpload { user: String, bytes: usize },
    /// `user`'s uploads let go of `bytes`.
    ReleaseUpload { user: String, bytes: usize },
    /// Card `prompt_id` is on this phone: an answer from another device is refused.
    CardShown { prompt_id: String },
    /// Card `prompt_id` is answered, withdrawn or lapsed.
    CardClosed { prompt_id: String },
    /// Find which device card `prompt_id` was shown to, for [`Core::handle_card_owner`].
    WhoseCard { prompt_id: String },
    /// Write a file for the agent into the inbox and hand where to
    /// [`Core::handle_file_saved`].
    SaveFile(Box<SaveFile>),
    /// Push a `deliver` the phone sent on connection `conn` to the device it names,
    /// after checking that device is `owner`'s when there is one; the outcome goes to
    /// [`Core::handle_delivered`].
    Deliver {
        conn: u64,
        deliver: Box<proto::Deliver>,
        owner: Option<String>,
    },
    /// Keep this push subscription for the phone (replacing any), then
    /// [`Core::handle_push_stored`].
    SavePush(Box<Subscription>),
    /// Drop the phone's push subscription, then [`Core::handle_push_stored`].
    RemovePush,
    /// The app came into sight, or went out of it (or its connection went).
    Visible(bool),
    /// Something worth a notification happened while the app was away: send it if none
    /// of the user's apps is in sight.
    Notify(Box<Note>),
    /// Read a file and send it in `media` frames, through [`Core::start_file`].
    SendFile {
        kind: proto::MediaKindDown,
        path: PathBuf,
        caption: Option<String>,
        /// The call to answer once it is sent (or could not be).
        call: CallId,
    },
}

/// A file for the agent, to write.
#[derive(Debug)]
pub struct SaveFile {
    pub message_id: String,
    pub extension: String,
    pub parts: Vec<Vec<u8>>,
    pub saved: Saved,
}

/// What a saved file becomes for the agent.
#[derive(Debug)]
pub enum Saved {
    Voice {
        duration_ms: u32,
        transcript: Option<String>,
    },
    Media {
        kind: MediaKind,
        mime: Option<String>,
        caption: Option<String>,
    },
}

/// Work for the agent, kept in order while the authorizer is asked.
pub(super) enum Held {
    Forward {
        message_id: String,
        body: InboundBody,
    },
    Voice(Box<proto::Audio>),
    Upload(Box<Upload>),
    /// A push subscription, kept only for an allowed user.
    Subscribe(Box<Subscription>),
}

/// What an unpaired user sent, kept in memory (never on disk) until the owner approves
/// them, so the message that got the pairing code is not lost; only text is kept (a
/// voice message or file is sent again once paired), and only until `until`.
struct AwaitingPairing {
    texts: VecDeque<Held>,
    until: Instant,
}

/// A card waiting for its answer.
pub(super) struct OpenCard {
    pub card: PromptCard,
    pub expires: Instant,
}

/// A phone's session: everything about its conversation that outlives a frame.
pub struct Core {
    pub(super) device_id: String,
    /// The longest text a message carries; longer text goes in chunks.
    pub(super) max_message_chars: usize,
    pub(super) ids: Ids,
    pub(super) conn: Option<u64>,
    /// When the current connection is pinged, and when its silence ends it.
    keepalive: Option<Keepalive>,
    /// The app is in sight (it says so with `visibility`; it is, once connected).
    pub(super) visible: bool,
    /// Push endpoints on private addresses are allowed (the owner's own push service).
    pub(super) private_push: bool,
    /// Where the current connection may push with `deliver`.
    pub(super) delivers: Delivers,
    /// A push (`deliver`) is on its way: the phone's next frames wait for its answer.
    pub(super) pushing: bool,
    /// The user who owns this phone (from its token); kept across connections.
    pub(super) user_id: String,
    pub(super) user_name: Option<String>,
    pub(super) seen: SeenIds,
    pub(super) uploads: Uploads,
    pub(super) cards: HashMap<String, OpenCard>,
    pub(super) turn: Option<String>,
    /// The turn has shown a reply, so the avatar is speaking.
    pub(super) speaking: bool,
    pub(super) idle_at: Option<Instant>,
    /// The open turn's agent has been quiet since then (the turn's start, its last call,
    /// or the last answer to a question); no quiet counts while a question is open.
    pub(super) quiet_since: Option<Instant>,
    /// A turn the agent leaves quiet this long is ended here, as failed.
    turn_timeout: Duration,
    held: VecDeque<Held>,
    /// The user was refused and told how to pair; cleared when they are approved.
    awaiting_pairing: Option<AwaitingPairing>,
    out: Output<Effect>,
}

impl Core {
    /// The session of phone `device_id`, with messages of at most `max_message_chars`
    /// and ids from `ids`.
    pub fn new(device_id: String, max_message_chars: usize, ids: Ids) -> Core {
        let uploads = Uploads::new(limits::MAX_MEDIA_BYTES);
        Core {
            device_id,
            max_message_chars,
            ids,
            conn: None,
            keepalive: None,
            visible: false,
            private_push: false,
            delivers: Delivers::Nowhere,
            pushing: false,
            user_id: String::new(),
            user_name: None,
            seen: SeenIds::default(),
            uploads,
            cards: HashMap::new(),
            turn: None,
            speaking: false,
            idle_at: None,
            quiet_since: None,
            turn_timeout: TURN_TIMEOUT,
            held: VecDeque::new(),
            awaiting_pairing: None,
            out: Output::default(),
        }
    }

    // ---- connections ----

    /// A connection passed `hello`; it replaces any other. It may `deliver` as
    /// `delivers` says.
    pub fn handle_attach(
        &mut self,
        conn: u64,
        user_id: String,
        user_name: Option<String>,
        delivers: Delivers,
        now: Instant,
    ) {
        self.close(Close::Normal, "replaced by a new connection");
        self.conn = Some(conn);
        self.keepalive = Some(Keepalive::new(now));
        self.visible = true;
        self.delivers = delivers;
        if self.user_id != user_id {
            // What is held counts against the user it came from.
            self.uploads.clear();
            self.release_uploads();
        }
        self.user_id = user_id;
        self.user_name = user_name;
        self.out.effects.push(Effect::Online { conn });
        self.out.effects.push(Effect::Replay);
    }

    /// The session ends: its cards are no longer anyone's, and nothing is held.
    pub fn end(&mut self) {
        self.handle_closed();
        for prompt_id in std::mem::take(&mut self.cards).into_keys() {
            self.out.effects.push(Effect::CardClosed { prompt_id });
        }
    }

    /// Give back to the budget what the uploads let go.
    pub(super) fn release_uploads(&mut self) {
        let bytes = self.uploads.take_released();
        if bytes > 0 {
            let user = self.user_id.clone();
            self.out.effects.push(Effect::ReleaseUpload { user, bytes });
        }
    }

    // ---- time ----

    /// Allow push endpoints on private and loopback addresses (and plain http there).
    pub fn allow_private_push(mut self, allow: bool) -> Self {
        self.private_push = allow;
        self
    }

    /// The agent is at work on the open turn as of `now`: its quiet starts over.
    pub(super) fn agent_heard_from(&mut self, now: Instant) {
        if self.quiet_since.is_some() {
            self.quiet_since = Some(now);
        }
    }

    /// When the open turn ends as failed if the agent stays quiet: never while a
    /// question waits for the person's answer.
    fn turn_deadline(&self) -> Option<Instant> {
        let since = self.quiet_since.filter(|_| self.cards.is_empty())?;
        Some(since + self.turn_timeout)
    }

    /// A turn the agent leaves quiet for `timeout` is ended as failed (default
    /// [`TURN_TIMEOUT`]).
    pub fn turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = timeout;
        self
    }

    /// Whether the shell should read the phone's next frame now. Not while a push
    /// (`deliver`) is on its way: its answer comes from another device's session, and
    /// the phone hears the answers to its frames in the order it sent them (a sender
    /// that follows its pushes with a `ping` knows every push before the `pong`
    /// succeeded). The frames wait in the socket meanwhile; a push takes as long as
    /// one write to the device it goes to, at most.
    pub fn reads_frames(&self) -> bool {
        !self.pushing
    }

    /// How keeping or dropping the push subscription went.
    pub fn handle_push_stored(&mut self, subscribed: bool, stored: Result<(), Failed>) {
        let frame = match (stored, subscribed) {
            (Ok(()), true) => ServerFrame::PushSubscribed,
            (Ok(()), false) => ServerFrame::PushUnsubscribed,
            (Err(Failed), true) => ServerFrame::error(
                ErrorCode::Internal,
                "the server could not keep the subscription",
            ),
            (Err(Failed), false) => ServerFrame::error(
                ErrorCode::Internal,
                "the server could not drop the subscription",
            ),
        };
        let _ = self.emit(&frame);
    }

    /// Whether the app is away: not connected, or out of sight.
    fn away(&self) -> bool {
        self.conn.is_none() || !self.visible
    }

    /// `note`, for the shell to send, when the app is away.
    pub(super) fn note_away(&mut self, note: Note) {
        if self.away() {
            self.out.effects.push(Effect::Notify(Box::new(note)));
        }
    }

    /// A whole message `text` (`message_id`): a reply in a turn, else a delivery.
    pub(super) fn note_message(&mut self, message_id: &str, text: &str) {
        let (kind, title) = match self.turn {
            Some(_) => (NoteKind::Reply, "Reply"),
            None => (NoteKind::Deliver, "Message"),
        };
        self.note_away(Note {
            kind,
            title: title.to_owned(),
            body: text.to_owned(),
            tag: format!("m-{message_id}"),
            device: self.device_id.clone(),
            message_id: Some(message_id.to_owned()),
            prompt_id: None,
            options: Vec::new(),
        });
    }

    /// The user this phone belongs to (empty before its first connection).
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The phone is alive: it sent something (a pong among it), or took what was sent.
    pub fn heard(&mut self, now: Instant) {
        if let Some(keepalive) = &mut self.keepalive {
            keepalive.heard(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .cards
            .iter()
            .filter(|(_, c)| c.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.cards.remove(&id);
            self.agent_heard_from(now);
            self.out.effects.push(Effect::CardClosed {
                prompt_id: id.clone(),
            });
            let done = ServerFrame::PromptDone {
                prompt_id: id,
                option_id: None,
                expired: true,
            };
            let _ = self.emit(&done);
        }
        if self
            .awaiting_pairing
            .as_ref()
            .is_some_and(|a| a.until <= now)
        {
            self.awaiting_pairing = None;
            self.tell(
                "The pairing code has expired and what you sent was not delivered. \
                 Send a message to get a new code.",
            );
        }
        if self.turn_deadline().is_some_and(|at| at <= now) {
            warn!(device = %self.device_id, "the agent was silent for the turn timeout: ending the turn as failed");
            let given_up = self.turn.clone().and_then(|t| TurnId::try_from(t).ok());
            if let Err(err) = self.turn_over(true, now) {
                tracing::debug!(device = %self.device_id, %err, "the failed turn not shown");
            }
            // The agent hears it too, so it can stop working on the turn.
            if let Some(turn_id) = given_up {
                let id = self.ids.hex(12);
                self.hand_over(id, InboundBody::TurnTimedOut { turn_id });
            }
        }
        if self.idle_at.is_some_and(|at| at <= now) {
            self.idle_at = None;
            let _ = self.emit(&ServerFrame::Avatar {
                state: AvatarState::Idle,
            });
        }
        // Last: what came due is sent before a silent phone's connection is let go.
        self.keep_alive(now);
    }

    // ---- frames ----

    /// The phone's chat, as the agent knows it.
    pub fn chat(&self) -> Chat {
        Chat::mobile(self.device_id.clone())
    }

    pub(super) fn effect(&mut self, effect: Effect) {
        self.out.effects.push(effect);
    }

    pub(super) fn answer(&mut self, call: CallId, answer: Result<Response, RequestError>) {
        self.out.effects.push(Effect::Answer { call, answer });
    }

    /// Send a frame now, or keep it for later while a turn runs and the phone is away.
    pub fn emit(&mut self, frame: &ServerFrame) -> Result<(), DeliveryError> {
        match self.conn {
            Some(conn) => {
                self.out.transmits.push(Transmit {
                    conn,
                    frame: Frame::Text(frame.encode()),
                });
                Ok(())
            }
            None if self.turn.is_some() => {
                // Kept in the store: a restart in the meantime loses nothing.
                self.out.effects.push(Effect::Keep(frame.encode()));
                Ok(())
            }
            None => Err(DeliveryError::Offline(self.chat())),
        }
    }

    pub(super) fn error(&mut self, code: ErrorCode, message: impl Into<String>) {
        self.out
            .effects
            .push(Effect::Count(Counted::Error(code.as_str())));
        let _ = self.emit(&ServerFrame::error(code, message));
    }

    /// An error for connection `conn` alone, if it is still the phone's: never kept
    /// for a later connection, as it answers something that one did not send.
    pub(super) fn error_to(&mut self, conn: u64, code: ErrorCode, message: String) {
        if self.conn != Some(conn) {
            return;
        }
        self.out
            .effects
            .push(Effect::Count(Counted::Error(code.as_str())));
        let frame = Frame::Text(ServerFrame::error(code, message).encode());
        self.out.transmits.push(Transmit { conn, frame });
    }

    // ---- authorization ----

    /// Send `work` on to the agent once the user is known to be allowed, behind any
    /// work that already waits for the answer.
    pub(super) fn for_agent(&mut self, work: Held) {
        if self.held.len() >= MAX_HELD {
            self.error(
                ErrorCode::RateLimited,
                "too many messages at once; try again shortly",
            );
            return;
        }
        let ask = self.held.is_empty();
        self.held.push_back(work);
        if ask {
            self.out.effects.push(Effect::Authorize {
                user_id: self.user_id.clone(),
            });
        }
    }

    /// The authorizer's answer for the work waiting on it.
    pub fn handle_authorization(&mut self, answer: Result<bool, AccessError>, now: Instant) {
        let held = std::mem::take(&mut self.held);
        match answer {
            Ok(true) => {
                // Approved before the news of it came: what was kept goes first.
                self.paired(now);
                held.into_iter().for_each(|work| self.admit(work, now));
            }
            // Told how to pair; their text waits in memory for the approval.
            Ok(false) => {
                for work in held {
                    if matches!(work, Held::Subscribe(_)) {
                        let message = "notifications are for a paired app: pair it first";
                        self.error(ErrorCode::Forbidden, message);
                        continue;
                    }
                    let awaiting = self.awaiting_pairing.get_or_insert(AwaitingPairing {
                        texts: VecDeque::new(),
                        until: now + KEEP_UNTIL_PAIRED,
                    });
                    let text = matches!(
                        &work,
                        Held::Forward {
                            body: InboundBody::Text { .. },
                            ..
                        }
                    );
                    if text && awaiting.texts.len() < MAX_HELD {
                        awaiting.texts.push_back(work);
                    }
                }
                self.out.effects.push(Effect::AskPairingCode {
                    user_id: self.user_id.clone(),
                    user_name: self.user_name.clone(),
                });
            }
            Err(err) => {
                warn!(%err, "authorization failed");
                self.error(ErrorCode::Internal, "authorization is unavailable");
            }
        }
    }

    pub fn handle_pairing_code(&mut self, code: Result<PairingCode, AccessError>) {
        let text = match code {
            Ok(PairingCode { code, command }) => format!(
                "This app is not paired with the agent yet: what you write reaches it once the owner \
                 approves (send voice messages and files again then).\nPairing code: {code}\n\
                 Ask the owner to run: {command}"
            ),
            Err(err) => {
                warn!(%err, "could not create a pairing code");
                "This app is not paired with the agent yet, and no pairing code could be made."
                    .to_owned()
            }
        };
        self.tell(&text);
    }

    /// The owner approved `user_id`: if that is this phone's user, the phone hears it at
    /// once, and what it sent while unpaired goes to the agent, in order.
    pub fn handle_approved(&mut self, user_id: &str, now: Instant) {
        if user_id == self.user_id {
            self.paired(now);
        }
    }

    fn paired(&mut self, now: Instant) {
        let Some(awaiting) = self.awaiting_pairing.take() else {
            return;
        };
        self.tell("This app is now paired with the agent.");
        if awaiting.until > now {
            awaiting
                .texts
                .into_iter()
                .for_each(|work| self.admit(work, now));
        }
    }

    /// A message from Herald itself, not the agent.
    fn tell(&mut self, text: &str) {
        let message = ServerFrame::Message(proto::Message {
            id: self.ids.hex(12),
            text: text.to_owned(),
            chunk: None,
            final_: true,
            edit: false,
            reply_to: None,
        });
        let _ = self.emit(&message);
    }

    /// Hand an event to the agent in order; the user is known to be authorized.
    pub(super) fn hand_over(&mut self, message_id: String, body: InboundBody) {
        let inbound = Inbound {
            source: Source {
                chat: self.chat(),
                user_id: self.user_id.clone(),
                user_name: self.user_name.clone(),
            },
            message_id,
            body,
            profile: None,
        };
        self.out.effects.push(Effect::ToAgent(Box::new(inbound)));
    }
}

impl Core {
    /// Ping the phone on schedule; one silent for too long is gone.
    fn keep_alive(&mut self, now: Instant) {
        let (Some(conn), Some(keepalive)) = (self.conn, &mut self.keepalive) else {
            return;
        };
        if keepalive.deadline() > now {
            return;
        }
        match keepalive.handle_deadline(now) {
            Due::Ping => self.out.transmits.push(Transmit {
                conn,
                frame: Frame::Ping,
            }),
            Due::Gone => self.close(Close::Away, "keepalive timeout"),
        }
    }
}

impl SessionCore for Core {
    type Effect = Effect;

    fn current_conn(&self) -> Option<u64> {
        self.conn
    }

    /// The phone is told to slow down.
    fn handle_agent_full(&mut self) {
        self.error(
            ErrorCode::RateLimited,
            "too many messages at once; try again shortly",
        );
    }

    fn device_id(&self) -> &str {
        &self.device_id
    }

    fn output(&mut self) -> &mut Output<Effect> {
        &mut self.out
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let cards = self.cards.values().map(|c| c.expires).min();
        let pairing = self.awaiting_pairing.as_ref().map(|a| a.until);
        let keepalive = self.keepalive.as_ref().map(Keepalive::deadline);
        [
            cards,
            self.idle_at,
            pairing,
            keepalive,
            self.turn_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Nothing open: no connection, turn, card, avatar change or authorizer question.
    fn is_idle(&self) -> bool {
        self.conn.is_none()
            && self.turn.is_none()
            && self.cards.is_empty()
            && self.idle_at.is_none()
            && self.held.is_empty()
            && self.awaiting_pairing.is_none()
    }

    fn is_current(&self, conn: u64) -> bool {
        self.conn == Some(conn)
    }

    /// The connection ended on its own (closed, failed or timed out).
    fn handle_closed(&mut self) {
        self.keepalive = None;
        self.visible = false;
        if self.conn.take().is_some() {
            self.out.effects.push(Effect::Offline);
            // Unfinished uploads are not resumed across connections.
            self.uploads.clear();
            self.release_uploads();
        }
    }
}
