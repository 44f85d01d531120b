//! The console's own endpoints and its pages.
//!
//! The console is a page of plain HTML and one script (`web/src/console`, built into
//! `web/dist/console` and compiled in by `herald-pages`), served at `/` of the admin listener
//! with the in-tab gadget at `/gadget/`. Everything it shows comes from the admin API:
//! the CLI's endpoints plus the few here that a person needs and a script did not
//! (one device in full with its recent conversation, cards, actions, figures, QR codes).
//! The pages carry no data and are served without a session; every endpoint needs one.

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use herald_admin_api::{DeviceView, OtaView, PhoneView};
use herald_port::{ActionError, Card, Chat, DeviceProfile, Platform};
use serde::{Deserialize, Serialize};

use super::api::{device_view, gauges, ota_view, phone_view, subscribed_phones};
use super::{AdminState, ApiError, App};
use herald_metrics::activity::ConversationEvent;
use herald_metrics::Stats;
use herald_pages::{Page, ADMIN_PAGES};

/// The longest card title and body the console sends.
pub(crate) const MAX_CARD_TITLE: usize = 100;
pub(crate) const MAX_CARD_BODY: usize = 2000;

fn not_found(message: String) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, message)
}

/// Whether the user may talk to the agent: Herald's own answer, or (under Hermes) what
/// the connected device's session last heard.
async fn paired(
    state: &AdminState,
    platform: Platform,
    id: &str,
    profile: Option<&DeviceProfile>,
) -> Result<Option<bool>, ApiError> {
    match &state.access {
        Some(access) => Ok(Some(access.is_authorized(platform, id).await?)),
        None => Ok(profile.map(|p| p.paired)),
    }
}

/// `GET /v1/devices/{id}`: one gadget in full.
#[derive(Debug, Serialize)]
pub(crate) struct DeviceDetail {
    #[serde(flatten)]
    device: DeviceView,
    /// `None` under Hermes while the device is offline: only Hermes knows then.
    paired: Option<bool>,
    /// What the connected device says about itself (screen, speaker, actions).
    profile: Option<DeviceProfile>,
    events: Vec<ConversationEvent>,
    ota: Option<OtaView>,
}

pub(crate) async fn device(
    State(state): State<AdminState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<DeviceDetail>, ApiError> {
    let target = id.clone();
    let record = state
        .store
        .run_fresh(move |store| store.device(&target))
        .await?
        .ok_or_else(|| {
            not_found(format!(
                "no device {id}: it was forgotten, or never enrolled"
            ))
        })?;
    let target = id.clone();
    let ota = state
        .store
        .run(move |store| store.ota_update(&target))
        .await?;
    let chat = Chat::gadget(id.as_str());
    let online = state.fleet.is_online(Platform::Gadget, &id);
    let profile = match online {
        true => state.outbound.profile(&chat).await.ok(),
        false => None,
    };
    Ok(Json(DeviceDetail {
        paired: paired(&state, Platform::Gadget, &id, profile.as_ref()).await?,
        device: DeviceView {
            online,
            record: device_view(record),
        },
        profile,
        events: state.metrics.activity.recent(&chat),
        ota: ota.map(|u| ota_view(&state, u)),
    }))
}

/// `GET /v1/phones/{id}`: one phone in full.
#[derive(Debug, Serialize)]
pub(crate) struct PhoneDetail {
    #[serde(flatten)]
    phone: PhoneView,
    /// Whether its user may talk; `None` under Hermes.
    paired: Option<bool>,
    events: Vec<ConversationEvent>,
}

pub(crate) async fn phone(
    State(state): State<AdminState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<PhoneDetail>, ApiError> {
    let record = state
        .store
        .run(move |store| store.phones())
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| not_found(format!("no phone {id} has connected")))?;
    let paired = paired(&state, Platform::Mobile, &record.user_id, None).await?;
    let notifications = subscribed_phones(&state).await?.contains(&id);
    let chat = Chat::mobile(id.as_str());
    Ok(Json(PhoneDetail {
        events: state.metrics.activity.recent(&chat),
        paired,
        phone: PhoneView {
            online: state.fleet.is_online(Platform::Mobile, &id),
            record: phone_view(record, notifications),
        },
    }))
}

/// `POST /v1/display`: a card on a device's screen (a phone gets it as a message).
#[derive(Debug, Deserialize)]
pub(crate) struct DisplayRequest {
    chat: Chat,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: String,
    /// Seconds to show it; 0 keeps it until dismissed; absent: the device's default.
    #[serde(default)]
    ttl_s: Option<u32>,
}

pub(crate) async fn display(
    State(state): State<AdminState>,
    Json(request): Json<DisplayRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (title, body) = (request.title.trim(), request.body.trim());
    if title.is_empty() && body.is_empty() {
        return Err(ApiError::bad_request("a card needs a title or a body"));
    }
    if title.chars().count() > MAX_CARD_TITLE || body.chars().count() > MAX_CARD_BODY {
        return Err(ApiError::bad_request(format!(
            "a card's title takes at most {MAX_CARD_TITLE} characters, its body {MAX_CARD_BODY}"
        )));
    }
    let card = Card {
        title: title.to_owned(),
        body: body.to_owned(),
        ttl_s: request.ttl_s,
    };
    state.outbound.display(&request.chat, card).await?;
    Ok(Json(serde_json::json!({ "shown": true })))
}

/// `POST /v1/action`: run one of a gadget's actions, as the agent's tool would.
#[derive(Debug, Deserialize)]
pub(crate) struct ActionRequest {
    device_id: String,
    name: String,
    #[serde(default)]
    args: serde_json::Value,
}

impl From<ActionError> for ApiError {
    fn from(err: ActionError) -> Self {
        let status = match &err {
            ActionError::UnknownAction(_) => StatusCode::NOT_FOUND,
            ActionError::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ActionError::Disconnected => StatusCode::CONFLICT,
            ActionError::Device(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ActionError::Delivery(err) => return ApiError::from(err.clone()),
        };
        ApiError(status, err.to_string())
    }
}

pub(crate) async fn action(
    State(state): State<AdminState>,
    Json(request): Json<ActionRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let args = match request.args {
        serde_json::Value::Null => serde_json::json!({}),
        args @ serde_json::Value::Object(_) => args,
        _ => {
            return Err(ApiError::bad_request(
                "an action's arguments are a JSON object",
            ))
        }
    };
    let chat = Chat::gadget(request.device_id);
    let result = state
        .outbound
        .invoke_action(&chat, &request.name, args)
        .await?;
    Ok(Json(serde_json::json!({ "result": result })))
}

/// `GET /v1/stats`: the main figures of `/metrics`, as JSON.
pub(crate) async fn stats(State(state): State<AdminState>) -> Result<Json<Stats>, ApiError> {
    Ok(Json(state.metrics.stats(&gauges(&state).await?)))
}

/// The addresses devices use, as the server page shows them.
#[derive(Debug, Serialize)]
pub(crate) struct Urls {
    /// Where gadgets connect (`ws://…/gadget`).
    gadget: String,
    /// Where apps connect (`ws://…/ws`).
    mobile: String,
    /// The browser chat on the phone listener: a phone's camera opens it from the QR.
    chat: String,
}

fn urls(state: &AdminState) -> Urls {
    let info = &state.info;
    Urls {
        gadget: info.gadget_url.clone(),
        mobile: info.mobile_url.clone(),
        chat: herald_admin_api::chat_page_url(&info.mobile_url),
    }
}

/// `GET /v1/server`: what the server page shows besides the figures.
#[derive(Debug, Serialize)]
pub(crate) struct ServerView {
    version: String,
    data_dir: std::path::PathBuf,
    urls: Urls,
    /// Whether Herald approves pairings itself; `false` when Hermes does.
    pairing: bool,
}

pub(crate) async fn server(State(state): State<AdminState>) -> Json<ServerView> {
    Json(ServerView {
        version: state.info.version.clone(),
        data_dir: state.info.data_dir.clone(),
        urls: urls(&state),
        pairing: state.access.is_some(),
    })
}

#[derive(Debug, Deserialize)]
pub(crate) struct QrQuery {
    #[serde(rename = "for")]
    target: String,
}

/// `GET /v1/qr?for=gadget|mobile|chat`: a QR code (SVG) of one of the [`Urls`]. Only
/// those: the endpoint draws no text a caller chooses, and never a token.
pub(crate) async fn qr(
    State(state): State<AdminState>,
    Query(query): Query<QrQuery>,
) -> Result<Response, ApiError> {
    let urls = urls(&state);
    let text = match query.target.as_str() {
        "gadget" => urls.gadget,
        "mobile" => urls.mobile,
        "chat" => urls.chat,
        other => {
            return Err(ApiError::bad_request(format!(
                "no QR code for {other:?}: ask for gadget, mobile or chat"
            )))
        }
    };
    let svg = qr_svg(&text).ok_or_else(|| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{text} is too long for a QR code"),
        )
    })?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        svg,
    )
        .into_response())
}

/// `text` as a QR code in SVG (error correction M, a quiet zone around it).
pub fn qr_svg(text: &str) -> Option<String> {
    let code =
        qrcode::QrCode::with_error_correction_level(text.as_bytes(), qrcode::EcLevel::M).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color<'_>>()
            .min_dimensions(200, 200)
            .quiet_zone(true)
            .dark_color(qrcode::render::svg::Color("#000000"))
            .light_color(qrcode::render::svg::Color("#ffffff"))
            .build(),
    )
}

/// The console's policy: its own scripts and styles only, nothing framed, nothing sent
/// elsewhere. The QR codes are `<img>`s from this origin.
const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";
/// The in-tab gadget runs the device core as WebAssembly from its own origin, connects
/// to the gadget listener (another port), and the console may show it in a frame.
const GADGET_CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
     connect-src 'self' ws: wss:; \
     img-src 'self' data: blob:; media-src 'self' blob:; base-uri 'none'; \
     frame-ancestors 'self'";

fn page_response(page: &'static Page) -> Response {
    let csp = match page.path.starts_with("/gadget/") {
        true => GADGET_CSP,
        false => CONSOLE_CSP,
    };
    let mut response = (
        [
            (header::CONTENT_TYPE, page.content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        page.body,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /gadget/server.json`: where the in-tab gadget connects, however its page was
/// opened. Open like the pages: devices are told this URL anyway.
async fn gadget_server(State(state): State<AdminState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "gadget_url": state.info.gadget_url }))
}

/// The console and the in-tab gadget, open to every request: they hold no data.
pub(crate) fn pages() -> Router<App> {
    let mut router = Router::new()
        // `/gadget` without the slash would resolve the page's relative links wrongly.
        .route("/gadget", get(|| async { Redirect::permanent("/gadget/") }))
        .route("/gadget/server.json", get(gadget_server));
    for page in ADMIN_PAGES {
        router = router.route(page.path, get(move || async move { page_response(page) }));
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qr_codes_are_svg() {
        let svg = qr_svg("ws://192.168.1.5:8765/gadget").unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "{svg}");
        assert!(svg.contains("#000000"));
        assert!(qr_svg(&"x".repeat(5000)).is_none());
    }
}
