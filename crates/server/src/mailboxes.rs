//! The registry of per-device session actors of one transport: device id → mailbox.
//!
//! Each transport's hub owns one. Lookups are sharded (no global lock on the hot path),
//! and a session removes its own entry when it ends, unless a newer session has
//! already taken the id.

use dashmap::DashMap;
use herald_port::{Chat, DeliveryError};
use tokio::sync::{mpsc, oneshot};

use crate::queue;

/// Events queued for one session before its senders wait (backpressure).
pub(crate) const MAILBOX: usize = 64;

pub(crate) struct Mailboxes<E> {
    map: DashMap<String, queue::Sender<E>>,
}

impl<E> Default for Mailboxes<E> {
    fn default() -> Self {
        Mailboxes {
            map: DashMap::new(),
        }
    }
}

impl<E> Mailboxes<E> {
    pub(crate) fn get(&self, id: &str) -> Option<queue::Sender<E>> {
        self.map.get(id).map(|tx| tx.clone())
    }

    /// The mailbox of `id`, spawning its session with `spawn` on first use.
    pub(crate) fn get_or_spawn(
        &self,
        id: &str,
        spawn: impl FnOnce() -> queue::Sender<E>,
    ) -> queue::Sender<E> {
        self.map.entry(id.to_owned()).or_insert_with(spawn).clone()
    }

    /// Called by a session as it ends.
    pub(crate) fn remove(&self, id: &str, mailbox: &queue::Sender<E>) {
        self.map.remove_if(id, |_, tx| tx.same_channel(mailbox));
    }

    pub(crate) fn all(&self) -> Vec<queue::Sender<E>> {
        self.map.iter().map(|e| e.value().clone()).collect()
    }

    /// Deliver `event` to a running session; false when there is none.
    pub(crate) async fn send(&self, id: &str, event: E) -> bool {
        match self.get(id) {
            Some(tx) => tx.send(event).await.is_ok(),
            None => false,
        }
    }

    /// Ask a session something and wait for its answer; a device with no session is
    /// offline.
    pub(crate) async fn call<T>(
        &self,
        chat: &Chat,
        make: impl FnOnce(oneshot::Sender<T>) -> E,
    ) -> Result<T, DeliveryError> {
        let offline = || DeliveryError::Offline(chat.clone());
        let tx = self.get(&chat.id).ok_or_else(offline)?;
        let (reply, answer) = oneshot::channel();
        tx.send(make(reply)).await.map_err(|_| offline())?;
        answer.await.map_err(|_| offline())
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
/// by a task of their own, so a slow agent never holds up the device's session.
#[derive(Default)]
pub(crate) struct AgentQueue {
    tx: Option<mpsc::Sender<herald_port::Inbound>>,
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
            let (tx, mut rx) = mpsc::channel::<herald_port::Inbound>(AGENT_QUEUE);
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
