//! The core's notion of time: a monotonic millisecond count the host passes in.
//!
//! `no_std` has no `Instant`, and the core must never read a clock of its own: firmware
//! passes its tick counter, the simulator its elapsed time, tests a fake clock that jumps
//! straight to the next deadline.

use core::ops::Add;
use core::time::Duration;

/// A point on the host's monotonic clock, in milliseconds since any fixed origin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The instant `ms` milliseconds after the clock's origin.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the clock's origin.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(ms))
    }
}

/// `n` seconds; shorthand for the protocol's second-valued constants.
pub(crate) const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `n` milliseconds.
pub(crate) const fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The earliest of two optional deadlines.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether an optional deadline has come.
pub(crate) fn due(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| d <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(1_000);
        assert_eq!((t + secs(2)).as_millis(), 3_000);
        assert_eq!(
            Instant::from_millis(u64::MAX) + secs(1),
            Instant::from_millis(u64::MAX)
        );
        assert_eq!(
            t.saturating_duration_since(Instant::from_millis(400)),
            millis(600)
        );
        assert_eq!(
            Instant::from_millis(400).saturating_duration_since(t),
            Duration::ZERO
        );
    }

    #[test]
    fn earliest_and_due() {
        let (a, b) = (Instant::from_millis(5), Instant::from_millis(9));
        assert_eq!(earliest(Some(b), Some(a)), Some(a));
        assert_eq!(earliest(None, Some(b)), Some(b));
        assert_eq!(earliest(None, None), None);
        assert!(due(Some(a), a));
        assert!(!due(Some(b), a));
        assert!(!due(None, b));
    }
}
