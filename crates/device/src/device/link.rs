//! The connection: boot, connect, handshake, heartbeat, reconnect backoff, and the
//! firmware probation that a `welcome` ends.
//!
//! Phases go Boot → Connecting → Handshake → Online, and any failure goes to Offline with
//! a retry deadline. The wait grows 1, 2, 4, 8, 15, 30 s and stays at 30 s; a session that
//! lasted 30 s or more starts the sequence over, so a device that was online for a while
//! comes back at once while a server that accepts and drops connections is not hammered.
//! A refusal that retrying cannot fix (`auth_failed`, `bad_token`, `protocol`) shows the
//! setup screen and waits the full 30 s.

use core::time::Duration;

use herald_gadget_proto::limits::{
    BACKOFF_RESET_AFTER_SECS, CONNECT_TIMEOUT_SECS, DEAD_AFTER_HEARTBEATS, DEFAULT_HEARTBEAT_SECS,
    HANDSHAKE_TIMEOUT_SECS, MAX_HEARTBEAT_SECS, MIN_HEARTBEAT_SECS, OTA_PROBATION_SECS,
    RECONNECT_BACKOFF_SECS,
};
use herald_gadget_proto::{Challenge, ErrorCode, Hello, Ping, Welcome, PROTO_VERSION};

use super::Device;
use crate::host::Host;
use crate::io::Action;
use crate::time::{due, earliest, secs, Instant};
use crate::view::Phase;

/// Close code for connections the device ends itself.
const CLOSE_NORMAL: u16 = 1000;

/// The reconnect backoff sequence.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    step: usize,
}

impl Backoff {
    /// The wait before the next attempt; each call moves one step up the sequence.
    pub(super) fn next(&mut self) -> Duration {
        let last = RECONNECT_BACKOFF_SECS.len() - 1;
        let wait = RECONNECT_BACKOFF_SECS[self.step.min(last)];
        self.step = (self.step + 1).min(last);
        secs(wait)
    }

    pub(super) fn reset(&mut self) {
        self.step = 0;
    }

    /// The longest wait, used after a refusal.
    fn longest() -> Duration {
        secs(RECONNECT_BACKOFF_SECS[RECONNECT_BACKOFF_SECS.len() - 1])
    }
}

/// `welcome.heartbeat_s` as the device uses it: clamped to 5..300 s.
pub(super) fn clamp_heartbeat(heartbeat_s: u32) -> Duration {
    secs(u64::from(
        heartbeat_s.clamp(MIN_HEARTBEAT_SECS, MAX_HEARTBEAT_SECS),
    ))
}

pub(super) fn default_heartbeat() -> Duration {
    clamp_heartbeat(DEFAULT_HEARTBEAT_SECS)
}

pub(super) fn probation_deadline(boot: Instant) -> Instant {
    boot + secs(OTA_PROBATION_SECS)
}

/// Refusals that retrying cannot fix: the owner has to act.
fn needs_setup(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::AuthFailed | ErrorCode::BadToken | ErrorCode::Protocol
    )
}

impl<H: Host> Device<H> {
    /// The server's `error` code that made the device show the setup screen.
    pub fn setup_needed(&self) -> Option<ErrorCode> {
        self.setup_needed
    }

    pub(super) fn link_deadline(&self) -> Option<Instant> {
        [
            self.boot_at,
            self.probation_until,
            self.retry_at,
            self.phase_deadline,
            self.dead_at(),
            self.next_ping,
        ]
        .into_iter()
        .fold(None, earliest)
    }

    fn dead_at(&self) -> Option<Instant> {
        (self.phase == Phase::Online)
            .then(|| self.last_inbound + self.heartbeat * DEAD_AFTER_HEARTBEATS)
    }

    pub(super) fn link_timers(&mut self, now: Instant) {
        if due(self.boot_at, now) {
            self.boot_at = None;
            self.connect(now);
        }
        if due(self.probation_until, now) {
            self.probation_until = None;
            self.act(Action::Rollback);
        }
        if due(self.restart_at, now) {
            self.restart_at = None;
            self.act(Action::Restart);
        }
        if due(self.retry_at, now) {
            self.retry_at = None;
            if self.phase == Phase::Offline {
                self.connect(now);
            }
        }
        if due(self.phase_deadline, now) {
            let reason = match self.phase {
                Phase::Connecting => "connect timeout",
                _ => "handshake timeout",
            };
            self.close(reason, now);
        }
        if due(self.dead_at(), now) {
            self.close("heartbeat timeout", now);
        } else if self.phase == Phase::Online && due(self.next_ping, now) {
            self.next_ping = Some(now + self.heartbeat);
            self.send(Ping {
                ts: Some(now.as_millis()),
            });
        }
    }

    fn connect(&mut self, now: Instant) {
        self.phase = Phase::Connecting;
        self.phase_deadline = Some(now + secs(CONNECT_TIMEOUT_SECS));
        self.refused = None;
        self.act(Action::Connect);
        self.touch();
    }

    pub(super) fn on_connected(&mut self, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.phase = Phase::Handshake;
        self.phase_deadline = Some(now + secs(HANDSHAKE_TIMEOUT_SECS));
        self.last_inbound = now;
        let hello = self.hello();
        // hello carries every reading, so nothing is left to report in `state`.
        self.pending_sensors.clear();
        self.send(hello);
        self.touch();
    }

    pub(super) fn on_closed(&mut self, reason: &str, now: Instant) {
        if matches!(self.phase, Phase::Boot | Phase::Offline) {
            return;
        }
        let code = self.refused.or_else(|| ErrorCode::parse(reason));
        self.go_offline(code, now);
    }

    /// Ends the connection from this side.
    fn close(&mut self, reason: &'static str, now: Instant) {
        self.act(Action::Close {
            code: CLOSE_NORMAL,
            reason,
        });
        self.go_offline(None, now);
    }

    fn go_offline(&mut self, code: Option<ErrorCode>, now: Instant) {
        let wait = match code.filter(|c| needs_setup(*c)) {
            Some(code) => {
                self.setup_needed = Some(code);
                Backoff::longest()
            }
            None => {
                let lasted = self
                    .online_since
                    .map(|since| now.saturating_duration_since(since));
                if lasted.is_some_and(|d| d >= secs(BACKOFF_RESET_AFTER_SECS)) {
                    self.backoff.reset();
                }
                self.backoff.next()
            }
        };
        self.phase = Phase::Offline;
        self.retry_at = Some(now + wait);
        self.phase_deadline = None;
        self.online_since = None;
        self.next_ping = None;
        self.refused = None;
        self.pairing = None;
        self.drop_session();
        self.touch();
    }

    pub(super) fn on_challenge(&mut self, challenge: &Challenge) {
        if self.phase == Phase::Handshake {
            let auth = self.identity.auth(challenge);
            self.send(auth);
        }
    }

    pub(super) fn on_welcome(&mut self, welcome: &Welcome, now: Instant) {
        if self.phase != Phase::Handshake {
            return;
        }
        self.phase = Phase::Online;
        self.phase_deadline = None;
        self.online_since = Some(now);
        self.heartbeat = clamp_heartbeat(welcome.heartbeat_s);
        self.next_ping = Some(now + self.heartbeat);
        self.paired = welcome.paired;
        self.setup_needed = None;
        if self.probation_until.take().is_some() {
            self.act(Action::ConfirmFirmware);
        }
        self.touch();
    }

    pub(super) fn on_error(&mut self, code: ErrorCode) {
        self.refused = Some(code);
    }

    pub(super) fn on_crash(&mut self) {
        if self.probation_until.take().is_some() {
            self.act(Action::Rollback);
        } else {
            self.act(Action::Restart);
        }
    }

    fn hello(&self) -> Hello {
        let config = &self.config;
        Hello {
            proto: PROTO_VERSION,
            device_id: self.identity.device_id().into(),
            name: Some(config.name.clone()),
            board: Some(config.board.clone()),
            firmware: Some(config.firmware.clone()),
            token: config.token.clone(),
            caps: config.caps(),
            actions: self.manifest(),
            sensors: self.sensors.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_then_stays() {
        let mut b = Backoff::default();
        let waits: alloc::vec::Vec<u64> = (0..8).map(|_| b.next().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 15, 30, 30, 30]);
        b.reset();
        assert_eq!(b.next().as_secs(), 1);
    }

    #[test]
    fn heartbeat_is_clamped() {
        assert_eq!(clamp_heartbeat(0).as_secs(), 5);
        assert_eq!(clamp_heartbeat(20).as_secs(), 20);
        assert_eq!(clamp_heartbeat(100_000).as_secs(), 300);
        assert_eq!(default_heartbeat().as_secs(), 20);
    }
}
