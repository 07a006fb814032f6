//! Identity at its edges, on SQLite and PostgreSQL: first sign-ins racing, tokens for disabled
//! people, sign-in attempts taken once, invitations that expire, and what a lead leaving does to
//! the team's calendar feed and webhooks.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::identity::SignInAttempt;
use crate::store::Store;
use crate::test_helpers::who;
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::{Access, Role};

/// Whole seconds, so times read back from PostgreSQL (microseconds) compare equal.
fn t0() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::seconds(1)).unwrap()
}

async fn seeded(store: Store) -> Engine {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(
        &engine,
        &SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO },
        t0() - Duration::hours(1),
    )
    .await
    .unwrap();
    engine
}

fn lead_of(team: &str) -> Access {
    Access { tenant: Some((team.to_owned(), Role::Lead)), is_admin: false }
}

store_test!(first_sign_ins_of_one_person_at_once_make_one_user, |store: Store| async move {
    let engine = seeded(store).await;
    let now = t0();
    // Eight sign-ins of one new person into a new team, on four instances, at the same instant.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let e = Engine::new(engine.store.clone(), engine.config.clone());
        tasks.push(tokio::spawn(async move {
            e.sso_sign_in("sub-new", "new@racers.example", true, "New", &lead_of("racers"), now).await
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        let who = t.await.unwrap().expect("every racing first sign-in succeeds");
        assert_eq!(who.tenant.as_ref().map(|t| t.slug.as_str()), Some("racers"));
        ids.insert(who.user_id);
    }
    assert_eq!(ids.len(), 1, "all as the same user: {ids:?}");
});

store_test!(no_token_for_a_disabled_person, |store: Store| async move {
    let engine = seeded(store).await;
    let now = t0();
    let admin = who(&engine, "admin@tenantry.example").await;
    let member = who(&engine, "member@acme.example").await;
    engine.disable_user(&admin, member.user_id, now).await.unwrap();
    match engine.create_api_token("member@acme.example", "ci", now).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("member@acme.example") && m.contains("disabled"), "{m}"),
        other => panic!("a disabled person gets no token: {other:?}"),
    }
    assert!(engine.api_tokens(&member).await.unwrap().iter().all(|t| t.name != "ci"), "nothing was written");
    // Enabled again, they may have one.
    engine.enable_user(&admin, member.user_id, now).await.unwrap();
    engine.create_api_token("member@acme.example", "ci", now).await.unwrap();
});

fn attempt(state: &str, binding: &str, now: DateTime<Utc>, lifetime: Duration) -> SignInAttempt {
    SignInAttempt {
        state: state.to_owned(),
        binding: binding.to_owned(),
        nonce: format!("nonce-{state}"),
        pkce_verifier: format!("verifier-{state}"),
        created_at: now,
        expires_at: now + lifetime,
    }
}

store_test!(a_sign_in_attempt_is_taken_once_by_its_own_browser_before_it_expires, |store: Store| async move {
    let now = t0();
    let ten = Duration::minutes(10);
    store.insert_sign_in_attempt(&attempt("s1", "b1", now, ten), now).await.unwrap();
    assert_eq!(store.take_sign_in_attempt("s1", "other-browser", now).await.unwrap(), None);
    assert_eq!(store.take_sign_in_attempt("forged", "b1", now).await.unwrap(), None);
    // Eight callbacks with the same state at once: exactly one gets it.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move { s.take_sign_in_attempt("s1", "b1", now).await.unwrap() }));
    }
    let mut got = Vec::new();
    for t in tasks {
        got.extend(t.await.unwrap());
    }
    assert_eq!(got, vec![attempt("s1", "b1", now, ten)], "one taker");
    // An expired attempt is refused, and the next sign-in deletes it.
    store.insert_sign_in_attempt(&attempt("s2", "b1", now, ten), now).await.unwrap();
    let later = now + Duration::minutes(11);
    assert_eq!(store.take_sign_in_attempt("s2", "b1", later).await.unwrap(), None);
    store.insert_sign_in_attempt(&attempt("s3", "b1", later, ten), later).await.unwrap();
    assert_eq!(store.take_sign_in_attempt("s2", "b1", now).await.unwrap(), None, "deleted, not just refused");
});

/// The secret at the end of a feed URL.
fn secret_of(url: &str) -> String {
    url.rsplit('/').next().unwrap().trim_end_matches(".ics").to_owned()
}

/// Whether the team feed at `url` still opens.
async fn opens(engine: &Engine, url: &str) -> bool {
    let portal = engine.portal(None);
    engine.calendar_feed(&secret_of(url), &portal, t0()).await.unwrap().is_some()
}

/// A second lead of Acme (signed in through SSO), with the team feed's URL they read and a
/// webhook they registered.
async fn second_lead(engine: &Engine, subject: &str, email: &str) -> (tenantry_domain::Identity, String) {
    let lead = engine.sso_sign_in(subject, email, true, "Second", &lead_of("acme"), t0()).await.unwrap();
    let feeds = engine.calendar_feeds(&lead, &engine.portal(None), t0()).await.unwrap();
    let url = feeds.team_url.expect("a lead reads the team feed");
    let tenant_id = lead.tenant_id().unwrap();
    engine.store.insert_webhook(tenant_id, "https://hooks.example/acme-ci", "s", lead.user_id, t0()).await.unwrap();
    (lead, url)
}

async fn owner_left_notices(engine: &Engine, email: &str) -> Vec<String> {
    let lead = who(engine, email).await;
    let rows = engine.notifications(&lead).await.unwrap();
    rows.into_iter().filter(|n| n.kind == "webhook_owner_left").map(|n| n.message).collect()
}

store_test!(a_disabled_lead_takes_the_team_feed_address_with_them, |store: Store| async move {
    let engine = seeded(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    // A member leaving changes nothing: members never see the team feed.
    let member = who(&engine, "member@acme.example").await;
    let (_, url) = second_lead(&engine, "sub-l2", "l2@acme.example").await;
    engine.disable_user(&admin, member.user_id, t0()).await.unwrap();
    assert!(opens(&engine, &url).await, "a member's leaving keeps the feed");
    assert!(owner_left_notices(&engine, "lead@acme.example").await.is_empty());

    let l2 = who(&engine, "l2@acme.example").await;
    engine.disable_user(&admin, l2.user_id, t0()).await.unwrap();
    assert!(!opens(&engine, &url).await, "the address the disabled lead read answers nothing");
    let lead = who(&engine, "lead@acme.example").await;
    let fresh = engine.calendar_feeds(&lead, &engine.portal(None), t0()).await.unwrap().team_url.unwrap();
    assert!(fresh != url && opens(&engine, &fresh).await, "the team has a new address");
    let told = owner_left_notices(&engine, "lead@acme.example").await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("l2@acme.example") && told[0].contains("https://hooks.example/acme-ci"), "{told:?}");
});

store_test!(a_lead_demoted_or_moved_by_their_groups_takes_the_feed_address_with_them, |store: Store| async move {
    let engine = seeded(store).await;
    let member_of_acme = Access { tenant: Some(("acme".to_owned(), Role::Member)), is_admin: false };
    let (_, url) = second_lead(&engine, "sub-l3", "l3@acme.example").await;
    // Signing in again as a lead changes nothing.
    engine.sso_sign_in("sub-l3", "l3@acme.example", true, "L3", &lead_of("acme"), t0()).await.unwrap();
    assert!(opens(&engine, &url).await);
    engine.sso_sign_in("sub-l3", "l3@acme.example", true, "L3", &member_of_acme, t0()).await.unwrap();
    assert!(!opens(&engine, &url).await, "demoted to member");
    assert_eq!(owner_left_notices(&engine, "lead@acme.example").await.len(), 1);

    let (_, url) = second_lead(&engine, "sub-l4", "l4@acme.example").await;
    engine.sso_sign_in("sub-l4", "l4@acme.example", true, "L4", &lead_of("globex"), t0()).await.unwrap();
    assert!(!opens(&engine, &url).await, "moved to another team");
    let told = owner_left_notices(&engine, "lead@acme.example").await;
    assert!(told.iter().any(|m| m.contains("l4@acme.example")), "{told:?}");
    assert!(owner_left_notices(&engine, "lead@globex.example").await.is_empty(), "only the team left is told");

    let (_, url) = second_lead(&engine, "sub-l5", "l5@acme.example").await;
    let none = Access::default();
    assert!(engine.sso_sign_in("sub-l5", "l5@acme.example", true, "L5", &none, t0()).await.is_err());
    assert!(!opens(&engine, &url).await, "removed at the provider");
});

store_test!(an_invitation_expires_and_needs_an_email_the_provider_verified, |store: Store| async move {
    use crate::identity::EmailProof;
    let engine = seeded(store).await;
    let now = t0();
    let admin = who(&engine, "admin@tenantry.example").await;
    let none = Access::default();
    assert!(matches!(
        engine.grant_admin(&admin, "boss@new.example", 0, now).await,
        Err(EngineError::Invalid { field: "expires_in_days", .. })
    ));
    let (created, until) = engine.grant_admin(&admin, "boss@new.example", 2, now).await.unwrap();
    assert!(created);
    assert_eq!(until, Some(now + Duration::days(2)));

    // An e-mail trusted only by the portal's setting claims no invitation (and with no group,
    // signs in as nobody).
    let trusted = engine.sso_sign_in("sub-boss", "boss@new.example", EmailProof::Trusted, "B", &none, now).await;
    assert!(matches!(trusted, Err(EngineError::Forbidden(_))), "{trusted:?}");
    // Past its expiry, the invitation is ignored even for a verified e-mail.
    let late = now + Duration::days(3);
    let expired = engine.sso_sign_in("sub-boss", "boss@new.example", true, "B", &none, late).await;
    assert!(matches!(expired, Err(EngineError::Forbidden(_))), "{expired:?}");
    let with_team = engine.sso_sign_in("sub-boss", "boss@new.example", true, "B", &lead_of("acme"), late).await;
    assert!(matches!(with_team, Err(EngineError::Conflict(_))), "the expired invitation is not claimed: {with_team:?}");

    // Granted again, it is claimable again, by a verified e-mail, which makes them admin.
    let (created, _) = engine.grant_admin(&admin, "boss@new.example", 7, late).await.unwrap();
    assert!(!created);
    let boss = engine.sso_sign_in("sub-boss", "boss@new.example", true, "B", &none, late).await.unwrap();
    assert!(boss.is_admin);
    assert_eq!(engine.store.invitation_expiry("boss@new.example").await.unwrap(), None, "claimed");
});
