//! Pacing audio to real time, with no clock or sleep inside.
//!
//! A gadget has a jitter buffer of about one second, so the server may run ahead of playback
//! but only by a bounded lead (0.5 s in gadget protocol v1): more would overflow the device,
//! and all of it at once would arrive as one burst. [`Pacer`] is the arithmetic of that rule,
//! in the sans-IO style of the protocol crates: the caller passes the current [`Instant`] in,
//! asks when the next frame may go ([`Pacer::next_send_at`]), sleeps however its runtime
//! sleeps, and reports each frame it sent ([`Pacer::frame_sent`]). Tests drive hours of
//! playback with made-up instants in microseconds.
//!
//! The model: frame `n` starts playing `n` frame durations after the first one did. A frame
//! may be sent once it is at most `lead` ahead of its playing time, so at the start (and after
//! a stall) `lead / frame + 1` frames go at once (13 for 40 ms frames and a 0.5 s lead: the
//! thirteenth starts 480 ms ahead), then one per frame duration.
//!
//! If the sender stalls (a slow decoder, a busy runtime, a blocked socket) until a frame is
//! past its playing time, the device has run dry and restarts playback when audio arrives
//! again. The clock then rebases on that frame instead of counting from the original start,
//! which would let every missed frame out in one burst after a long stall: the catch-up is
//! one lead's worth, never more.

use std::time::{Duration, Instant};

/// When the frames of one audio stream may be sent. One per stream; create it when the stream
/// starts.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// When frame 0 (counted since the last rebase) started or starts playing.
    start: Instant,
    /// Frames sent since `start`.
    sent: u32,
    frame: Duration,
    lead: Duration,
}

impl Pacer {
    /// A pacer for frames lasting `frame` each, sent at most `lead` ahead of real time, whose
    /// playback starts at `now`.
    pub fn new(now: Instant, frame: Duration, lead: Duration) -> Pacer {
        Pacer {
            start: now,
            sent: 0,
            frame,
            lead,
        }
    }

    /// The earliest instant the next frame may be sent. An instant at or before now means at
    /// once; a stall is taken into account when the frame is reported sent.
    pub fn next_send_at(&self) -> Instant {
        let plays_at = self.plays_at(self.sent);
        // `checked_sub` only fails right after the platform clock's origin, where "at once"
        // is the right answer anyway.
        plays_at.checked_sub(self.lead).unwrap_or(self.start)
    }

    /// Records that the next frame was sent at `now`.
    ///
    /// A frame sent after its playing time means the device ran dry: the clock rebases so
    /// that this frame starts playing now, and the frames after it are paced from here.
    pub fn frame_sent(&mut self, now: Instant) {
        if now > self.plays_at(self.sent) {
            self.start = now;
            self.sent = 0;
        }
        self.sent = self.sent.saturating_add(1);
    }

    fn plays_at(&self, frame: u32) -> Instant {
        self.start + self.frame.saturating_mul(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: Duration = Duration::from_millis(40);
    const LEAD: Duration = Duration::from_millis(500);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends every frame the pacer allows at `now`; returns how many went.
    fn burst(pacer: &mut Pacer, now: Instant) -> usize {
        let mut sent = 0;
        while pacer.next_send_at() <= now {
            pacer.frame_sent(now);
            sent += 1;
            assert!(sent <= 1000, "the pacer never stopped the sender");
        }
        sent
    }

    #[test]
    fn thirteen_frames_fill_the_lead_then_the_next_waits() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, LEAD);
        assert_eq!(burst(&mut pacer, t0), 13);
        // Frame 13 plays at 520 ms, so it may leave 500 ms before: at 20 ms.
        assert_eq!(pacer.next_send_at(), t0 + ms(20));
        assert_eq!(burst(&mut pacer, t0 + ms(19)), 0);
        assert_eq!(burst(&mut pacer, t0 + ms(20)), 1);
        assert_eq!(pacer.next_send_at(), t0 + ms(60));
    }

    #[test]
    fn steady_sending_stays_within_the_lead_and_keeps_real_time() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, LEAD);
        let mut frames = 0u64;
        // A sender that wakes every millisecond for ten minutes of audio.
        for tick in 0..=600_000u64 {
            let now = t0 + ms(tick);
            let sent = burst(&mut pacer, now) as u64;
            assert!(sent <= 13);
            frames += sent;
            // The last frame sent starts playing at (frames - 1) * 40 ms.
            let ahead = (frames - 1) * 40;
            assert!(ahead <= tick + 500, "{ahead} ms of audio at {tick} ms");
            assert!(ahead + 40 > tick + 500, "held back at {tick} ms");
        }
        assert_eq!(frames, 600_000 / 40 + 13);
    }

    #[test]
    fn after_a_stall_at_most_thirteen_frames_go_at_once() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, LEAD);
        assert_eq!(burst(&mut pacer, t0), 13);
        // Five seconds without sending: 125 frames' playing time went by.
        let resume = t0 + Duration::from_secs(5);
        assert_eq!(burst(&mut pacer, resume), 13);
        // Then pacing resumes from the new start, one frame per 40 ms.
        assert_eq!(pacer.next_send_at(), resume + ms(20));
        assert_eq!(burst(&mut pacer, resume + ms(20)), 1);
        assert_eq!(burst(&mut pacer, resume + ms(59)), 0);
        assert_eq!(burst(&mut pacer, resume + ms(60)), 1);
    }

    #[test]
    fn a_short_delay_refills_only_what_was_played() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, LEAD);
        assert_eq!(burst(&mut pacer, t0), 13);
        // 300 ms late but the device still has 220 ms queued: no rebase, just top the lead up
        // again (frames 13..=20, the last starting at 800 ms = 300 + 500).
        assert_eq!(burst(&mut pacer, t0 + ms(300)), 8);
        assert_eq!(pacer.next_send_at(), t0 + ms(340));
    }

    #[test]
    fn a_late_first_frame_starts_the_clock() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, LEAD);
        // Decoding took 100 ms before the first frame could go.
        let first = t0 + ms(100);
        assert_eq!(burst(&mut pacer, first), 13);
        assert_eq!(pacer.next_send_at(), first + ms(20));
    }

    #[test]
    fn a_frame_sent_exactly_on_time_does_not_rebase() {
        let t0 = Instant::now();
        let mut pacer = Pacer::new(t0, FRAME, Duration::ZERO);
        // With no lead each frame may go exactly when it plays, which is not late.
        assert_eq!(burst(&mut pacer, t0), 1);
        assert_eq!(pacer.next_send_at(), t0 + ms(40));
        assert_eq!(burst(&mut pacer, t0 + ms(40)), 1);
        assert_eq!(pacer.next_send_at(), t0 + ms(80));
    }
}
