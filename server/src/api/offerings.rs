//! `GET /api/v1/offerings`: the catalogue (live offerings at today's rates, with their option
//! catalogs); and `/api/v1/admin/offerings…`: every offering with its price history, creating,
//! changing, repricing and retiring one. The admin handlers take [`Admin`], so anyone else gets
//! 403 before the body is read.

use super::input::{ApiJson, ApiPath};
use super::responses::{AdminOnly, ErrorBody, Invalid, ServerError, Unauthenticated, UnsupportedMediaType};
use super::Items;
use crate::auth::{Admin, Caller};
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use serde::Serialize;
use tenantry_domain::offering::{NewOffering, OfferingPatch, OfferingRecord, PriceChange};
use tenantry_domain::Offering;

/// An offering as the API shows it (docs/DOMAIN.md §4's shape, plus the options it offers).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OfferingJson {
    #[serde(flatten)]
    #[schema(value_type = tenantry_domain::offering::OfferingWire)]
    pub offering: Offering,
    /// GPUs in one unit: 8 for an 8-GPU node, 1 for a GPU, 1/7 for a 1g MIG slice.
    pub gpus_per_unit: f64,
}

/// The catalogue
///
/// Every live (not retired) offering with the rates in effect now and its option catalog: each
/// option's choices with their price (`free`, `per_reservation` or `per_unit_hour`, in cents) and
/// the default a booking gets when it leaves the option out.
#[utoipa::path(
    get,
    path = "/offerings",
    operation_id = "list_offerings",
    tag = "catalogue",
    responses(
        (status = 200, description = "Offerings", body = Items<OfferingJson>),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(State(state): State<AppState>, Caller(_): Caller) -> ApiResult<Json<Items<OfferingJson>>> {
    let list = state.engine.offerings(Utc::now()).await?;
    Ok(Json(
        list.into_iter()
            .map(|offering| OfferingJson { gpus_per_unit: offering.gpus_per_unit().as_gpus(), offering })
            .collect::<Vec<_>>()
            .into(),
    ))
}

/// Every offering, retired ones too, with its price history (admins)
#[utoipa::path(
    get,
    path = "/admin/offerings",
    operation_id = "list_admin_offerings",
    tag = "offerings",
    responses(
        (status = 200, description = "Offerings with their price history", body = Items<OfferingRecord>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn admin_list(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<OfferingRecord>>> {
    Ok(Json(state.engine.admin_offerings(&who, Utc::now()).await?.into()))
}

/// Create an offering, priced from now (admins, audited)
///
/// It appears in `GET /offerings` at once. Every field is checked: the id's slug format, the
/// grain against the MIG profile (required for `mig`, refused otherwise, and only on MIG-capable
/// models), rates of 0 or more cents, known region names, and the option catalog (values valid
/// for their kind, each once, exactly one `default` per option that has choices, free choices
/// at 0 cents and priced ones above).
#[utoipa::path(
    post,
    path = "/admin/offerings",
    operation_id = "create_offering",
    tag = "offerings",
    request_body = NewOffering,
    responses(
        (status = 201, description = "Created", body = OfferingRecord),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 409, description = "An offering with this id exists (retired ones keep their id)", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<NewOffering>,
) -> ApiResult<(StatusCode, Json<OfferingRecord>)> {
    Ok((StatusCode::CREATED, Json(state.engine.create_offering(&who, &body, Utc::now()).await?)))
}

/// Change an offering's name, description, regions or option catalog (admins, audited)
///
/// `options` replaces the whole catalog. Send the `revision` you read to have the change refused
/// (409) when someone else changed the offering meanwhile. Reservations already booked keep the
/// option prices they locked.
#[utoipa::path(
    patch,
    path = "/admin/offerings/{id}",
    operation_id = "change_offering",
    tag = "offerings",
    params(("id" = String, Path, description = "The offering's id")),
    request_body = OfferingPatch,
    responses(
        (status = 200, description = "Changed", body = OfferingRecord),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, description = "No such offering", body = ErrorBody),
        (status = 409, description = "The offering is retired, or changed since the `revision` the change names", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn change(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(patch): ApiJson<OfferingPatch>,
) -> ApiResult<Json<OfferingRecord>> {
    Ok(Json(state.engine.change_offering(&who, &id, &patch, Utc::now()).await?))
}

/// Set new rates from a time: now (when `effective_at` is left out) or later (admins, audited)
///
/// Earlier rates stay in the history. Bookings made before it takes effect keep the rate they
/// locked, through extensions, cancellation fees and bills.
#[utoipa::path(
    post,
    path = "/admin/offerings/{id}/prices",
    operation_id = "change_offering_price",
    tag = "offerings",
    params(("id" = String, Path, description = "The offering's id")),
    request_body = PriceChange,
    responses(
        (status = 200, description = "The offering with its price history", body = OfferingRecord),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, description = "No such offering", body = ErrorBody),
        (status = 409, description = "The offering is retired, or already has a price taking effect at that instant", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn change_price(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(change): ApiJson<PriceChange>,
) -> ApiResult<Json<OfferingRecord>> {
    Ok(Json(state.engine.change_price(&who, &id, &change, Utc::now()).await?))
}

/// Retire an offering now: no new bookings, quotes or bursts (409); its reservations keep running, changing and being billed (admins, audited)
#[utoipa::path(
    post,
    path = "/admin/offerings/{id}/retire",
    operation_id = "retire_offering",
    tag = "offerings",
    params(("id" = String, Path, description = "The offering's id")),
    responses(
        (status = 200, description = "Retired", body = OfferingRecord),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, description = "No such offering", body = ErrorBody),
        (status = 409, description = "Already retired", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn retire(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<OfferingRecord>> {
    Ok(Json(state.engine.retire_offering(&who, &id, Utc::now()).await?))
}
