//! Herald's server: the transports devices connect to, the per-device sessions behind
//! them and pairing, with the store (`herald-store`) and the admin API (`herald-admin`)
//! wired in.
//!
//! [`Server::start`] wires it together: it opens the store, binds every listener,
//! builds the agent backend with a handle to the transports (the conversation port),
//! and publishes the admin endpoint for the CLI. Dropping nothing is needed to stop:
//! [`Server::shutdown`] closes devices politely, and each store write is atomic, so
//! even an abrupt exit leaves consistent state.
//!
//! Each device's session is a core from `herald-session` (frames, port calls and the
//! clock in; frames, effects and the next deadline out), which cannot do I/O, run by
//! one session loop (`session`) that does it for both platforms; each platform adds
//! only its own reads, commands and effects (`gadget::session`, `mobile::session`). A
//! session owns its device's connection (`herald-edge`, the network edge), so a connected device is one task
//! whichever protocol it speaks. One hub type (`hub`) holds a platform's sessions and
//! what they share (who the authorizer let in, the waiting room, cards, the upload
//! budget); what both platforms use (the store, metrics, inbox and agent backend) is
//! held once (`hub::Shared`). The router hands each port [`Request`] (and each one-way
//! notification) to the session of its chat; the store (`herald_store`) is reached
//! through a [`herald_store::StoreHandle`].
//!
//! [`Request`]: herald_port::Request

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod calls;
mod devices;
mod fleet;
mod gadget;
mod hub;
mod ids;
mod mobile;
pub mod net;
mod router;
mod session;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

// Crates of their own, as the tools share them; here they keep their module names.
use herald_edge as edge;
use herald_edge::{places, queue};
use herald_files as files;
use herald_labels as labels;
use herald_metrics as metrics;
use herald_metrics::{activity, clock};
use herald_port::{AgentFactory, Authorizer, Outbound};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;

use crate::edge::{listener, tls};
use crate::gadget::GadgetHub;
use crate::hub::Shared;
use crate::metrics::Metrics;
use crate::mobile::MobileHub;
use herald_access::{Access, Policy, Standalone};
use herald_config::Config;
use herald_inbox::Inbox;
use herald_store::{SqliteStore, StoreError, StoreHandle};

pub use crate::edge::tls::TlsError;
pub use crate::mobile::TOKEN_FILE as MOBILE_TOKEN_FILE;

/// The store's file name inside the data directory.
pub const STORE_FILE: &str = "herald.db";

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] herald_config::ConfigError),
    #[error("cannot open the store {}: {source}", path.display())]
    Store { path: PathBuf, source: StoreError },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Mobile(#[from] mobile::MobileSetupError),
    #[error(transparent)]
    Push(#[from] herald_push::PushError),
    #[error("cannot listen for {what} on {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "another herald is already running with the data directory {}; stop it first, \
         or give this one its own --data-dir", .0.display()
    )]
    AlreadyRunning(PathBuf),
    #[error("cannot use the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A running server.
pub struct Server {
    gadget_addr: SocketAddr,
    mobile_addr: SocketAddr,
    admin_addr: SocketAddr,
    gadget_url: String,
    mobile_url: String,
    gadget: Arc<GadgetHub>,
    mobile: Arc<MobileHub>,
    tasks: Vec<JoinHandle<()>>,
    data_dir: PathBuf,
    /// Held while the server runs, so a second one on the same data directory refuses
    /// to start instead of taking over `admin.json`.
    _lock: std::fs::File,
}

impl Server {
    /// Start every listener; returns once they are bound and accepting.
    pub async fn start(
        config: Config,
        data_dir: &Path,
        agent: AgentFactory,
    ) -> Result<Server, StartError> {
        config.validate()?;
        let data_err = |source| StartError::DataDir {
            path: data_dir.to_owned(),
            source,
        };
        files::create_private_dir(data_dir).map_err(data_err)?;
        files::check_private_dir(data_dir).map_err(data_err)?;
        let lock = lock_data_dir(data_dir)?;
        let tls = match config.tls() {
            Some((cert, key)) => Some(tls::acceptor(cert, key)?),
            None => None,
        };
        let swept = files::sweep_partial(data_dir).map_err(data_err)?;
        if swept > 0 {
            info!(files = swept, "removed files a crash left half-written");
        }
        let store = Opened::open(data_dir)?;
        let hubs = Hubs::build(&config, data_dir, &store, agent)?;

        let (gadget_listener, gadget_addr) =
            bind("gadgets", config.gadget.host, config.gadget.port).await?;
        let (mobile_listener, mobile_addr) =
            bind("phones", config.mobile.host, config.mobile.port).await?;
        let (admin_listener, admin_addr) =
            bind("the admin API", config.admin.host, config.admin.port).await?;
        let scheme = if tls.is_some() { "wss" } else { "ws" };
        let gadget_url = net::url(scheme, gadget_addr, &config.gadget.path);
        let mobile_url = net::url(scheme, mobile_addr, &config.mobile.path);
        let info = herald_admin_api::Info {
            version: env!("CARGO_PKG_VERSION").into(),
            gadget_url: gadget_url.clone(),
            mobile_url: mobile_url.clone(),
            mobile_token: config
                .mobile
                .token
                .is_none()
                .then(|| data_dir.join(mobile::TOKEN_FILE)),
            data_dir: data_dir.to_owned(),
            store: store.path.clone(),
        };
        let admin = hubs.admin(&store, info).map_err(data_err)?;

        let tasks = vec![
            tokio::spawn(listener::run(
                gadget_listener,
                tls.clone(),
                gadget::endpoint(&config.gadget.path),
                hubs.gadget.clone(),
            )),
            tokio::spawn(listener::run(
                mobile_listener,
                tls,
                mobile::endpoint(&config.mobile.path),
                hubs.mobile.clone(),
            )),
            tokio::spawn(prune_hourly(hubs.inbox.clone())),
            tokio::spawn(herald_admin::serve(admin_listener, admin)),
        ];
        herald_admin::publish(data_dir, &format!("http://{admin_addr}")).map_err(data_err)?;

        info!(url = %gadget_url, "listening for gadgets");
        info!(url = %mobile_url, "listening for phones");
        info!(url = %herald_admin_api::chat_page_url(&mobile_url), "the browser chat (log in with the app token)");
        info!(url = %format!("http://{admin_addr}/"), "the console and admin API (log in: `herald console`)");
        Ok(Server {
            gadget_addr,
            mobile_addr,
            admin_addr,
            gadget_url,
            mobile_url,
            gadget: hubs.gadget,
            mobile: hubs.mobile,
            tasks,
            data_dir: data_dir.to_owned(),
            _lock: lock,
        })
    }

    pub fn gadget_addr(&self) -> SocketAddr {
        self.gadget_addr
    }

    pub fn mobile_addr(&self) -> SocketAddr {
        self.mobile_addr
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The URL devices should use (with the LAN address when bound to all interfaces).
    pub fn gadget_url(&self) -> &str {
        &self.gadget_url
    }

    /// The URL phones should use.
    pub fn mobile_url(&self) -> &str {
        &self.mobile_url
    }

    pub fn online_gadgets(&self) -> usize {
        self.gadget.devices.online_count()
    }

    pub fn online_phones(&self) -> usize {
        self.mobile.devices.online_count()
    }

    /// Stop accepting, then close every device connection with "going away".
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        herald_admin::unpublish(&self.data_dir);
        self.gadget.close_all().await;
        self.mobile.close_all().await;
        // What sessions record as they close (readings, firmware progress, last seen)
        // reaches the store before its last write and the runtime's end; a session
        // stuck writing to a device is not waited for long.
        let (gadgets, phones) = tokio::join!(
            self.gadget.devices.ended_within(STOP_GRACE),
            self.mobile.devices.ended_within(STOP_GRACE)
        );
        if !(gadgets && phones) {
            tracing::warn!("stopped before every device session had ended");
        }
        if let Err(err) = self.gadget.shared.store.write_noted().await {
            tracing::warn!(%err, "could not record when devices were last seen");
        }
    }
}

/// The store, open, with what a restart left of firmware updates.
struct Opened {
    store: StoreHandle,
    path: PathBuf,
    unfinished: Vec<herald_store::OtaUpdate>,
}

impl Opened {
    /// Open the store in `data_dir`, and remove staged firmware no update uses any more
    /// (half-written copies too: only what a running update streams from stays).
    fn open(data_dir: &Path) -> Result<Opened, StartError> {
        let path = data_dir.join(STORE_FILE);
        let store_err = |source| StartError::Store {
            path: path.clone(),
            source,
        };
        let store = SqliteStore::open(&path).map_err(store_err)?;
        let store = StoreHandle::new(Arc::new(store), &path).map_err(store_err)?;
        let staging = data_dir.join(gadget::STAGING_DIR);
        let unfinished = gadget::unfinished_updates(store.blocking()).map_err(store_err)?;
        let unused = gadget::sweep_unused_staged(&staging, &unfinished).map_err(|source| {
            StartError::DataDir {
                path: staging.clone(),
                source,
            }
        })?;
        if unused > 0 {
            info!(files = unused, "removed staged firmware no update uses");
        }
        Ok(Opened {
            store,
            path,
            unfinished,
        })
    }
}

/// Both platforms' hubs, what they share, and the agent behind them.
struct Hubs {
    gadget: Arc<GadgetHub>,
    mobile: Arc<MobileHub>,
    inbox: Arc<Inbox>,
    metrics: Arc<Metrics>,
    outbound: Arc<dyn Outbound>,
    authorizer: Arc<dyn Authorizer>,
    /// Herald's own pairing store, unless the backend (Hermes) decides who may talk.
    own_access: Option<Arc<Access>>,
}

impl Hubs {
    fn build(
        config: &Config,
        data_dir: &Path,
        opened: &Opened,
        agent: AgentFactory,
    ) -> Result<Hubs, StartError> {
        let data_err = |source| StartError::DataDir {
            path: data_dir.to_owned(),
            source,
        };
        let store = &opened.store;
        let access = Arc::new(Access::new(
            store.clone(),
            Policy {
                allowed_users: config.gadget.allowed_users.iter().cloned().collect(),
                allow_all: config.gadget.allow_all_users,
            },
            Policy {
                allowed_users: config.mobile.allowed_users.iter().cloned().collect(),
                allow_all: config.mobile.allow_all_users,
            },
        ));
        let metrics = Arc::new(Metrics::default());
        // Voice and files from devices, for the agent to read.
        let inbox = Inbox::open(data_dir.join("inbox"), &config.inbox).map_err(data_err)?;
        let app_token = match &config.mobile.token {
            Some(token) => token.expose().to_owned(),
            // Generated on first use, so a newcomer's phone connects with nothing to set.
            None => files::secret::load_or_create_token(&data_dir.join(mobile::TOKEN_FILE))
                .map_err(data_err)?,
        };
        let phone_parts = mobile::PhoneParts::new(
            config.mobile.clone(),
            &app_token,
            config.push.allow_private_endpoints,
        )?;
        let pusher = match config.push.enabled {
            true => Some(herald_notify::start_pusher(data_dir, &config.push, store)?),
            false => None,
        };
        let shared = Arc::new(Shared::new(
            store.clone(),
            metrics.clone(),
            inbox.clone(),
            herald_questions::Questions::new(
                config.questions.share,
                config.questions.not_to.clone(),
            ),
            herald_notify::Notifications::new(pusher),
            phone_parts.sole_user(),
        ));
        let known = gadget::KnownDevices::from_store(store.blocking()).map_err(|source| {
            StartError::Store {
                path: opened.path.clone(),
                source,
            }
        })?;
        let gadget = Arc::new(GadgetHub::new(
            shared.clone(),
            gadget::GadgetParts::new(
                config.gadget.clone(),
                gadget::Unfinished::new(&opened.unfinished),
                Arc::new(known),
            ),
        ));
        let mobile = Arc::new(MobileHub::new(shared.clone(), phone_parts));
        let outbound: Arc<dyn Outbound> = Arc::new(router::Router::new(
            shared.clone(),
            gadget.clone(),
            mobile.clone(),
        ));
        let backend = agent(outbound.clone());
        // A backend that authorizes (Hermes) owns pairing; Herald's store is not consulted.
        let own_access = backend.authorizer.is_none().then(|| access.clone());
        let authorizer: Arc<dyn Authorizer> = match backend.authorizer {
            Some(authorizer) => authorizer,
            None => Arc::new(Standalone(access)),
        };
        shared.set_backend(backend.agent, authorizer.clone());
        shared.set_outbound(&outbound);
        Ok(Hubs {
            gadget,
            mobile,
            inbox,
            metrics,
            outbound,
            authorizer,
            own_access,
        })
    }

    /// What the admin API reaches: the store, the devices, pairing, the agent's side.
    fn admin(
        &self,
        opened: &Opened,
        info: herald_admin_api::Info,
    ) -> std::io::Result<herald_admin::AdminState> {
        let data_dir = info.data_dir.clone();
        let token =
            files::secret::load_or_create_token(&data_dir.join(herald_admin_api::TOKEN_FILE))?;
        Ok(herald_admin::AdminState {
            token: token.into(),
            store: opened.store.clone(),
            authorizer: self.authorizer.clone(),
            access: self.own_access.clone(),
            fleet: Arc::new(fleet::Fleet {
                gadget: self.gadget.clone(),
                mobile: self.mobile.clone(),
                data_dir,
            }),
            outbound: self.outbound.clone(),
            metrics: self.metrics.clone(),
            info: Arc::new(info),
        })
    }
}

/// How long a stopping server waits for its device sessions to end.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The lock file every server of a data directory takes; the OS drops it with the
/// process, however that ends.
pub const LOCK_FILE: &str = "herald.lock";

/// Remove what has aged out of the inbox while the server runs.
async fn prune_hourly(inbox: Arc<Inbox>) {
    let mut every = tokio::time::interval(herald_inbox::PRUNE_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        if let Err(err) = inbox.prune_old().await {
            tracing::warn!(%err, dir = %inbox.dir().display(), "could not prune the inbox");
        }
    }
}

fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, StartError> {
    let path = data_dir.join(LOCK_FILE);
    let file = files::open_private(&path).map_err(|source| StartError::DataDir {
        path: path.clone(),
        source,
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(StartError::AlreadyRunning(data_dir.to_owned()))
        }
        Err(std::fs::TryLockError::Error(source)) => Err(StartError::DataDir { path, source }),
    }
}

/// A listener for `what`, bound, and the address it got.
async fn bind(
    what: &'static str,
    host: std::net::IpAddr,
    port: u16,
) -> Result<(TcpListener, SocketAddr), StartError> {
    let addr = SocketAddr::new(host, port);
    let bind_err = |source| StartError::Bind { what, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
    let bound = listener.local_addr().map_err(bind_err)?;
    Ok((listener, bound))
}
