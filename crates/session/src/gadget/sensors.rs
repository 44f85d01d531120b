//! A gadget's readings: which are kept ([`admissible_sensors`], [`merge_sensors`]) and how
//! often they reach the store, at most once per [`WRITE_EVERY`].
//!
//! A device may send `state` as often as it likes; readings that arrive within the
//! window are merged (the newest value of each key wins, within the store's key limit)
//! and written when it ends, so a chatty device costs one write per window and no
//! reading is lost. Pure state, time passed in.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The shortest time between two sensor writes of one device.
pub const WRITE_EVERY: Duration = Duration::from_secs(10);

/// Sensor readings a device keeps in the store at most; readings of new keys past
/// it are dropped, known keys are still updated.
pub const MAX_SENSORS: usize = 32;
/// The longest sensor name kept.
pub const MAX_SENSOR_KEY: usize = 32;
/// The longest text reading kept.
pub const MAX_SENSOR_TEXT: usize = 64;

/// The readings worth keeping: scalar values (numbers, booleans, short text) under
/// short names, at most [`MAX_SENSORS`]. A device's readings reach the owner's
/// terminal and the agent, so nothing nested, long or unbounded gets in.
pub fn admissible_sensors(readings: &Map<String, Value>) -> Map<String, Value> {
    readings
        .iter()
        .filter(|(key, _)| {
            (1..=MAX_SENSOR_KEY).contains(&key.chars().count())
                && key
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_.-".contains(c))
        })
        .filter(|(_, value)| match value {
            Value::Number(_) | Value::Bool(_) => true,
            Value::String(text) => {
                text.chars().count() <= MAX_SENSOR_TEXT && !text.chars().any(char::is_control)
            }
            _ => false,
        })
        .take(MAX_SENSORS)
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Merge `readings` into `stored`: known keys are updated, new ones added while there
/// is room.
pub fn merge_sensors(stored: &mut Map<String, Value>, readings: &Map<String, Value>) {
    for (key, value) in admissible_sensors(readings) {
        if stored.contains_key(&key) || stored.len() < MAX_SENSORS {
            stored.insert(key, value);
        }
    }
}

/// Readings waiting for the next write.
#[derive(Debug, Default)]
pub struct SensorWrites {
    pending: Map<String, Value>,
    /// When the next write may happen; `None` before the first.
    open_at: Option<Instant>,
}

impl SensorWrites {
    /// Take `readings`; returns what to write now when the window is open.
    pub fn take(
        &mut self,
        readings: &Map<String, Value>,
        now: Instant,
    ) -> Option<Map<String, Value>> {
        merge_sensors(&mut self.pending, readings);
        self.due(now)
    }

    /// What to write at `now`, if anything waits and the window is open.
    pub fn due(&mut self, now: Instant) -> Option<Map<String, Value>> {
        if self.pending.is_empty() || self.open_at.is_some_and(|at| now < at) {
            return None;
        }
        self.open_at = Some(now + WRITE_EVERY);
        Some(std::mem::take(&mut self.pending))
    }

    /// When waiting readings are due.
    pub fn deadline(&self) -> Option<Instant> {
        self.open_at.filter(|_| !self.pending.is_empty())
    }

    /// Whatever waits, now (the device left); the window is kept.
    pub fn flush(&mut self) -> Option<Map<String, Value>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn readings(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn one_write_per_window_and_nothing_lost() {
        let mut writes = SensorWrites::default();
        let t0 = crate::testing::start();
        let first = writes.take(&readings(json!({"battery": 90})), t0);
        assert_eq!(
            first,
            Some(readings(json!({"battery": 90}))),
            "the first goes at once"
        );
        assert_eq!(writes.deadline(), None, "nothing waits");

        // A hundred readings within the window: none written, the newest of each kept.
        for i in 0..100 {
            let at = t0 + Duration::from_millis(50 * i);
            let got = writes.take(&readings(json!({"battery": 89, "temp": i})), at);
            assert_eq!(got, None);
        }
        assert_eq!(writes.deadline(), Some(t0 + WRITE_EVERY));
        assert_eq!(
            writes.due(t0 + WRITE_EVERY - Duration::from_millis(1)),
            None
        );
        assert_eq!(
            writes.due(t0 + WRITE_EVERY),
            Some(readings(json!({"battery": 89, "temp": 99})))
        );
        assert_eq!(writes.deadline(), None);

        // Quiet for a while: the next reading goes at once again.
        let later = t0 + 5 * WRITE_EVERY;
        assert!(writes.take(&readings(json!({"temp": 1})), later).is_some());
    }

    #[test]
    fn a_departing_device_flushes_and_bad_readings_never_wait() {
        let mut writes = SensorWrites::default();
        let t0 = crate::testing::start();
        writes.take(&readings(json!({"a": 1})), t0);
        writes.take(&readings(json!({"b": 2, "nested": {"x": 1}})), t0);
        assert_eq!(writes.flush(), Some(readings(json!({"b": 2}))));
        assert_eq!(writes.flush(), None);
        let many: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        writes.take(&many, t0);
        assert_eq!(writes.flush().map(|m| m.len()), Some(MAX_SENSORS));
    }
}
