//! Failed secrets per source address. Guessing an app token or a device key costs one
//! handshake a try, which loopback answers thousands of times a second; after
//! [`MAX_FAILURES`] failures in [`WINDOW`] an address is refused until the window
//! ends, whatever it offers. The table is bounded: at [`MAX_ADDRESSES`] the oldest
//! window makes room, so a flood of addresses costs memory it cannot grow.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may make in one window.
pub const MAX_FAILURES: u32 = 10;
/// How long failures count.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 4096;

#[derive(Default)]
pub struct FailureThrottle {
    windows: Mutex<HashMap<IpAddr, Window>>,
}

struct Window {
    started: Instant,
    failures: u32,
}

impl FailureThrottle {
    /// Whether `addr` has used up its failures for now.
    pub fn blocked(&self, addr: IpAddr, now: Instant) -> bool {
        self.lock().get(&addr).is_some_and(|w| {
            now.saturating_duration_since(w.started) < WINDOW && w.failures >= MAX_FAILURES
        })
    }

    /// `addr` offered a wrong secret.
    pub fn failed(&self, addr: IpAddr, now: Instant) {
        let mut windows = self.lock();
        if !windows.contains_key(&addr) && windows.len() >= MAX_ADDRESSES {
            windows.retain(|_, w| now.saturating_duration_since(w.started) < WINDOW);
            if windows.len() >= MAX_ADDRESSES {
                let oldest = windows
                    .iter()
                    .min_by_key(|(_, w)| w.started)
                    .map(|(a, _)| *a);
                if let Some(oldest) = oldest {
                    windows.remove(&oldest);
                }
            }
        }
        let window = windows.entry(addr).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.saturating_duration_since(window.started) >= WINDOW {
            *window = Window {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Window>> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_ten_failures_until_the_window_ends() {
        let throttle = FailureThrottle::default();
        let (guesser, other) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let start = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            throttle.failed(guesser, start);
        }
        assert!(!throttle.blocked(guesser, start));
        throttle.failed(guesser, start);
        assert!(throttle.blocked(guesser, start));
        assert!(!throttle.blocked(other, start), "others are not held up");
        assert!(throttle.blocked(guesser, start + WINDOW - Duration::from_millis(1)));
        assert!(!throttle.blocked(guesser, start + WINDOW));
        throttle.failed(guesser, start + WINDOW);
        assert!(!throttle.blocked(guesser, start + WINDOW), "a new window");
    }

    #[test]
    fn the_table_stays_bounded() {
        let throttle = FailureThrottle::default();
        let now = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 500) {
            throttle.failed(IpAddr::from(i.to_be_bytes()), now);
        }
        assert_eq!(throttle.lock().len(), MAX_ADDRESSES);
    }
}
