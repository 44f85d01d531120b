//! The hub: what the sessions of one platform's devices share, written once for both.
//!
//! A [`Hub`] holds the platform's [`Devices`] (each device's session, who is online),
//! the authorizer's remembered answers, the wrong-guess throttle and what only that
//! platform keeps ([`DeviceKind::Own`]: the gadget's waiting room and known keys, the
//! phone's tokens, cards and upload budget). What both platforms use (the store, the
//! metrics with the activity log, the inbox, the agent backend, the questions shared
//! across a person's devices and the notifications) is [`Shared`], held once by the
//! server and handed to both hubs; no hub reaches the other's.

use std::sync::{Arc, OnceLock, Weak};

use herald_port::{Agent, Authorizer, DeliveryError, Outbound, Platform};
use herald_store::{DeviceRecord, StoreHandle};
use tokio::sync::oneshot;

use crate::devices::Devices;
use crate::edge::throttle::FailureThrottle;
use crate::metrics::Metrics;
use herald_access::Authorized;
use herald_inbox::Inbox;
use herald_notify::Notifications;
use herald_questions::Questions;

/// What both platforms use, held once.
pub(crate) struct Shared {
    pub(crate) store: StoreHandle,
    /// The server's counters, with the console's activity log.
    pub(crate) metrics: Arc<Metrics>,
    /// Where voice and files from devices are written for the agent.
    pub(crate) inbox: Arc<Inbox>,
    /// Questions shown on more than the device asked (`crate::questions`).
    pub(crate) questions: Questions,
    /// Notifications to apps that are closed (`crate::notify`).
    pub(crate) notifications: Notifications,
    /// The one app token's user, when there is only one: the person every gadget
    /// belongs to unless someone said otherwise.
    pub(crate) sole_user: Option<String>,
    /// Set once at start-up, when the backend exists.
    backend: OnceLock<(Arc<dyn Agent>, Arc<dyn Authorizer>)>,
    /// The way to every device, whatever its platform (the router, which holds this:
    /// hence weak), for a session that must reach another's.
    outbound: OnceLock<Weak<dyn Outbound>>,
}

impl Shared {
    pub(crate) fn new(
        store: StoreHandle,
        metrics: Arc<Metrics>,
        inbox: Arc<Inbox>,
        questions: Questions,
        notifications: Notifications,
        sole_user: Option<String>,
    ) -> Self {
        Shared {
            store,
            metrics,
            inbox,
            questions,
            notifications,
            sole_user,
            backend: OnceLock::new(),
            outbound: OnceLock::new(),
        }
    }

    /// A store and inbox in `dir`, no backend: for the sessions' own tests.
    #[cfg(test)]
    pub(crate) fn in_dir(dir: &std::path::Path) -> Arc<Shared> {
        let path = dir.join("herald.db");
        let store = herald_store::SqliteStore::open(&path).unwrap();
        let store = StoreHandle::new(Arc::new(store), &path).unwrap();
        let inbox = Inbox::open(dir.join("inbox"), &Default::default()).unwrap();
        Arc::new(Shared::new(
            store,
            Default::default(),
            inbox,
            Questions::new(true, Vec::new()),
            Notifications::default(),
            None,
        ))
    }

    pub(crate) fn set_backend(&self, agent: Arc<dyn Agent>, authorizer: Arc<dyn Authorizer>) {
        // A second call would be a wiring bug; keeping the first backend is the safe
        // reaction.
        let _ = self.backend.set((agent, authorizer));
    }

    pub(crate) fn set_outbound(&self, outbound: &Arc<dyn Outbound>) {
        let _ = self.outbound.set(Arc::downgrade(outbound));
    }

    /// The way to every device, while the server runs.
    pub(crate) fn outbound(&self) -> Option<Arc<dyn Outbound>> {
        self.outbound.get()?.upgrade()
    }

    /// The person gadget `device_id` belongs to: its owner, else the only user.
    pub(crate) async fn owner_of_gadget(&self, device_id: &str) -> Option<String> {
        let id = device_id.to_owned();
        let record = self.store.run(move |s| s.device(&id)).await.ok()??;
        self.person_of(&record)
    }

    /// The person a gadget belongs to: its owner, else the only user.
    pub(crate) fn person_of(&self, record: &DeviceRecord) -> Option<String> {
        record.owner.clone().or_else(|| self.sole_user.clone())
    }

    pub(crate) fn agent(&self) -> Option<&Arc<dyn Agent>> {
        self.backend.get().map(|(agent, _)| agent)
    }

    pub(crate) fn authorizer(&self) -> Option<&Arc<dyn Authorizer>> {
        self.backend.get().map(|(_, authorizer)| authorizer)
    }
}

/// What a platform adds to the hub: its session's mailbox events, the commands the
/// agent side and the admin API send them, and the state only its devices share.
pub(crate) trait DeviceKind: Sized + Send + Sync + 'static {
    const PLATFORM: Platform;
    /// What only this platform's sessions share.
    type Own: Send + Sync;
    /// What a session's mailbox carries.
    type Event: Send + 'static;
    /// What the rest of the server asks of a session.
    type Command: Send;

    fn command(command: Self::Command) -> Self::Event;
    /// The command that closes a session's connection as the server stops.
    fn shutdown() -> Self::Command;
}

pub(crate) struct Hub<K: DeviceKind> {
    pub(crate) shared: Arc<Shared>,
    /// The sessions and who is online.
    pub(crate) devices: Devices<K::Event>,
    /// Which devices or users the authorizer allows, as last heard: a returning
    /// device's handshake or message does not wait for the question.
    pub(crate) authorized: Authorized,
    /// Wrong tokens and keys, per address.
    pub(crate) failures: FailureThrottle,
    pub(crate) own: K::Own,
}

impl<K: DeviceKind> Hub<K> {
    pub(crate) fn new(shared: Arc<Shared>, own: K::Own) -> Self {
        Hub {
            shared,
            devices: Devices::new(K::PLATFORM),
            authorized: Authorized::default(),
            failures: FailureThrottle::default(),
            own,
        }
    }

    /// Send a command to a device's session and wait for its answer.
    pub(crate) async fn call<T>(
        &self,
        device_id: &str,
        make: impl FnOnce(oneshot::Sender<T>) -> K::Command,
    ) -> Result<T, DeliveryError> {
        let event = |reply| K::command(make(reply));
        self.devices.call(device_id, event).await
    }

    /// Tell a device's session, if it has one, without waiting.
    pub(crate) async fn tell(&self, device_id: &str, command: K::Command) {
        self.devices.send(device_id, K::command(command)).await;
    }

    /// Tell every session, without waiting for answers.
    pub(crate) async fn tell_all(&self, command: impl Fn() -> K::Command) {
        self.devices.tell_all(|| K::command(command())).await;
    }

    /// Close every connection, as the server stops; a session that starts after this
    /// ends at once.
    pub(crate) async fn close_all(&self) {
        let shutdown = || K::command(K::shutdown());
        self.devices.stop_all(shutdown).await;
    }
}
