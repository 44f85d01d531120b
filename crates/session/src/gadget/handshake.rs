//! hello → challenge → auth as a state machine: [`Handshake`].
//!
//! It proves that a device holds the key its id is derived from, enrolls a device on
//! first contact (trust on first use) and says whether it is paired. What only the
//! hub knows (whether the peer's address is locked out, the keys of enrolled devices,
//! places in the waiting room) and what only the shell can do (the store, the
//! authorizer) are [`Effect`]s, answered through the `handle_*` methods. Each step
//! the device must take has [`STEP_TIMEOUT`] to arrive.
//!
//! The device hears the challenge, or why it was refused, through
//! [`Handshake::poll_frame`]; the shell learns the end through
//! [`Handshake::outcome`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use herald_gadget_proto::limits::{self, KEY_LEN};
use herald_gadget_proto::{auth, Challenge, DeviceMessage, ErrorCode, Hello, ServerMessage};

use crate::io::{Close, Frame, Queue};
use crate::Ids;

/// How long the device has to send each message the handshake waits for.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(limits::HANDSHAKE_TIMEOUT_SECS);

/// What a handshake needs to know of an enrolled device; the hub keeps one for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The key the device proved it holds at enrollment.
    pub key: [u8; KEY_LEN],
    /// [`fingerprint`] of the name, board and firmware the store holds.
    pub profile: u64,
}

/// A number that changes when a device's name, board or firmware does, so a returning
/// device whose `hello` says what the store holds costs no profile write. Stable for
/// as long as the process runs, not across builds.
pub fn fingerprint(
    name: &Option<String>,
    board: &Option<String>,
    firmware: &Option<String>,
) -> u64 {
    let mut hasher = DefaultHasher::new();
    (name, board, firmware).hash(&mut hasher);
    hasher.finish()
}

/// How a first contact's key fared in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enrollment {
    /// The key was stored.
    Enrolled,
    /// The same key was already stored (a retried first contact).
    AlreadyEnrolled,
    /// Another key holds this id.
    Conflict,
}

/// The shell could not find out what an effect asked (the store or the authorizer
/// failed; the shell logs why). The device is told to come back later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unchecked;

/// What the handshake asks of its shell. Each, but [`Effect::Seen`], waits for its
/// answer; [`Handshake::hello`] has the device's `hello` for those that need it.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect {
    /// Whether the peer's address is locked out after failed attempts, and what the
    /// hub knows of the device: answer with [`Handshake::handle_checked`].
    Check,
    /// A device never seen before needs a place in the waiting room, held until the
    /// handshake ends: answer with [`Handshake::handle_reserved`].
    Reserve,
    /// Store the first contact's key and profile: answer with
    /// [`Handshake::handle_enrolled`].
    Enroll { key: [u8; KEY_LEN] },
    /// Record that the device was seen; its profile is the one stored.
    Seen,
    /// Store the device's changed profile (it holds `key`): answer with
    /// [`Handshake::handle_touched`].
    Touch { key: [u8; KEY_LEN] },
    /// Whether the device is paired: answer with [`Handshake::handle_authorized`].
    Authorize,
}

/// A device that proved its identity.
#[derive(Debug)]
pub struct Admitted {
    pub hello: Hello,
    pub paired: bool,
    /// The id of the session this connection starts, for `welcome`.
    pub session_id: String,
}

/// Why a device was not admitted; it heard this as an error frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    /// A wrong token or a failed proof counts toward locking the address out.
    pub fn counts_as_failed_attempt(&self) -> bool {
        matches!(self.code, ErrorCode::BadToken | ErrorCode::AuthFailed)
    }
}

/// How a handshake ended.
#[derive(Debug)]
pub enum Outcome {
    Admitted(Box<Admitted>),
    Refused(Refusal),
}

/// One connection's handshake, from its first frame to its outcome.
pub struct Handshake<'a> {
    /// The host's access token, when it has one.
    access_token: Option<&'a str>,
    ids: Ids,
    step: Step,
    /// When the message the step waits for is late.
    deadline: Option<Instant>,
    frames: Queue<Frame>,
    effects: Queue<Effect>,
    outcome: Option<Outcome>,
}

enum Step {
    Hello,
    Checking(Box<Hello>),
    Reserving(Box<Hello>),
    Auth {
        hello: Box<Hello>,
        nonce: String,
        known: Option<Known>,
    },
    Enrolling {
        hello: Box<Hello>,
        key: [u8; KEY_LEN],
    },
    Touching(Box<Hello>),
    Authorizing(Box<Hello>),
    Over,
}

impl<'a> Handshake<'a> {
    /// A handshake on a connection opened at `now`; devices must present
    /// `access_token` when there is one.
    pub fn new(access_token: Option<&'a str>, ids: Ids, now: Instant) -> Handshake<'a> {
        Handshake {
            access_token,
            ids,
            step: Step::Hello,
            deadline: Some(now + STEP_TIMEOUT),
            frames: Queue::default(),
            effects: Queue::default(),
            outcome: None,
        }
    }

    /// The next frame for the device; after [`Frame::Close`] nothing follows.
    pub fn poll_frame(&mut self) -> Option<Frame> {
        self.frames.pop()
    }

    /// The next effect for the shell.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop()
    }

    /// When [`Handshake::handle_timeout`] is due: only while the device is to speak.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// How it ended, once it has (taken once).
    pub fn outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    /// The device's `hello`, from its arrival until the end.
    pub fn hello(&self) -> Option<&Hello> {
        match &self.step {
            Step::Checking(hello)
            | Step::Reserving(hello)
            | Step::Auth { hello, .. }
            | Step::Enrolling { hello, .. }
            | Step::Touching(hello)
            | Step::Authorizing(hello) => Some(hello),
            Step::Hello | Step::Over => None,
        }
    }

    /// A text message from the device.
    pub fn handle_message(&mut self, msg: DeviceMessage) {
        match (std::mem::replace(&mut self.step, Step::Over), msg) {
            (Step::Hello, DeviceMessage::Hello(hello)) => self.hello_arrived(hello),
            (Step::Hello, _) => self.refuse_protocol("the first message must be hello"),
            (
                Step::Auth {
                    hello,
                    nonce,
                    known,
                },
                DeviceMessage::Auth(proof),
            ) => {
                self.deadline = None;
                let profile = fingerprint(&hello.name, &hello.board, &hello.firmware);
                match known {
                    Some(known) => {
                        let proved = proof.mac.as_deref().is_some_and(|mac| {
                            auth::verify_auth_mac(&known.key, &hello.device_id, &nonce, mac)
                        });
                        if !proved {
                            return self.refuse_auth();
                        }
                        if hello.sensors.is_empty() && known.profile == profile {
                            self.effects.push(Effect::Seen);
                            self.authorize(hello);
                        } else {
                            self.effects.push(Effect::Touch { key: known.key });
                            self.step = Step::Touching(hello);
                        }
                    }
                    None => {
                        let key = proof.key.as_deref().and_then(|k| auth::decode_key(k).ok());
                        match key {
                            Some(key) if auth::device_id(&key) == hello.device_id => {
                                self.effects.push(Effect::Enroll { key });
                                self.step = Step::Enrolling { hello, key };
                            }
                            _ => self.refuse_auth(),
                        }
                    }
                }
            }
            (Step::Auth { .. }, _) => self.refuse_protocol("expected auth"),
            // Nothing is read while the shell works on an effect.
            (step, _) => self.step = step,
        }
    }

    /// A text frame that is not a message.
    pub fn handle_bad_frame(&mut self, reason: String) {
        if self.is_waiting_for_device() {
            self.refuse(ErrorCode::Protocol, reason);
        }
    }

    /// A binary frame: the handshake is text only.
    pub fn handle_binary(&mut self) {
        let what = match self.step {
            Step::Hello => "hello",
            Step::Auth { .. } => "auth",
            _ => return,
        };
        self.refuse_protocol(format!("expected {what}, got a binary frame"));
    }

    /// The deadline from [`Handshake::poll_timeout`] may have passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_none_or(|at| now < at) {
            return;
        }
        let what = match self.step {
            Step::Hello => "hello",
            Step::Auth { .. } => "auth",
            _ => return,
        };
        self.refuse(ErrorCode::Timeout, format!("no {what} in time"));
    }

    /// The answer to [`Effect::Check`].
    pub fn handle_checked(&mut self, locked_out: bool, known: Option<Known>, now: Instant) {
        let Step::Checking(hello) = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        if locked_out {
            return self.refuse(
                ErrorCode::Busy,
                "too many failed attempts from this address; try again in a minute",
            );
        }
        if let Some(expected) = self.access_token {
            let offered = hello.token.as_deref().unwrap_or("");
            if !auth::ct_eq(offered.as_bytes(), expected.as_bytes()) {
                return self.refuse(ErrorCode::BadToken, "wrong access token");
            }
        }
        match known {
            Some(known) => self.challenge(hello, Some(known), now),
            None => {
                self.effects.push(Effect::Reserve);
                self.step = Step::Reserving(hello);
            }
        }
    }

    /// The answer to [`Effect::Reserve`]: whether the waiting room had a place.
    pub fn handle_reserved(&mut self, reserved: bool, now: Instant) {
        let Step::Reserving(hello) = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        if !reserved {
            return self.refuse(
                ErrorCode::Busy,
                "too many devices are waiting for pairing; approve or forget some",
            );
        }
        self.challenge(hello, None, now);
    }

    /// The answer to [`Effect::Enroll`].
    pub fn handle_enrolled(&mut self, enrolled: Result<Enrollment, Unchecked>) {
        let Step::Enrolling { hello, key } = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        match enrolled {
            Ok(Enrollment::Enrolled) => self.authorize(hello),
            // A retried first contact may come with a new name: store what it says now.
            Ok(Enrollment::AlreadyEnrolled) => {
                self.effects.push(Effect::Touch { key });
                self.step = Step::Touching(hello);
            }
            Ok(Enrollment::Conflict) => self.refuse_auth(),
            Err(Unchecked) => self.refuse_unchecked(),
        }
    }

    /// The answer to [`Effect::Touch`].
    pub fn handle_touched(&mut self, touched: Result<(), Unchecked>) {
        let Step::Touching(hello) = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        match touched {
            Ok(()) => self.authorize(hello),
            Err(Unchecked) => self.refuse_unchecked(),
        }
    }

    /// The answer to [`Effect::Authorize`]: whether the device is paired.
    pub fn handle_authorized(&mut self, paired: Result<bool, Unchecked>) {
        let Step::Authorizing(hello) = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        let Ok(paired) = paired else {
            return self.refuse_unchecked();
        };
        let mut hello = *hello;
        // The session needs neither: the token was checked and the first readings
        // are in the store.
        hello.token = None;
        hello.sensors = Default::default();
        let admitted = Admitted {
            hello,
            paired,
            session_id: self.ids.hex(12),
        };
        self.outcome = Some(Outcome::Admitted(Box::new(admitted)));
    }

    fn is_waiting_for_device(&self) -> bool {
        matches!(self.step, Step::Hello | Step::Auth { .. })
    }

    fn hello_arrived(&mut self, mut hello: Hello) {
        if let Err(err) = hello.validate() {
            return self.refuse(err.code(), err.to_string());
        }
        clean_labels(&mut hello);
        self.deadline = None;
        self.effects.push(Effect::Check);
        self.step = Step::Checking(Box::new(hello));
    }

    fn challenge(&mut self, hello: Box<Hello>, known: Option<Known>, now: Instant) {
        let mut nonce = [0u8; 16];
        self.ids.fill(&mut nonce);
        let nonce = auth::b64(&nonce);
        let challenge = ServerMessage::Challenge(Challenge {
            nonce: nonce.clone(),
            enrolled: known.is_some(),
        });
        self.frames.push(Frame::Text(challenge.encode()));
        self.deadline = Some(now + STEP_TIMEOUT);
        self.step = Step::Auth {
            hello,
            nonce,
            known,
        };
    }

    fn authorize(&mut self, hello: Box<Hello>) {
        self.effects.push(Effect::Authorize);
        self.step = Step::Authorizing(hello);
    }

    fn refuse_protocol(&mut self, message: impl Into<String>) {
        self.refuse(ErrorCode::Protocol, message);
    }

    fn refuse_auth(&mut self) {
        self.refuse(ErrorCode::AuthFailed, "authentication failed");
    }

    /// No code fits a server fault exactly; `busy` makes devices retry later.
    fn refuse_unchecked(&mut self) {
        self.refuse(ErrorCode::Busy, "the server could not check this device");
    }

    /// Tell the device why and close with 1008, as the handshake rules require.
    fn refuse(&mut self, code: ErrorCode, message: impl Into<String>) {
        let message = message.into();
        let error = ServerMessage::Error(herald_gadget_proto::Error {
            code,
            message: message.clone(),
        });
        self.frames.push(Frame::Text(error.encode()));
        self.frames
            .push(Frame::Close(Close::Policy, code.as_str().to_owned()));
        self.step = Step::Over;
        self.deadline = None;
        self.outcome = Some(Outcome::Refused(Refusal { code, message }));
    }
}

/// What the device calls itself goes to the store, pairing requests, the agent and
/// the owner's terminal: cleaned once, here, for all of them.
fn clean_labels(hello: &mut Hello) {
    hello.name = herald_labels::clean_opt(hello.name.as_deref(), limits::MAX_NAME);
    hello.board = herald_labels::clean_opt(hello.board.as_deref(), limits::MAX_BOARD);
    hello.firmware = herald_labels::clean_opt(hello.firmware.as_deref(), limits::MAX_FIRMWARE);
}

#[cfg(test)]
mod tests;
