//! A phone connection's own rules: when it is pinged and when it counts as gone
//! ([`Keepalive`]), where it may push with `deliver` ([`Delivers`]) and what its sender
//! hears of a push ([`Delivered`]). The session's shell, or a deliver-only connection's
//! task, carries them out.

use std::time::{Duration, Instant};

use herald_mobile_proto::ErrorCode;
use herald_port::DeliveryError;

/// A WebSocket ping this often; a phone silent for three of them is gone.
pub const KEEPALIVE: Duration = Duration::from_secs(30);
/// Silence after which a phone is gone.
pub const DEAD_AFTER: Duration = Duration::from_secs(90);

/// When a connection is pinged, and when its silence ends it.
#[derive(Debug)]
pub struct Keepalive {
    last_heard: Instant,
    next_ping: Instant,
}

/// What is due at [`Keepalive::deadline`].
#[derive(Debug, PartialEq, Eq)]
pub enum Due {
    /// Send a WebSocket ping.
    Ping,
    /// Close the connection: the phone has been silent for [`DEAD_AFTER`].
    Gone,
}

impl Keepalive {
    /// A connection that opened at `now`.
    pub fn new(now: Instant) -> Self {
        Keepalive {
            last_heard: now,
            next_ping: now + KEEPALIVE,
        }
    }

    /// Anything arrived from the phone (a frame, a pong).
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }

    /// When [`Keepalive::handle_deadline`] has work.
    pub fn deadline(&self) -> Instant {
        self.next_ping
    }

    /// The deadline passed: ping on schedule, or the phone is gone.
    pub fn handle_deadline(&mut self, now: Instant) -> Due {
        if now.saturating_duration_since(self.last_heard) >= DEAD_AFTER {
            return Due::Gone;
        }
        // On the connection's schedule; a late wake-up does not ping twice.
        while self.next_ping <= now {
            self.next_ping += KEEPALIVE;
        }
        Due::Ping
    }
}

/// Where a connection may push with `deliver`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivers {
    /// To any phone: a `MOBILE_DELIVER_TOKENS` holder.
    Anywhere,
    /// Only to the devices of this user: an app on the agent's own machine.
    ToDevicesOf(String),
    /// Not at all.
    Nowhere,
}

impl Delivers {
    /// The rule: a deliver token (`user` is `None`) delivers anywhere; an app on
    /// loopback (cron on the agent's machine), unless the owner turned that off, only
    /// to its own user's devices; any other app not at all.
    pub fn of(user: Option<&str>, on_loopback: bool, from_loopback: bool) -> Delivers {
        match user {
            None => Delivers::Anywhere,
            Some(user) if on_loopback && from_loopback => Delivers::ToDevicesOf(user.into()),
            Some(_) => Delivers::Nowhere,
        }
    }
}

/// How a `deliver` ended.
#[derive(Debug)]
pub enum Delivered {
    Sent,
    /// The device is not one of the user's own.
    NotYours,
    Failed(DeliveryError),
}

impl Delivered {
    /// What the sender of a `deliver` to `to` hears: nothing, once it is sent.
    pub fn refusal(&self, to: &str) -> Option<(ErrorCode, String)> {
        match self {
            Delivered::Sent => None,
            Delivered::NotYours => Some((
                ErrorCode::Forbidden,
                format!("{to} is not a device of yours"),
            )),
            Delivered::Failed(DeliveryError::Offline(_)) => {
                Some((ErrorCode::DeviceOffline, format!("{to} is not connected")))
            }
            Delivered::Failed(err) => Some((ErrorCode::Internal, err.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phone_is_pinged_on_schedule_and_gone_after_ninety_silent_seconds() {
        let start = crate::testing::start();
        let mut alive = Keepalive::new(start);
        assert_eq!(alive.deadline(), start + KEEPALIVE);
        // It answers every ping: pinged every 30 s for an hour, never gone.
        for n in 1..=120u32 {
            let at = start + KEEPALIVE * n;
            assert_eq!(alive.deadline(), at);
            assert_eq!(alive.handle_deadline(at), Due::Ping);
            alive.heard(at + Duration::from_millis(40));
        }
        // Then silence: two more pings, and gone at the third deadline, 90 s after
        // it was last heard (and not a tick before).
        let heard = start + KEEPALIVE * 120 + Duration::from_millis(40);
        let first = alive.deadline();
        assert_eq!(alive.handle_deadline(first), Due::Ping);
        assert_eq!(alive.handle_deadline(alive.deadline()), Due::Ping);
        let third = alive.deadline();
        assert!(third < heard + DEAD_AFTER);
        assert_eq!(
            alive.handle_deadline(third),
            Due::Ping,
            "89.96 s of silence"
        );
        assert_eq!(alive.handle_deadline(heard + DEAD_AFTER), Due::Gone);
    }

    #[test]
    fn a_late_wake_up_pings_once_and_keeps_the_schedule() {
        let start = crate::testing::start();
        let mut alive = Keepalive::new(start);
        let late = start + KEEPALIVE * 2 + Duration::from_secs(1);
        alive.heard(late);
        assert_eq!(alive.handle_deadline(late), Due::Ping);
        assert_eq!(alive.deadline(), start + KEEPALIVE * 3);
    }

    #[test]
    fn delivering_needs_a_deliver_token_or_the_agents_own_machine() {
        assert_eq!(Delivers::of(None, false, false), Delivers::Anywhere);
        assert_eq!(
            Delivers::of(Some("ann"), true, true),
            Delivers::ToDevicesOf("ann".into())
        );
        assert_eq!(Delivers::of(Some("ann"), true, false), Delivers::Nowhere);
        assert_eq!(Delivers::of(Some("ann"), false, true), Delivers::Nowhere);
    }
}
