//! The admin API's JSON endpoints: what the CLI and the console read and change.
//!
//! Every handler here runs behind the authorization of `session.rs` (a bearer token or a
//! console session); the shapes are the CLI's contract (`herald-admin-api`, except the
//! views of the store's phones and updates below) and stay as they are.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use herald_admin_api::{
    ApproveRequest, DeliverKind, DeliverRequest, Delivered, DeviceRecordView, DeviceView, Info,
    OtaView, OwnerRequest, PhoneRecordView, PhoneView, PushView, RevokeRequest,
};
use herald_gadget_proto::limits::OTA_MAX_ATTEMPTS;
use herald_gadget_proto::OtaRefusal;
use herald_port::{Chat, DeliveryError, Platform, SendOptions};
use herald_session::gadget::ota::PushError;

use super::{AdminState, ApiError};
use herald_access::Access;
use herald_metrics::Gauges;
use herald_store::{DeviceRecord, OtaUpdate, PairingRecord, PhoneRecord};

/// A gadget's record as the API shows it.
pub(crate) fn device_view(r: DeviceRecord) -> DeviceRecordView {
    DeviceRecordView {
        id: r.id,
        name: r.name,
        board: r.board,
        firmware: r.firmware,
        enrolled_at: r.enrolled_at,
        last_seen: r.last_seen,
        sensors: r.sensors,
        owner: r.owner,
    }
}

pub(super) async fn healthz() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        herald_pages::HEALTH,
    )
}

/// Prometheus text format; scrape with the admin token as a bearer token.
pub(super) async fn metrics(State(state): State<AdminState>) -> Result<Response, ApiError> {
    let body = state.metrics.render(&gauges(&state).await?);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

pub(super) async fn info(State(state): State<AdminState>) -> Json<Info> {
    Json((*state.info).clone())
}

pub(super) async fn devices(
    State(state): State<AdminState>,
) -> Result<Json<Vec<DeviceView>>, ApiError> {
    let records = state.store.run_fresh(move |store| store.devices()).await?;
    Ok(Json(
        records
            .into_iter()
            .map(|record| DeviceView {
                online: state.fleet.is_online(Platform::Gadget, &record.id),
                record: device_view(record),
            })
            .collect(),
    ))
}

/// A phone's record as the API shows it.
pub(crate) fn phone_view(record: PhoneRecord, notifications: bool) -> PhoneRecordView {
    PhoneRecordView {
        id: record.id,
        user_id: record.user_id,
        name: record.info.name,
        platform: record.info.platform,
        first_seen: record.first_seen,
        last_seen: record.last_seen,
        notifications,
    }
}

/// The phones with a push subscription.
pub(crate) async fn subscribed_phones(state: &AdminState) -> Result<Vec<String>, ApiError> {
    let subscriptions = state
        .store
        .run(|store| store.push_subscriptions(None))
        .await?;
    Ok(subscriptions.into_iter().map(|sub| sub.device_id).collect())
}

pub(super) async fn phones(
    State(state): State<AdminState>,
) -> Result<Json<Vec<PhoneView>>, ApiError> {
    let records = state.store.run(move |store| store.phones()).await?;
    let subscribed = subscribed_phones(&state).await?;
    Ok(Json(
        records
            .into_iter()
            .map(|record| {
                let notifications = subscribed.contains(&record.id);
                PhoneView {
                    online: state.fleet.is_online(Platform::Mobile, &record.id),
                    record: phone_view(record, notifications),
                }
            })
            .collect(),
    ))
}

/// `GET /v1/push`: every phone's push subscription, by the push service's host.
pub(super) async fn push_list(
    State(state): State<AdminState>,
) -> Result<Json<Vec<PushView>>, ApiError> {
    let subscriptions = state
        .store
        .run(|store| store.push_subscriptions(None))
        .await?;
    let view = |sub: herald_store::PushRecord| {
        let after_scheme = sub.endpoint.split_once("://").map_or("", |(_, rest)| rest);
        let service = after_scheme
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        PushView {
            device_id: sub.device_id,
            user_id: sub.user_id,
            service: service.to_owned(),
        }
    };
    Ok(Json(subscriptions.into_iter().map(view).collect()))
}

/// `DELETE /v1/push/{device}`: no more notifications to that phone's app.
pub(super) async fn push_remove(
    State(state): State<AdminState>,
    UrlPath(device): UrlPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = device.clone();
    let removed = state
        .store
        .run(move |store| store.remove_push_subscription(&id))
        .await?;
    if !removed {
        let why = format!("{device} has no push subscription");
        return Err(ApiError(StatusCode::NOT_FOUND, why));
    }
    state.metrics.activity.changed();
    Ok(Json(serde_json::json!({ "removed": device })))
}

pub(super) async fn forget(
    State(state): State<AdminState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let forgotten = state.fleet.forget_gadget(&id).await?;
    state.metrics.activity.forget(&Chat::gadget(id.as_str()));
    state.metrics.activity.changed();
    if !forgotten {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no device {id}")));
    }
    Ok(Json(serde_json::json!({ "forgotten": id })))
}

/// Herald's own pairing store, unless the backend decides access.
fn own_access(state: &AdminState) -> Result<Arc<Access>, ApiError> {
    state.access.clone().ok_or_else(|| {
        ApiError(
            StatusCode::CONFLICT,
            "Hermes decides who may talk here: approve by the code the device shows, \
             or wait for it with `hermes gadget pair`"
                .into(),
        )
    })
}

pub(super) async fn pairings(
    State(state): State<AdminState>,
) -> Result<Json<Vec<PairingRecord>>, ApiError> {
    Ok(Json(state.authorizer.pairings().await?))
}

pub(super) async fn approve(
    State(state): State<AdminState>,
    Json(request): Json<ApproveRequest>,
) -> Result<Json<PairingRecord>, ApiError> {
    let platform = request.platform;
    // Checked first: a refused owner leaves the pairing pending, to be tried again.
    if let Some(owner) = &request.owner {
        if platform != Platform::Gadget {
            let why = "only a gadget takes an owner: a phone is its app token's user's";
            return Err(ApiError(StatusCode::BAD_REQUEST, why.into()));
        }
        check_person(&state, owner).await?;
    }
    let record = match (request.code, request.user_id) {
        (Some(code), None) => state
            .authorizer
            .approve_code(platform, &code)
            .await?
            .ok_or_else(|| {
                ApiError(
                    StatusCode::NOT_FOUND,
                    "no pending pairing with that code (codes last one hour)".into(),
                )
            })?,
        (None, Some(user)) => own_access(&state)?.approve_user(platform, &user).await?,
        _ => {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                "give either a code or a user id".into(),
            ))
        }
    };
    if let Some(owner) = request.owner {
        set_owner(&state, &record.user_id, Some(owner)).await?;
    }
    state
        .outbound
        .set_authorized(platform, &record.user_id, true)
        .await;
    state.metrics.activity.changed();
    Ok(Json(record))
}

/// `PUT /v1/devices/{id}/owner`: whose gadget `id` is, or nobody's.
pub(super) async fn owner(
    State(state): State<AdminState>,
    UrlPath(id): UrlPath<String>,
    Json(request): Json<OwnerRequest>,
) -> Result<Json<DeviceRecordView>, ApiError> {
    if let Some(owner) = &request.owner {
        check_person(&state, owner).await?;
    }
    set_owner(&state, &id, request.owner).await?;
    let record = state
        .store
        .run_fresh(move |store| store.device(&id))
        .await?;
    let record =
        record.ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "forgotten meanwhile".into()))?;
    state.metrics.activity.changed();
    Ok(Json(device_view(record)))
}

/// `person` must be someone a phone can be: an app token's user or a phone's.
async fn check_person(state: &AdminState, person: &str) -> Result<(), ApiError> {
    if state.fleet.is_token_user(person) {
        return Ok(());
    }
    let phones = state.store.run(|store| store.phones()).await?;
    if phones.iter().any(|phone| phone.user_id == person) {
        return Ok(());
    }
    let why = format!(
        "nobody called {person}: an owner is an app token's user (its label in \
         MOBILE_EXTRA_TOKENS, or the id `herald phones` shows)"
    );
    Err(ApiError(StatusCode::BAD_REQUEST, why))
}

async fn set_owner(state: &AdminState, id: &str, owner: Option<String>) -> Result<(), ApiError> {
    let device = id.to_owned();
    let set = state
        .store
        .run(move |store| store.set_owner(&device, owner.as_deref()))
        .await?;
    if !set {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no device {id}")));
    }
    Ok(())
}

pub(super) async fn revoke(
    State(state): State<AdminState>,
    Json(request): Json<RevokeRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (platform, user) = (request.platform, request.user_id);
    if !state.authorizer.revoke(platform, &user).await? {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("{user} has no pairing on {platform}"),
        ));
    }
    // Revoking a pairing does not override an allowlist.
    let still = state.authorizer.is_authorized(platform, &user).await?;
    state.outbound.set_authorized(platform, &user, still).await;
    state.metrics.activity.changed();
    Ok(Json(serde_json::json!({ "revoked": user })))
}

impl From<DeliveryError> for ApiError {
    fn from(err: DeliveryError) -> Self {
        let status = match &err {
            DeliveryError::Offline(_) => StatusCode::CONFLICT,
            DeliveryError::UnknownChat(_) | DeliveryError::UnknownMessage(_) => {
                StatusCode::NOT_FOUND
            }
            DeliveryError::Unsupported { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            DeliveryError::Failed(_) => StatusCode::BAD_GATEWAY,
        };
        ApiError(status, err.to_string())
    }
}

pub(super) async fn deliver(
    State(state): State<AdminState>,
    Json(request): Json<DeliverRequest>,
) -> Result<Json<Delivered>, ApiError> {
    let bad = |message: &str| ApiError(StatusCode::BAD_REQUEST, message.into());
    let text = request.text.filter(|t| !t.trim().is_empty());
    if text.is_none() && request.media.is_empty() {
        return Err(bad("nothing to deliver: give text or media"));
    }
    if request.media.iter().any(|m| !m.path.is_absolute()) {
        return Err(bad("give media as absolute paths"));
    }
    let (out, chat) = (&state.outbound, &request.chat);
    let message_id = match text {
        Some(text) => Some(out.send_text(chat, &text, SendOptions::default()).await?),
        None => None,
    };
    for media in request.media {
        match media.kind.unwrap_or_else(|| DeliverKind::of(&media.path)) {
            DeliverKind::Voice => out.send_voice(chat, media.path).await?,
            DeliverKind::Image => out.send_image(chat, media.path, None).await?,
            DeliverKind::Document => out.send_document(chat, media.path, None).await?,
        }
    }
    Ok(Json(Delivered { message_id }))
}

impl From<PushError> for ApiError {
    fn from(err: PushError) -> Self {
        let status = match &err {
            PushError::Offline(_)
            | PushError::Refused {
                refusal: OtaRefusal::Busy,
                ..
            } => StatusCode::CONFLICT,
            PushError::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            PushError::Unreadable { .. } => StatusCode::BAD_REQUEST,
            PushError::Staging { .. } | PushError::Store(_) => {
                tracing::error!(%err, "firmware update failed to start");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        ApiError(status, err.to_string())
    }
}

pub(super) async fn ota_list(
    State(state): State<AdminState>,
) -> Result<Json<Vec<OtaView>>, ApiError> {
    let updates = state.store.run(move |store| store.ota_updates()).await?;
    Ok(Json(
        updates.into_iter().map(|u| ota_view(&state, u)).collect(),
    ))
}

pub(super) async fn ota_status(
    State(state): State<AdminState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<OtaView>, ApiError> {
    let device = id.clone();
    let update = state
        .store
        .run(move |store| store.ota_update(&device))
        .await?
        .ok_or_else(|| {
            ApiError(
                StatusCode::NOT_FOUND,
                format!("no firmware update for {id}"),
            )
        })?;
    Ok(Json(ota_view(&state, update)))
}

pub(super) fn ota_view(state: &AdminState, update: OtaUpdate) -> OtaView {
    OtaView {
        online: state.fleet.is_online(Platform::Gadget, &update.device_id),
        update,
        max_attempts: OTA_MAX_ATTEMPTS,
    }
}

/// The figures that live outside [`Metrics`](herald_metrics::Metrics).
pub(crate) async fn gauges(state: &AdminState) -> Result<Gauges, ApiError> {
    let updates = state.store.run(move |store| store.ota_updates()).await?;
    let mut by_status = std::collections::BTreeMap::<String, u64>::new();
    for update in &updates {
        *by_status
            .entry(update.progress.status.as_str().to_owned())
            .or_default() += 1;
    }
    Ok(Gauges {
        gadgets_online: state.fleet.online_count(Platform::Gadget),
        phones_online: state.fleet.online_count(Platform::Mobile),
        ota: by_status.into_iter().collect(),
        ota_bytes_sent: updates.iter().map(|u| u.progress.bytes_sent).sum(),
    })
}
