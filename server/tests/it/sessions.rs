//! Session lifetimes: a session ends 12 hours after sign-in however active it is, and a fresh
//! session id is issued at sign-in.

use crate::common::{Db, TestApp};
use std::sync::Arc;
use tenantry_app::server::{session_user, start_session, ABSOLUTE_SESSION_LIFETIME};
use tenantry_server::sessions::DbSessionStore;
use tower_sessions::Session;

async fn absolute_expiry(db: Db) {
    let app = TestApp::start(db).await;
    let store = Arc::new(DbSessionStore::open(&app.engine.store).await.unwrap());
    let session = Session::new(None, store.clone(), None);
    let signed_in = chrono::Utc::now();
    start_session(&session, 42, signed_in).await.unwrap();
    session.save().await.unwrap();
    let id = session.id().expect("a saved session has an id");

    let later = Session::new(Some(id), store.clone(), None);
    let almost = signed_in + ABSOLUTE_SESSION_LIFETIME - chrono::Duration::minutes(1);
    assert_eq!(session_user(&later, almost).await.unwrap().map(|s| s.user_id), Some(42));
    let past = signed_in + ABSOLUTE_SESSION_LIFETIME + chrono::Duration::minutes(1);
    assert_eq!(session_user(&later, past).await.unwrap(), None, "past its absolute lifetime");
    later.save().await.unwrap();
    let again = Session::new(Some(id), store, None);
    assert_eq!(session_user(&again, almost).await.unwrap(), None, "the expired session was ended, not just refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    absolute_expiry(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    absolute_expiry(Db::Postgres).await;
}
