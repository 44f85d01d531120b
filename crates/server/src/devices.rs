//! One platform's devices, as its hub keeps them: each device's session (its mailbox,
//! by device id) and which devices are online on which connection.
//!
//! Lookups are sharded (no global lock on the hot path), and a session removes its own
//! entry when it ends, unless a newer session has already taken the id.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dashmap::DashMap;
use herald_port::{Chat, DeliveryError, Platform};
use tokio::sync::oneshot;

use crate::queue;

/// Events queued for one session before its senders wait (backpressure).
pub(crate) const MAILBOX: usize = 64;

pub(crate) struct Devices<E> {
    platform: Platform,
    sessions: DashMap<String, queue::Sender<E>>,
    /// Devices with a live connection, with that connection's id.
    online: DashMap<String, u64>,
    next_conn: AtomicU64,
    /// The server is stopping: a session that starts now (one taking over a retiring
    /// session's mailbox) ends at once, as the others were told to.
    stopping: AtomicBool,
}

impl<E> Devices<E> {
    pub(crate) fn new(platform: Platform) -> Self {
        Devices {
            platform,
            sessions: DashMap::new(),
            online: DashMap::new(),
            next_conn: AtomicU64::new(1),
            stopping: AtomicBool::new(false),
        }
    }

    /// A fresh id for a connection.
    pub(crate) fn conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn went_online(&self, device_id: &str, conn: u64) {
        self.online.insert(device_id.to_owned(), conn);
    }

    pub(crate) fn went_offline(&self, device_id: &str) {
        self.online.remove(device_id);
    }

    pub(crate) fn is_online(&self, device_id: &str) -> bool {
        self.online.contains_key(device_id)
    }

    pub(crate) fn online_count(&self) -> usize {
        self.online.len()
    }

    pub(crate) fn session(&self, id: &str) -> Option<queue::Sender<E>> {
        self.sessions.get(id).map(|tx| tx.clone())
    }

    /// The mailbox of `id`, spawning its session with `spawn` on first use.
    pub(crate) fn session_or_spawn(
        &self,
        id: &str,
        spawn: impl FnOnce() -> queue::Sender<E>,
    ) -> queue::Sender<E> {
        self.sessions
            .entry(id.to_owned())
            .or_insert_with(spawn)
            .clone()
    }

    /// Called by a session as it ends.
    pub(crate) fn session_ended(&self, id: &str, mailbox: &queue::Sender<E>) {
        self.sessions
            .remove_if(id, |_, tx| tx.same_channel(mailbox));
    }

    /// Deliver `event` to a running session; false when there is none.
    pub(crate) async fn send(&self, id: &str, event: E) -> bool {
        match self.session(id) {
            Some(tx) => tx.send(event).await.is_ok(),
            None => false,
        }
    }

    /// Ask a session something and wait for its answer; a device with no session is
    /// offline.
    pub(crate) async fn call<T>(
        &self,
        id: &str,
        make: impl FnOnce(oneshot::Sender<T>) -> E,
    ) -> Result<T, DeliveryError> {
        let chat = || Chat {
            platform: self.platform,
            id: id.to_owned(),
        };
        let offline = || DeliveryError::Offline(chat());
        let tx = self.session(id).ok_or_else(offline)?;
        let (reply, answer) = oneshot::channel();
        tx.send(make(reply)).await.map_err(|_| offline())?;
        answer.await.map_err(|_| offline())
    }

    /// Wait until every session has ended, for at most `limit`; false if some had not.
    pub(crate) async fn ended_within(&self, limit: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.sessions.is_empty() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        true
    }

    /// The server is stopping: every session is told, and those that start later end.
    pub(crate) async fn stop_all(&self, event: impl Fn() -> E) {
        self.stopping.store(true, Ordering::SeqCst);
        self.tell_all(event).await;
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Send every session `event()`.
    pub(crate) async fn tell_all(&self, event: impl Fn() -> E) {
        let all: Vec<_> = self.sessions.iter().map(|e| e.value().clone()).collect();
        for tx in all {
            let _ = tx.send(event()).await;
        }
    }
}

/// For a session that retired with nothing open, after it left the registry: what was
/// sent to it before then (`rx`, closed to new senders here) goes to the session that
/// now has its id, from `next`, so no call is dropped.
pub(crate) async fn hand_over<E>(mut rx: queue::Receiver<E>, next: impl Fn() -> queue::Sender<E>) {
    rx.close();
    while let Some(event) = rx.recv().await {
        let _ = next().send(event).await;
    }
}

/// Inbound events waiting for the agent before new ones are refused.
const AGENT_QUEUE: usize = 32;

/// A device's events on their way to the agent, handed over one at a time and in order
/// by a task of their own, so a slow agent never holds up the device's session. The
/// queue gives its memory back whenever it is empty (tokio's channel would keep a block
/// of 32 events, some 6 KiB, for as long as the device stays).
#[derive(Default)]
pub(crate) struct AgentQueue {
    tx: Option<queue::Sender<herald_port::Inbound>>,
}

impl AgentQueue {
    /// Queue `inbound` for `agent`; false when the queue is full (the device is sending
    /// faster than the agent takes messages).
    pub(crate) fn push(
        &mut self,
        agent: &std::sync::Arc<dyn herald_port::Agent>,
        inbound: herald_port::Inbound,
    ) -> bool {
        let tx = self.tx.get_or_insert_with(|| {
            let (tx, mut rx) = queue::channel::<herald_port::Inbound>(AGENT_QUEUE);
            let agent = agent.clone();
            tokio::spawn(async move {
                while let Some(inbound) = rx.recv().await {
                    agent.handle(inbound).await;
                }
            });
            tx
        });
        tx.try_send(inbound).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A stopping server waits for its sessions only so long, and no longer than they
    /// take.
    #[tokio::test(start_paused = true)]
    async fn the_wait_for_sessions_to_end_is_bounded() {
        let devices = Devices::<()>::new(Platform::Gadget);
        let (mailbox, _rx) = queue::channel(1);
        devices.session_or_spawn("hg-1", || mailbox.clone());

        let started = tokio::time::Instant::now();
        assert!(!devices.ended_within(Duration::from_secs(3)).await);
        assert!(started.elapsed() >= Duration::from_secs(3));

        devices.session_ended("hg-1", &mailbox);
        let started = tokio::time::Instant::now();
        assert!(devices.ended_within(Duration::from_secs(3)).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
