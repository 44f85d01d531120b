//! The gadget hub: devices speaking gadget protocol v1 over WebSocket.
//!
//! - [`handshake`] runs hello / challenge / auth and admits a device;
//! - [`socket`] shuttles frames between the WebSocket and the device's session;
//! - [`session`] owns everything stateful of one device: a sans-IO core (the current
//!   connection, heartbeat, turns, questions, actions, voice, readings, firmware
//!   updates) under an actor shell that does its I/O;
//! - [`prompts`], [`sensors`] and the utterance in [`audio`] are the core's pure
//!   sub-machines; [`audio`] also streams speech out;
//! - [`waiting`] caps the devices that wait for pairing;
//! - [`ota`] checks and stages firmware images, and holds the attempt and update
//!   machines the core drives.
//!
//! A session outlives its connections, so a question asked while a device is away is
//! shown again when it returns, and a replacement connection takes over seamlessly.

mod audio;
mod handshake;
mod image;
mod known;
mod ota;
mod session;
mod socket;
mod waiting;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;
use herald_gadget_proto::limits;
use herald_port::{Agent, Authorizer, DeliveryError};
use herald_session::gadget::ota::PushError;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use crate::authorized::Authorized;
use crate::config::GadgetConfig;
use crate::inbox::Inbox;
use crate::listener;
use crate::mailboxes::Mailboxes;
use crate::metrics::Metrics;
use crate::queue;
use crate::store::{OtaUpdate, StoreError, StoreHandle};
use crate::throttle::FailureThrottle;

pub(crate) use known::KnownDevices;
pub(crate) use ota::{
    forget_staged, sweep_unused_staged, unfinished_updates, Unfinished, STAGING_DIR,
};
pub(crate) use session::Command;
use session::{Event, Session};
use waiting::WaitingRoom;

/// What every gadget session shares.
pub(crate) struct GadgetHub {
    pub(crate) config: GadgetConfig,
    pub(crate) store: StoreHandle,
    /// Set once at start-up, when the backend exists.
    backend: OnceLock<(Arc<dyn Agent>, Arc<dyn Authorizer>)>,
    sessions: Mailboxes<Event>,
    /// Devices with a live connection, with that connection's id.
    online: DashMap<String, u64>,
    /// Which devices the authorizer allows, as last heard: a returning paired device's
    /// handshake does not wait for the question.
    pub(crate) authorized: Authorized,
    /// Devices that are not paired yet, capped.
    pub(crate) waiting: WaitingRoom,
    /// Wrong access tokens and keys, per address.
    failures: FailureThrottle,
    next_conn: AtomicU64,
    pub(crate) metrics: Arc<Metrics>,
    /// Where utterances are written for the agent.
    pub(crate) inbox: Arc<Inbox>,
    /// The devices with a firmware update that may still be running.
    pub(crate) unfinished_updates: ota::Unfinished,
    /// The keys of enrolled devices, changed only on the store's thread.
    pub(crate) known: Arc<KnownDevices>,
}

impl GadgetHub {
    pub(crate) fn new(
        config: GadgetConfig,
        store: StoreHandle,
        inbox: Arc<Inbox>,
        metrics: Arc<Metrics>,
        unfinished_updates: ota::Unfinished,
        known: Arc<KnownDevices>,
    ) -> Self {
        GadgetHub {
            inbox,
            unfinished_updates,
            known,
            config,
            store,
            backend: OnceLock::new(),
            sessions: Mailboxes::default(),
            online: DashMap::new(),
            authorized: Authorized::default(),
            waiting: WaitingRoom::default(),
            failures: FailureThrottle::default(),
            next_conn: AtomicU64::new(1),
            metrics,
        }
    }

    pub(crate) fn set_backend(&self, agent: Arc<dyn Agent>, authorizer: Arc<dyn Authorizer>) {
        // A second call would be a wiring bug; keeping the first backend is the safe
        // reaction.
        let _ = self.backend.set((agent, authorizer));
    }

    pub(crate) fn agent(&self) -> Option<&Arc<dyn Agent>> {
        self.backend.get().map(|(agent, _)| agent)
    }

    pub(crate) fn authorizer(&self) -> Option<&Arc<dyn Authorizer>> {
        self.backend.get().map(|(_, authorizer)| authorizer)
    }

    pub(crate) fn is_online(&self, device_id: &str) -> bool {
        self.online.contains_key(device_id)
    }

    pub(crate) fn online_count(&self) -> usize {
        self.online.len()
    }

    fn conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// The session of a device, started on first use.
    fn session(self: &Arc<Self>, device_id: &str) -> queue::Sender<Event> {
        self.sessions.get_or_spawn(device_id, || {
            Session::spawn(device_id.to_owned(), self.clone())
        })
    }

    /// Send a command to a device's session and wait for its answer.
    pub(crate) async fn call<T>(
        &self,
        device_id: &str,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, DeliveryError> {
        let chat = herald_port::Chat::gadget(device_id);
        self.sessions
            .call(&chat, |reply| Event::Command(Box::new(make(reply))))
            .await
    }

    /// Tell a device's session, if it has one, without waiting.
    pub(crate) async fn tell(&self, device_id: &str, command: Command) {
        self.sessions
            .send(device_id, Event::Command(Box::new(command)))
            .await;
    }

    /// Check `source` against the connected device, stage it under `data_dir` and start
    /// sending it. Every refusal comes back before a byte is sent.
    pub(crate) async fn push_ota(
        &self,
        device_id: &str,
        source: PathBuf,
        data_dir: &Path,
    ) -> Result<OtaUpdate, PushError> {
        let offline = |_| PushError::Offline(device_id.to_owned());
        let target = self
            .call(device_id, Command::OtaTarget)
            .await
            .map_err(offline)??;
        let dir = data_dir.join(STAGING_DIR);
        let staged = tokio::task::spawn_blocking(move || ota::stage(&source, &dir, &target))
            .await
            .map_err(|_| PushError::Store(StoreError::Interrupted.to_string()))??;
        let file = staged.image.file.clone();
        let started = self
            .call(device_id, |reply| Command::OtaStart { staged, reply })
            .await;
        match started {
            Ok(result) => result,
            Err(err) => {
                ota::discard_staged(&self.store, device_id, &file).await;
                Err(offline(err))
            }
        }
    }

    /// Forget a device in memory and in the store, in one call on the store's thread, so
    /// that memory never holds a device the store let go. Returns whether it held it.
    pub(crate) async fn forget(&self, device_id: &str) -> Result<bool, StoreError> {
        let (id, known) = (device_id.to_owned(), self.known.clone());
        self.store
            .run(move |store| {
                known.remove(&id);
                store.forget(&id)
            })
            .await
    }

    /// Close every connection, as the server stops.
    pub(crate) async fn close_all(&self) {
        for tx in self.sessions.all() {
            let _ = tx.send(Event::Command(Box::new(Command::Shutdown))).await;
        }
    }

    fn session_ended(&self, device_id: &str, mailbox: &queue::Sender<Event>) {
        self.sessions.remove(device_id, mailbox);
    }
}

impl listener::Handler for GadgetHub {
    async fn handle<S>(self: Arc<Self>, ws: WebSocketStream<S>, peer: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        handshake::run(ws, peer, self).await;
    }
}

/// The gadget endpoint. Buffers are sized for gadget traffic on purpose: the library
/// defaults (128 KiB read buffer, unbounded write buffer) would cost more per idle
/// device than the rest of its session together. An idle device sends only small
/// frames (pong, state), so 1 KiB holds them; a larger frame grows its device's buffer
/// to fit, and `herald bench connect` shows every KiB here per connection.
pub(crate) fn endpoint(path: &str) -> listener::Endpoint {
    listener::Endpoint {
        path: path.to_owned(),
        subprotocol: Some(herald_gadget_proto::SUBPROTOCOL),
        ws: WebSocketConfig::default()
            .read_buffer_size(1024)
            .write_buffer_size(0)
            .max_write_buffer_size(2 * limits::MAX_INBOUND_FRAME)
            .max_message_size(Some(limits::MAX_INBOUND_FRAME))
            .max_frame_size(Some(limits::MAX_INBOUND_FRAME)),
        refuse_url_token: false,
        about: "Herald's gadget endpoint: devices connect here with a WebSocket (gadget protocol v1).\n",
        pages: &[],
    }
}
