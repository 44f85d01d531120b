//! `hello` → `ready` as a state machine: [`Admission`].
//!
//! Who is connecting, and may they? The decision, in the order the protocol fixes: an
//! address locked out after failed attempts, a wrong or missing token, a device outside
//! the allowed list, a device id another user owns (or one too many for the user).
//! Each refusal is an `error` frame and a close that says whether to try again (1008:
//! never, 1011: the server failed, 1013: later). Whether the user may talk to the
//! agent is decided later, on every message.
//!
//! What only the hub knows (the address's failed attempts) and what only the shell can
//! do (the store) are [`Effect`]s, answered through the `handle_*` methods; the tokens
//! and the allowed devices are the [`Rules`] it is made with. The phone has
//! [`HELLO_TIMEOUT`] for its `hello`.

use std::time::{Duration, Instant};

use herald_mobile_proto::{self as proto, ClientFrame, ErrorCode, ServerFrame, TokenSet};

use crate::io::{Close, Frame, Queue};

/// How long a phone has to send its `hello`.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What admission checks a `hello` against.
pub struct Rules<'a> {
    /// App tokens: each stands for a user.
    pub tokens: &'a TokenSet,
    /// Tokens that may only deliver (and ping).
    pub deliver_tokens: &'a TokenSet,
    /// When not empty, the only device ids let in.
    pub allowed_devices: &'a [String],
}

/// What the connection may do, decided by its token at `hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// An app: a user's phone, with a session.
    Phone { user_id: String },
    /// A deliver token's holder: it may only `deliver` (and `ping`).
    Deliverer,
}

/// How the store answered the claim of a device id for a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The id is the user's (now or already).
    Mine,
    /// Another user holds the id.
    OwnedByAnother,
    /// The user holds as many phones as allowed (`most`); one unseen for `unseen_days`
    /// makes room.
    TooMany { most: usize, unseen_days: i64 },
}

/// The store failed; the shell logs why. The phone is told to try later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFailed;

/// What admission asks of its shell; each waits for its answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect {
    /// Whether the peer's address is locked out after failed attempts: answer with
    /// [`Admission::handle_checked`].
    Check,
    /// Claim the `hello`'s device id for `user_id` (recording the device's name and
    /// platform): answer with [`Admission::handle_claimed`].
    Claim { user_id: String },
}

/// A phone let in.
#[derive(Debug)]
pub struct Admitted {
    pub hello: proto::Hello,
    pub role: Role,
}

/// Why a phone was not let in; it heard this as an error frame and a close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    /// A wrong token counts toward locking the address out.
    pub fn counts_as_failed_attempt(&self) -> bool {
        self.code == ErrorCode::AuthFailed
    }

    /// The close it comes with: a fault of the server's or a throttle that ends in a
    /// minute are worth a later try; the rest is for good.
    pub fn close(&self) -> Close {
        match self.code {
            ErrorCode::Internal => Close::Error,
            ErrorCode::RateLimited => Close::Again,
            _ => Close::Policy,
        }
    }
}

/// How admission ended.
#[derive(Debug)]
pub enum Outcome {
    Admitted(Box<Admitted>),
    Refused(Refusal),
}

/// One connection's admission, from its first frame to its outcome.
pub struct Admission<'a> {
    rules: Rules<'a>,
    step: Step,
    /// When the `hello` is late.
    deadline: Option<Instant>,
    frames: Queue<Frame>,
    effects: Queue<Effect>,
    outcome: Option<Outcome>,
}

enum Step {
    Hello,
    Checking(Box<proto::Hello>),
    Claiming {
        hello: Box<proto::Hello>,
        user_id: String,
    },
    Over,
}

impl<'a> Admission<'a> {
    /// Admission for a connection opened at `now`.
    pub fn new(rules: Rules<'a>, now: Instant) -> Admission<'a> {
        Admission {
            rules,
            step: Step::Hello,
            deadline: Some(now + HELLO_TIMEOUT),
            frames: Queue::default(),
            effects: Queue::default(),
            outcome: None,
        }
    }

    /// The next frame for the phone; after [`Frame::Close`] nothing follows.
    pub fn poll_frame(&mut self) -> Option<Frame> {
        self.frames.pop()
    }

    /// The next effect for the shell.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop()
    }

    /// When [`Admission::handle_timeout`] is due: only while the phone is to speak.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// How it ended, once it has (taken once).
    pub fn outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    /// The phone's `hello`, from its arrival until the end.
    pub fn hello(&self) -> Option<&proto::Hello> {
        match &self.step {
            Step::Checking(hello) | Step::Claiming { hello, .. } => Some(hello),
            Step::Hello | Step::Over => None,
        }
    }

    /// A text message from the phone.
    pub fn handle_text(&mut self, text: &str) {
        if !matches!(self.step, Step::Hello) {
            return;
        }
        self.deadline = None;
        match ClientFrame::decode(text) {
            Ok(ClientFrame::Hello(hello)) => {
                self.step = Step::Checking(Box::new(hello));
                self.effects.push(Effect::Check);
            }
            Ok(_) | Err(proto::DecodeError::UnknownFrame(_)) => {
                self.refuse(ErrorCode::NotReady, "the first frame must be hello")
            }
            Err(err) => self.refuse(err.code(), &err.to_string()),
        }
    }

    /// A binary message from the phone.
    pub fn handle_binary(&mut self) {
        if matches!(self.step, Step::Hello) {
            self.refuse(ErrorCode::NotReady, "the first frame must be hello");
        }
    }

    /// The time is `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|at| now >= at) && matches!(self.step, Step::Hello) {
            self.refuse(ErrorCode::NotReady, "no hello in time");
        }
    }

    /// Whether the peer's address is locked out ([`Effect::Check`]).
    pub fn handle_checked(&mut self, locked_out: bool) {
        let Step::Checking(hello) = std::mem::replace(&mut self.step, Step::Over) else {
            return;
        };
        if locked_out {
            return self.refuse(
                ErrorCode::RateLimited,
                "too many failed attempts from this address; try again in a minute",
            );
        }
        let token = hello.token.as_deref().unwrap_or("");
        if self.rules.deliver_tokens.authenticate(token).is_some() {
            return self.admit(*hello, Role::Deliverer);
        }
        let Some(user_id) = self.rules.tokens.authenticate(token).map(str::to_owned) else {
            return self.refuse(ErrorCode::AuthFailed, "wrong or missing token");
        };
        let allowed = self.rules.allowed_devices;
        if !allowed.is_empty() && !allowed.contains(&hello.device.id) {
            return self.refuse(ErrorCode::AuthFailed, "this device is not allowed");
        }
        self.effects.push(Effect::Claim {
            user_id: user_id.clone(),
        });
        self.step = Step::Claiming { hello, user_id };
    }

    /// How the claim of the device id went ([`Effect::Claim`]).
    pub fn handle_claimed(&mut self, claim: Result<Claim, StoreFailed>) {
        let Step::Claiming { hello, user_id } = std::mem::replace(&mut self.step, Step::Over)
        else {
            return;
        };
        match claim {
            Ok(Claim::Mine) => self.admit(*hello, Role::Phone { user_id }),
            Ok(Claim::OwnedByAnother) => self.refuse(
                ErrorCode::Forbidden,
                "this device id belongs to another user",
            ),
            Ok(Claim::TooMany { most, unseen_days }) => self.refuse(
                ErrorCode::Forbidden,
                &format!(
                    "this user already has {most} devices; forget one (`herald forget ID`) \
                     or wait until one is unseen for {unseen_days} days"
                ),
            ),
            Err(StoreFailed) => self.refuse(
                ErrorCode::Internal,
                "the server could not check this device",
            ),
        }
    }

    fn admit(&mut self, hello: proto::Hello, role: Role) {
        self.step = Step::Over;
        self.outcome = Some(Outcome::Admitted(Box::new(Admitted { hello, role })));
    }

    fn refuse(&mut self, code: ErrorCode, message: &str) {
        self.step = Step::Over;
        self.deadline = None;
        let refusal = Refusal {
            code,
            message: message.to_owned(),
        };
        self.frames
            .push(Frame::Text(ServerFrame::error(code, message).encode()));
        self.frames
            .push(Frame::Close(refusal.close(), code.as_str().to_owned()));
        self.outcome = Some(Outcome::Refused(refusal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::start;

    const APP: &str = "an-app-token-long-enough-to-be-kept";
    const DELIVER: &str = "a-deliver-token-long-enough-as-well";

    struct Sets {
        tokens: TokenSet,
        deliver: TokenSet,
        allowed: Vec<String>,
    }

    fn sets(allowed: &[&str]) -> Sets {
        Sets {
            tokens: TokenSet::parse(None, Some(&format!("ann:{APP}"))).unwrap(),
            deliver: TokenSet::parse(None, Some(DELIVER)).unwrap(),
            allowed: allowed.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    fn admission(sets: &Sets, now: Instant) -> Admission<'_> {
        let rules = Rules {
            tokens: &sets.tokens,
            deliver_tokens: &sets.deliver,
            allowed_devices: &sets.allowed,
        };
        Admission::new(rules, now)
    }

    fn hello(token: &str, device: &str) -> String {
        serde_json::json!({"t": "hello", "token": token, "device": {"id": device, "name": "Ann's phone"}})
            .to_string()
    }

    /// The refusal it ended with, after checking the phone heard it and the close.
    fn refused(a: &mut Admission<'_>) -> Refusal {
        let Some(Outcome::Refused(refusal)) = a.outcome() else {
            panic!("not refused");
        };
        let Some(Frame::Text(error)) = a.poll_frame() else {
            panic!("no error frame");
        };
        assert!(error.contains(refusal.code.as_str()), "{error}");
        assert_eq!(
            a.poll_frame(),
            Some(Frame::Close(
                refusal.close(),
                refusal.code.as_str().to_owned()
            ))
        );
        assert_eq!(a.poll_frame(), None);
        refusal
    }

    #[test]
    fn an_app_token_admits_its_user_once_the_store_gives_the_device_id() {
        let sets = sets(&[]);
        let mut a = admission(&sets, start());
        a.handle_text(&hello(APP, "tel-1"));
        assert_eq!(a.poll_timeout(), None, "the hello came");
        assert_eq!(a.poll_effect(), Some(Effect::Check));
        a.handle_checked(false);
        assert_eq!(
            a.poll_effect(),
            Some(Effect::Claim {
                user_id: "ann".into()
            })
        );
        assert_eq!(a.hello().map(|h| h.device.id.as_str()), Some("tel-1"));
        assert!(a.outcome().is_none(), "not before the claim");
        a.handle_claimed(Ok(Claim::Mine));
        let Some(Outcome::Admitted(admitted)) = a.outcome() else {
            panic!("not admitted");
        };
        assert_eq!(
            admitted.role,
            Role::Phone {
                user_id: "ann".into()
            }
        );
        assert_eq!(a.poll_frame(), None, "ready is the shell's to say");
    }

    #[test]
    fn a_deliver_token_is_a_deliverer_and_claims_no_device() {
        let sets = sets(&["tel-1"]);
        let mut a = admission(&sets, start());
        a.handle_text(&hello(DELIVER, "cron"));
        a.poll_effect();
        a.handle_checked(false);
        assert_eq!(a.poll_effect(), None);
        assert!(matches!(a.outcome(), Some(Outcome::Admitted(ad)) if ad.role == Role::Deliverer));
    }

    #[test]
    fn each_refusal_in_the_order_the_protocol_fixes_with_its_close() {
        let sets = sets(&["tel-1"]);
        let checked = |token: &str, device: &str, locked_out: bool| {
            let mut a = admission(&sets, start());
            a.handle_text(&hello(token, device));
            a.poll_effect();
            a.handle_checked(locked_out);
            a
        };
        // A locked-out address hears so before its token is looked at.
        let r = refused(&mut checked(APP, "tel-1", true));
        assert_eq!((r.code, r.close()), (ErrorCode::RateLimited, Close::Again));
        let r = refused(&mut checked("wrong", "tel-1", false));
        assert_eq!((r.code, r.close()), (ErrorCode::AuthFailed, Close::Policy));
        assert!(r.counts_as_failed_attempt());
        let r = refused(&mut checked(APP, "tel-9", false));
        assert_eq!(r.message, "this device is not allowed");

        let claimed = |claim: Result<Claim, StoreFailed>| {
            let mut a = checked(APP, "tel-1", false);
            a.poll_effect();
            a.handle_claimed(claim);
            refused(&mut a)
        };
        let r = claimed(Ok(Claim::OwnedByAnother));
        assert_eq!((r.code, r.close()), (ErrorCode::Forbidden, Close::Policy));
        assert!(!r.counts_as_failed_attempt());
        let r = claimed(Ok(Claim::TooMany {
            most: 32,
            unseen_days: 30,
        }));
        assert!(
            r.message.contains("32 devices") && r.message.contains("30 days"),
            "{}",
            r.message
        );
        let r = claimed(Err(StoreFailed));
        assert_eq!((r.code, r.close()), (ErrorCode::Internal, Close::Error));
    }

    #[test]
    fn the_first_frame_is_a_hello_in_time() {
        let sets = sets(&[]);
        let start = start();
        let mut a = admission(&sets, start);
        assert_eq!(a.poll_timeout(), Some(start + HELLO_TIMEOUT));
        a.handle_timeout(start + HELLO_TIMEOUT - Duration::from_millis(1));
        assert!(a.outcome().is_none());
        a.handle_timeout(start + HELLO_TIMEOUT);
        assert_eq!(refused(&mut a).message, "no hello in time");

        for first in [r#"{"t":"ping"}"#, r#"{"t":"what"}"#] {
            let mut a = admission(&sets, start);
            a.handle_text(first);
            assert_eq!(refused(&mut a).code, ErrorCode::NotReady, "{first}");
        }
        let mut a = admission(&sets, start);
        a.handle_binary();
        assert_eq!(refused(&mut a).code, ErrorCode::NotReady);
        let mut a = admission(&sets, start);
        a.handle_text("{not json");
        let r = refused(&mut a);
        assert_eq!(r.close(), Close::Policy);
        assert_ne!(r.code, ErrorCode::NotReady);
        // After its end, nothing more happens.
        a.handle_text(&hello(APP, "tel-1"));
        assert_eq!((a.poll_effect(), a.poll_frame()), (None, None));
    }
}
