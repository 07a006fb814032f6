//! Admin → Users on SQLite and PostgreSQL: listing users and their tokens, revoking another user's
//! token, disabling and enabling users.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::identity::{DisableOutcome, NewUser};
use crate::store::Store;
use crate::test_helpers::who;
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::audit::AuditFilter;
use tenantry_domain::identity::UserView;
use tenantry_domain::page::PageRequest;
use tenantry_domain::Identity;

struct World {
    engine: Engine,
    admin: Identity,
    lead: Identity,
    member: Identity,
    /// When the member's session began and their token was made.
    t0: DateTime<Utc>,
    member_token: String,
}

async fn world(store: Store) -> World {
    let engine = Engine::new(store, EngineConfig::default());
    // Whole seconds, so times read back from PostgreSQL (microseconds) compare equal.
    let t0 = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() - Duration::minutes(30);
    seed_demo(&engine, &SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO }, t0).await.unwrap();
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let member_token = engine.create_own_api_token(&member, "ci", Some(30), t0).await.unwrap();
    engine.demo_sign_in("member@acme.example", t0).await.unwrap();
    World { engine, admin, lead, member, t0, member_token }
}

async fn user(w: &World, email: &str, now: DateTime<Utc>) -> UserView {
    let users = w.engine.users(&w.admin, now).await.unwrap();
    users.into_iter().find(|u| u.email == email).unwrap_or_else(|| panic!("{email} is listed"))
}

async fn audited(w: &World, action: &str) -> Vec<tenantry_domain::audit::AuditEvent> {
    let filter = AuditFilter { action: Some(action.to_owned()), ..Default::default() };
    w.engine.audit_log(&w.admin, &filter).await.unwrap()
}

store_test!(admins_list_every_user_with_live_tokens, |store: Store| async move {
    let w = world(store).await;
    let now = w.t0 + Duration::minutes(1);
    let users = w.engine.users(&w.admin, now).await.unwrap();
    let emails: Vec<&str> = users.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(
        emails,
        ["lead@acme.example", "member@acme.example", "lead@globex.example", "admin@tenantry.example"],
        "tenants first by slug, then by e-mail"
    );
    let member = &users[1];
    assert_eq!(member.tenant.as_ref().map(|t| t.slug.as_str()), Some("acme"));
    assert_eq!(member.role, Some(tenantry_domain::Role::Member));
    assert!(!member.is_admin && member.disabled_at.is_none());
    assert_eq!(member.last_sign_in_at, Some(w.t0));
    assert_eq!(member.live_tokens, 1);
    assert!(users[3].is_admin);

    // An expired token is not live; past its expiry the count drops.
    assert_eq!(user(&w, "member@acme.example", w.t0 + Duration::days(31)).await.live_tokens, 0);

    let tokens = w.engine.user_tokens(&w.admin, w.member.user_id).await.unwrap();
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].name, "ci");
    assert_eq!(tokens[0].expires_at, w.t0 + Duration::days(30));
    assert!(matches!(w.engine.user_tokens(&w.admin, 999_999).await, Err(EngineError::NotFound("user"))));

    let accounts = w.engine.user_accounts(&w.admin, &PageRequest::default(), now).await.unwrap().items;
    assert_eq!(accounts.len(), 4);
    for account in &accounts {
        let expected = if account.user.id == w.member.user_id { 1 } else { 0 };
        assert_eq!(account.tokens.len(), expected, "{}", account.user.email);
    }
});

store_test!(users_read_page_by_page_in_team_order, |store: Store| async move {
    let w = world(store).await;
    let now = w.t0 + Duration::minutes(1);
    let acme = w.lead.tenant.as_ref().map(|t| t.tenant_id);
    for (email, tenant_id, role) in [
        ("zed@tenantry.example", None, None),
        ("abe@tenantry.example", None, None),
        ("aaa@acme.example", acme, Some(tenantry_domain::Role::Member)),
    ] {
        let user = NewUser { email, name: email, tenant_id, role, is_admin: false };
        w.engine.store.insert_user(&user, w.t0).await.unwrap();
    }
    let whole = w.engine.users(&w.admin, now).await.unwrap();
    let emails: Vec<&str> = whole.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(
        emails,
        [
            "aaa@acme.example",
            "lead@acme.example",
            "member@acme.example",
            "lead@globex.example",
            "abe@tenantry.example",
            "admin@tenantry.example",
            "zed@tenantry.example"
        ],
        "teams by slug, then users of no team, each by e-mail"
    );
    // Two at a time, the pages read the same list, each account with its own tokens.
    let mut walked = Vec::new();
    let mut page = PageRequest { limit: 2, after: None };
    loop {
        let got = w.engine.user_accounts(&w.admin, &page, now).await.unwrap();
        assert!(got.items.len() <= 2);
        for account in &got.items {
            let expected = usize::from(account.user.id == w.member.user_id);
            assert_eq!(account.tokens.len(), expected, "{}", account.user.email);
        }
        walked.extend(got.items.into_iter().map(|a| a.user.email));
        let Some(cursor) = got.next_cursor else { break };
        page = PageRequest::parse(Some("2"), Some(&cursor)).unwrap();
    }
    assert_eq!(walked, emails);
    let foreign = PageRequest { limit: 2, after: Some("1790000000:12".to_owned()) };
    match w.engine.users_page(&w.admin, &foreign, now).await {
        Err(EngineError::Invalid { field: "cursor", .. }) => {}
        other => panic!("a cursor of another list is refused: {other:?}"),
    }
});

store_test!(disabling_ends_sessions_and_tokens_and_is_audited, |store: Store| async move {
    let w = world(store).await;
    let e = &w.engine;
    let t1 = w.t0 + Duration::minutes(10);
    assert!(e.identity_for_session(w.member.user_id, w.t0).await.unwrap().is_some());
    assert!(e.identity_for_token(&w.member_token, t1).await.unwrap().is_some());

    let disabled = e.disable_user(&w.admin, w.member.user_id, t1).await.unwrap();
    assert_eq!(disabled.disabled_at, Some(t1));
    assert_eq!(disabled.live_tokens, 0);

    let later = t1 + Duration::minutes(1);
    assert!(e.identity_for_session(w.member.user_id, w.t0).await.unwrap().is_none(), "the open session ended");
    assert!(e.identity_for_token(&w.member_token, later).await.unwrap().is_none(), "the token stopped working");
    let tokens = e.user_tokens(&w.admin, w.member.user_id).await.unwrap();
    assert_eq!(tokens[0].revoked_at, Some(t1), "the live token was revoked");
    match e.demo_sign_in("member@acme.example", later).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("disabled"), "{m}"),
        other => panic!("a disabled user cannot sign in: {other:?}"),
    }
    assert_eq!(user(&w, "member@acme.example", later).await.last_sign_in_at, Some(w.t0), "the refusal wrote nothing");
    assert!(matches!(e.disable_user(&w.admin, w.member.user_id, later).await, Err(EngineError::Conflict(_))));

    let events = audited(&w, "user.disabled").await;
    assert_eq!(events.len(), 1, "the refused second disable is not recorded");
    assert_eq!(events[0].actor, "admin@tenantry.example");
    assert_eq!(events[0].tenant.as_deref(), Some("acme"));
    assert_eq!(events[0].object_id, Some(w.member.user_id.to_string()));
    assert!(events[0].detail.contains("1 live API token"), "{}", events[0].detail);
    // Nobody else was touched.
    assert!(e.identity_for_session(w.lead.user_id, w.t0).await.unwrap().is_some());
});

store_test!(an_admin_cannot_disable_themself, |store: Store| async move {
    let w = world(store).await;
    let t1 = w.t0 + Duration::minutes(10);
    match w.engine.disable_user(&w.admin, w.admin.user_id, t1).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("your own account"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(user(&w, "admin@tenantry.example", t1).await.disabled_at.is_none());
    assert!(w.engine.identity_for_session(w.admin.user_id, w.t0).await.unwrap().is_some());
    assert!(audited(&w, "user.").await.is_empty());
    // Unknown users are not found, whatever the action.
    assert!(matches!(w.engine.disable_user(&w.admin, 999_999, t1).await, Err(EngineError::NotFound("user"))));
    assert!(matches!(w.engine.enable_user(&w.admin, 999_999, t1).await, Err(EngineError::NotFound("user"))));
});

store_test!(enabling_restores_sign_in_but_not_revoked_tokens, |store: Store| async move {
    let w = world(store).await;
    let e = &w.engine;
    let (t1, t2) = (w.t0 + Duration::minutes(10), w.t0 + Duration::minutes(20));
    assert!(matches!(e.enable_user(&w.admin, w.member.user_id, t1).await, Err(EngineError::Conflict(_))));
    e.disable_user(&w.admin, w.member.user_id, t1).await.unwrap();

    let enabled = e.enable_user(&w.admin, w.member.user_id, t2).await.unwrap();
    assert_eq!(enabled.disabled_at, None);
    let back = e.demo_sign_in("member@acme.example", t2).await.unwrap();
    assert_eq!(back.user_id, w.member.user_id);
    assert!(e.identity_for_session(w.member.user_id, t2).await.unwrap().is_some(), "a new session works");
    assert!(e.identity_for_session(w.member.user_id, w.t0).await.unwrap().is_none(), "the old one stays ended");
    assert!(e.identity_for_token(&w.member_token, t2).await.unwrap().is_none(), "the revoked token stays revoked");
    assert_eq!(user(&w, "member@acme.example", t2).await.live_tokens, 0);
    // A new token works.
    let fresh = e.create_own_api_token(&back, "new", None, t2).await.unwrap();
    assert!(e.identity_for_token(&fresh, t2).await.unwrap().is_some());
    assert!(matches!(e.enable_user(&w.admin, w.member.user_id, t2).await, Err(EngineError::Conflict(_))));

    let events = audited(&w, "user.enabled").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].tenant.as_deref(), Some("acme"));
});

store_test!(admins_revoke_another_users_token, |store: Store| async move {
    let w = world(store).await;
    let e = &w.engine;
    let t1 = w.t0 + Duration::minutes(10);
    let token_id = e.user_tokens(&w.admin, w.member.user_id).await.unwrap()[0].id;
    // The token is the member's, not the lead's: named under another user it is not found.
    assert!(matches!(
        e.revoke_user_token(&w.admin, w.lead.user_id, token_id, t1).await,
        Err(EngineError::NotFound("API token"))
    ));
    assert!(matches!(e.revoke_user_token(&w.admin, 999_999, token_id, t1).await, Err(EngineError::NotFound("user"))));
    e.revoke_user_token(&w.admin, w.member.user_id, token_id, t1).await.unwrap();
    assert!(e.identity_for_token(&w.member_token, t1).await.unwrap().is_none());
    assert!(e.identity_for_session(w.member.user_id, w.t0).await.unwrap().is_some(), "the user is still enabled");
    assert!(matches!(
        e.revoke_user_token(&w.admin, w.member.user_id, token_id, t1).await,
        Err(EngineError::Conflict(_))
    ));
    let events = audited(&w, "api_token.revoked").await;
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].actor.as_str(), events[0].tenant.as_deref()), ("admin@tenantry.example", Some("acme")));
    assert!(events[0].detail.contains("member@acme.example"), "{}", events[0].detail);
});

store_test!(non_admins_are_refused, |store: Store| async move {
    let w = world(store).await;
    let e = &w.engine;
    let t1 = w.t0 + Duration::minutes(10);
    let token_id = e.user_tokens(&w.admin, w.member.user_id).await.unwrap()[0].id;
    let forbidden = |r: Result<(), EngineError>| assert!(matches!(r, Err(EngineError::Forbidden(_))), "{r:?}");
    forbidden(e.users(&w.lead, t1).await.map(drop));
    forbidden(e.user_accounts(&w.lead, &PageRequest::default(), t1).await.map(drop));
    forbidden(e.user_tokens(&w.lead, w.member.user_id).await.map(drop));
    forbidden(e.revoke_user_token(&w.lead, w.member.user_id, token_id, t1).await);
    forbidden(e.disable_user(&w.lead, w.member.user_id, t1).await.map(drop));
    forbidden(e.enable_user(&w.lead, w.member.user_id, t1).await.map(drop));
    assert!(e.identity_for_token(&w.member_token, t1).await.unwrap().is_some(), "nothing changed");
    assert!(e.identity_for_session(w.member.user_id, w.t0).await.unwrap().is_some());
});

store_test!(admins_disabling_each_other_at_once_leave_one_standing, |store: Store| async move {
    let w = world(store).await;
    let t1 = w.t0 + Duration::minutes(10);
    let second = NewUser { email: "ops@tenantry.example", name: "Ops", tenant_id: None, role: None, is_admin: true };
    let second = w.engine.store.insert_user(&second, w.t0).await.unwrap();
    let first = w.admin.user_id;
    let (a, b) =
        tokio::join!(w.engine.store.disable_user(first, second, t1), w.engine.store.disable_user(second, first, t1));
    let outcomes = [a.unwrap(), b.unwrap()];
    let won = outcomes.iter().filter(|o| matches!(o, DisableOutcome::Disabled { .. })).count();
    assert_eq!(won, 1, "{outcomes:?}");
    assert!(outcomes.contains(&DisableOutcome::ActorDisabled), "{outcomes:?}");
    let users = w.engine.store.list_users(t1, None, 100).await.unwrap();
    let standing = users.iter().filter(|u| u.is_admin && u.disabled_at.is_none()).count();
    assert_eq!(standing, 1);
});
