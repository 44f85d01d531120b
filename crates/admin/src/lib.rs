//! The local admin API that `herald devices`, `herald pairing` and friends talk to, and
//! the owner's console in a browser on the same listener.
//!
//! It listens on loopback by default and every request needs the bearer token kept in
//! `admin.token` in the data directory (mode 0600): only the owner of the data
//! directory can approve pairings or forget devices. `admin.json` beside it tells the
//! CLI where the API listens. The console's pages are open, its data is not: a browser
//! trades the same token for a session cookie (`session.rs`) and then calls the same
//! API. Those files, the JSON the CLI sends and reads, and the client the tools use are
//! the crate `herald-admin-api`; this crate answers.
//!
//! A crate of its own, apart from the server that holds the devices: what it needs of
//! them is [`Fleet`] (who is connected, forgetting a gadget), and of the agent's side
//! the conversation port's [`Outbound`]; the rest is the store, Herald's own pairing
//! (`herald-access`), the counters (`herald-metrics`) and the pages (`herald-pages`).
//!
//! - [`api`]: the JSON endpoints the CLI uses, unchanged;
//! - [`session`]: who may call them (bearer token or console session, CSRF rules);
//! - [`link`]: login links (`herald console`): single-use codes for a session;
//! - [`console`]: the console's own endpoints (device details, cards, actions, stats,
//!   QR codes) and its pages;
//! - [`firmware`]: firmware uploaded through the browser, checked, pushed, and the
//!   history of updates;
//! - [`live`]: the server-sent event stream that keeps the console current, from the
//!   event bus in [`herald_metrics::activity`].

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod api;
mod console;
mod firmware;
mod link;
mod live;
mod session;

pub use console::qr_svg;
pub use firmware::MAX_UPLOAD;
pub use session::MAX_FAILURES;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use herald_access::Access;
use herald_admin_api::{Endpoint, ErrorBody, Info, ENDPOINT_FILE};
use herald_metrics::Metrics;
use herald_port::{AccessError, Authorizer, Outbound, Platform};
use herald_session::gadget::ota::PushError;
use herald_store::{OtaUpdate, StoreError, StoreHandle};

use self::firmware::Firmware;
use self::link::LoginCodes;
use self::session::Sessions;

/// What the admin API needs of the devices the server holds.
#[async_trait]
pub trait Fleet: Send + Sync {
    /// Whether the device `id` of `platform` is connected now.
    fn is_online(&self, platform: Platform, id: &str) -> bool;
    /// How many devices of `platform` are connected now.
    fn online_count(&self, platform: Platform) -> usize;
    /// Whether `person` is an app token's user (someone a phone can be).
    fn is_token_user(&self, person: &str) -> bool;
    /// Forget the gadget `id` everywhere: its record, its pairing, a connection it has,
    /// firmware staged for it. False when no record was kept.
    async fn forget_gadget(&self, id: &str) -> Result<bool, StoreError>;
    /// Check the firmware `image` against the connected gadget `id`, stage it and start
    /// sending it. Every refusal comes back before a byte is sent.
    async fn push_firmware(&self, id: &str, image: PathBuf) -> Result<OtaUpdate, PushError>;
}

/// Write `admin.json` into `data_dir`: where the CLI finds the API at `url`.
pub fn publish(data_dir: &Path, url: &str) -> std::io::Result<PathBuf> {
    let endpoint = Endpoint {
        url: url.to_owned(),
        pid: std::process::id(),
        token: String::new(),
    };
    let path = data_dir.join(ENDPOINT_FILE);
    let json = serde_json::to_vec_pretty(&endpoint).map_err(std::io::Error::other)?;
    herald_files::write_private(&path, &json)?;
    Ok(path)
}

/// Forget the endpoint, so the CLI says "not running" instead of failing to connect.
pub fn unpublish(data_dir: &Path) {
    let _ = std::fs::remove_file(data_dir.join(ENDPOINT_FILE));
}

/// What every handler may reach.
#[derive(Clone)]
pub struct AdminState {
    pub token: Arc<str>,
    pub store: StoreHandle,
    /// Who may talk: Herald's own pairing store, or the backend's (Hermes).
    pub authorizer: Arc<dyn Authorizer>,
    /// Herald's own pairing store; `None` when the backend decides who may talk.
    pub access: Option<Arc<Access>>,
    pub fleet: Arc<dyn Fleet>,
    pub outbound: Arc<dyn Outbound>,
    pub metrics: Arc<Metrics>,
    pub info: Arc<Info>,
}

/// What the console keeps besides the API's state.
pub(crate) struct Console {
    sessions: Sessions,
    /// Codes of login links (`herald console`) not yet used or expired.
    links: LoginCodes,
    firmware: Firmware,
    /// Live event streams open now.
    streams: AtomicUsize,
}

impl Console {
    pub(crate) fn new(data_dir: &std::path::Path) -> Console {
        Console {
            sessions: Sessions::default(),
            links: LoginCodes::default(),
            firmware: Firmware::new(data_dir),
            streams: AtomicUsize::new(0),
        }
    }
}

/// The admin API's state and the console's, as handlers ask for either.
#[derive(Clone)]
pub(crate) struct App {
    pub api: AdminState,
    pub console: Arc<Console>,
}

impl FromRef<App> for AdminState {
    fn from_ref(app: &App) -> AdminState {
        app.api.clone()
    }
}

impl FromRef<App> for Arc<Console> {
    fn from_ref(app: &App) -> Arc<Console> {
        app.console.clone()
    }
}

/// Answer the API and the console on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AdminState) {
    if let Err(err) = axum::serve(listener, router(state)).await {
        tracing::error!(%err, "admin API stopped");
    }
}

/// The API and the console, as [`serve`] answers them.
fn router(state: AdminState) -> Router {
    let console = Arc::new(Console::new(&state.info.data_dir));
    let app = App {
        api: state,
        console,
    };
    Router::new()
        .route("/v1/info", get(api::info))
        .route("/metrics", get(api::metrics))
        .route("/v1/devices", get(api::devices))
        .route("/v1/devices/{id}", get(console::device).delete(api::forget))
        .route("/v1/devices/{id}/owner", put(api::owner))
        .route("/v1/phones", get(api::phones))
        .route("/v1/phones/{id}", get(console::phone))
        .route("/v1/push", get(api::push_list))
        .route("/v1/push/{device}", delete(api::push_remove))
        .route("/v1/pairing", get(api::pairings))
        .route("/v1/pairing/approve", post(api::approve))
        .route("/v1/pairing/revoke", post(api::revoke))
        .route("/v1/deliver", post(api::deliver))
        .route("/v1/display", post(console::display))
        .route("/v1/action", post(console::action))
        .route("/v1/ota", get(api::ota_list).post(firmware::ota_push))
        .route("/v1/ota/history", get(firmware::history))
        .route(
            "/v1/ota/uploads",
            post(firmware::upload).layer(DefaultBodyLimit::max(firmware::MAX_UPLOAD)),
        )
        .route("/v1/ota/uploads/{upload}/push", post(firmware::push))
        .route("/v1/ota/{id}", get(api::ota_status))
        .route("/v1/stats", get(console::stats))
        .route("/v1/server", get(console::server))
        .route("/v1/qr", get(console::qr))
        .route("/v1/events", get(live::events))
        .route("/v1/session", get(session::current).delete(session::logout))
        .route("/v1/console/link", post(link::mint))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            session::authorize,
        ))
        // Added after the check so they stay open: a browser has no token before it
        // logs in, and the pages hold no data.
        .route("/v1/login", post(session::login))
        .merge(console::pages())
        .layer(middleware::from_fn(session::local_host))
        // Open to any name too: supervisors' probes, and it tells nothing but the version.
        .route("/healthz", get(api::healthz))
        .with_state(app)
}

/// An error as the API returns it: a status and `{"error": message}`.
pub(crate) struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        tracing::error!(%err, "admin request failed");
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
    }
}

impl From<AccessError> for ApiError {
    fn from(err: AccessError) -> Self {
        tracing::warn!(%err, "pairing request failed");
        ApiError(StatusCode::BAD_GATEWAY, err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}
