//! The gadget hub: devices speaking gadget protocol v1 over WebSocket.
//!
//! - [`handshake`] is the shell of the handshake's state machine (hello / challenge /
//!   auth, in `herald-session`): it answers it from the hub's memory ([`known`] keys,
//!   the [`waiting`] room, the address lock), the store and the authorizer, then hands
//!   the admitted connection to the device's session;
//! - [`session`] is what the one session loop (`crate::session`) does for a gadget's
//!   core (`herald-session`'s gadget `Core`: heartbeat, turns, questions, actions,
//!   voice, readings, firmware updates): its reads, commands and own effects;
//! - [`socket`] says what each read from a gadget's connection is (the connection
//!   itself, its socket and outbox, is the network edge's: `crate::edge::connection`);
//! - [`audio`] paces speech out and [`image`] fits pictures, each on a task of its
//!   own that writes to the outbox beside the session;
//! - [`ota`] checks and stages firmware images.
//!
//! A session outlives its connections, so a question asked while a device is away is
//! shown again when it returns, and a replacement connection takes over seamlessly.

mod handshake;
mod image;
mod known;
mod ota;
mod session;
mod socket;
mod waiting;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herald_gadget_proto::limits;
use herald_port::Platform;
use herald_session::gadget::ota::{PushError, StoreFailed};
use herald_session::gadget::{CueTiming, Rules};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::edge::listener;
use crate::hub::{DeviceKind, Hub};
use herald_config::GadgetConfig;
use herald_store::{OtaUpdate, StoreError};

pub(crate) use known::KnownDevices;
pub(crate) use ota::{
    forget_staged, sweep_unused_staged, unfinished_updates, Unfinished, STAGING_DIR,
};
pub(crate) use session::Command;
use session::Event;
use waiting::WaitingRoom;

/// Gadgets, as the hub knows them.
pub(crate) struct Gadgets;

/// The hub of every gadget session.
pub(crate) type GadgetHub = Hub<Gadgets>;

impl DeviceKind for Gadgets {
    const PLATFORM: Platform = Platform::Gadget;
    type Own = GadgetParts;
    type Event = Event;
    type Command = Command;

    fn command(command: Command) -> Event {
        // Boxed: commands are large and rare next to frames.
        Event::Command(Box::new(command))
    }

    fn shutdown() -> Command {
        Command::Shutdown
    }
}

/// What only gadget sessions share.
pub(crate) struct GadgetParts {
    pub(crate) config: GadgetConfig,
    /// What every session goes by, from the configuration.
    pub(crate) rules: Arc<Rules>,
    /// Devices that are not paired yet, capped.
    pub(crate) waiting: WaitingRoom,
    /// The devices with a firmware update that may still be running.
    pub(crate) unfinished_updates: ota::Unfinished,
    /// The keys of enrolled devices, changed only on the store's thread.
    pub(crate) known: Arc<KnownDevices>,
}

impl GadgetParts {
    pub(crate) fn new(
        config: GadgetConfig,
        unfinished_updates: ota::Unfinished,
        known: Arc<KnownDevices>,
    ) -> Self {
        let rules = Rules {
            heartbeat: Duration::from_secs(u64::from(config.heartbeat_s)),
            max_utterance_s: config.max_utterance_s,
            ota: ota::timeouts(&config),
            cues: (config.cue_after_s > 0).then(|| CueTiming {
                after: Duration::from_secs(u64::from(config.cue_after_s)),
                every: Duration::from_secs(u64::from(config.cue_every_s)),
            }),
            turn_timeout: Duration::from_secs(u64::from(config.turn_timeout_s)),
        };
        GadgetParts {
            rules: Arc::new(rules),
            unfinished_updates,
            known,
            config,
            waiting: WaitingRoom::default(),
        }
    }
}

impl GadgetHub {
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
            .map_err(|_| PushError::from(StoreFailed(StoreError::Interrupted.to_string())))??;
        let file = staged.image.file.clone();
        let started = self
            .call(device_id, |reply| Command::OtaStart { staged, reply })
            .await;
        match started {
            Ok(result) => result,
            Err(err) => {
                ota::discard_staged(&self.shared.store, device_id, &file).await;
                Err(offline(err))
            }
        }
    }

    /// Forget a device in memory and in the store, in one call on the store's thread, so
    /// that memory never holds a device the store let go. Returns whether it held it.
    pub(crate) async fn forget(&self, device_id: &str) -> Result<bool, StoreError> {
        let (id, known) = (device_id.to_owned(), self.own.known.clone());
        self.shared
            .store
            .run(move |store| {
                known.remove(&id);
                store.forget(&id)
            })
            .await
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
