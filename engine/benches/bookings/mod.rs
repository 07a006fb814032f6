//! What the booking benchmarks share (the engine's, and the HTTP ones of the server, which include
//! this file): the pseudo-random bookings they send, the quota lift that makes every booking a
//! question of capacity, and percentiles.

use chrono::{Duration, DurationRound, Utc};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_engine::Engine;

/// The `p` quantile (0 to 1) of sorted figures; NaN when there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A small pseudo-random booking (SplitMix64 on `i`): 1–2 units of a GPU or MIG offering, starting
/// on a quarter hour within 30 days, 1–8 hours long.
pub fn random_booking(i: u64) -> BookingInput {
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x1234_5678);
    let mut next = move |n: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (x ^ (x >> 31)) % n
    };
    let offering = ["h100-gpu", "l40s-gpu", "a100-1g.10gb", "a100-3g.40gb"][next(4) as usize];
    let base = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(2);
    let start = base + Duration::minutes(15 * next(30 * 96) as i64);
    BookingInput {
        offering: offering.to_owned(),
        quantity: 1 + next(2) as i64,
        start,
        end: start + Duration::hours(1 + next(8) as i64),
        region: None,
        options: OptionsInput::default(),
        class: None,
    }
}

/// [`random_booking`] as the JSON body of `POST /api/v1/reservations`.
#[allow(dead_code)] // Only the HTTP benches send bodies; the engine's books the input itself.
pub fn body(i: u64) -> String {
    serde_json::to_string(&random_booking(i)).unwrap()
}

/// Lifts the demo team acme's quotas, so every booking is decided on capacity, not policy.
pub async fn lift_acme_quotas(engine: &Engine) {
    let admin = engine.store.identity_by_email("admin@tenantry.example").await.unwrap().unwrap();
    let unlimited: tenantry_domain::policy::PolicyPatch = serde_json::from_value(serde_json::json!({
        "max_quantity_without_approval": null, "monthly_gpu_hours": {"soft": null, "hard": null},
        "concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": null}, "A100-80GB": {"soft": null, "hard": null},
                            "L40S-48GB": {"soft": null, "hard": null}}
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &unlimited, Utc::now()).await.unwrap();
}
