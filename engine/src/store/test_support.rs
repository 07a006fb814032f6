//! Test databases, for the engine's tests and the server's alike: a fresh SQLite file or a fresh
//! PostgreSQL database per test, so the same test runs against both backends. PostgreSQL is
//! found through `TENANTRY_TEST_POSTGRES_URL` (default: the local server on 127.0.0.1:5432 as
//! `postgres`); `scripts/test.sh` drops the `tenantry_test…` databases of earlier runs.

use super::Store;
use sqlx::Connection;

pub fn postgres_admin_url() -> String {
    std::env::var("TENANTRY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn unique_name(prefix: &str) -> String {
    let mut bytes = [0u8; 6];
    getrandom::getrandom(&mut bytes).expect("random source");
    format!("{prefix}_{}", hex::encode(bytes))
}

/// The URL of a new, empty database of the given backend (a SQLite file that does not exist yet,
/// or a PostgreSQL database just created).
pub async fn fresh_database_url(backend: super::Backend) -> String {
    match backend {
        super::Backend::Sqlite => {
            let dir = std::env::temp_dir().join("tenantry-tests");
            std::fs::create_dir_all(&dir).expect("temp dir");
            let path = dir.join(format!("{}.db", unique_name("t")));
            format!("sqlite://{}", path.display())
        }
        super::Backend::Postgres => {
            let admin = postgres_admin_url();
            let name = unique_name("tenantry_test");
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL reachable");
            sqlx::query(&format!("create database {name}")).execute(&mut conn).await.expect("create database");
            let (base, _) = admin.rsplit_once('/').expect("url with a database");
            format!("{base}/{name}")
        }
    }
}

/// A migrated store on a new, empty database of the given backend.
pub async fn fresh_store(backend: super::Backend) -> Store {
    let store = Store::connect(&fresh_database_url(backend).await).await.expect("the test database opens");
    store.migrate().await.expect("migrations apply");
    store
}

/// Declares one async test per backend from one body: `store_test!(name, |store| async { … })`.
#[cfg(test)]
macro_rules! store_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let store = $crate::store::test_support::fresh_store($crate::store::Backend::Sqlite).await;
                ($body)(store).await;
            }

            #[tokio::test]
            async fn postgres() {
                let store = $crate::store::test_support::fresh_store($crate::store::Backend::Postgres).await;
                ($body)(store).await;
            }
        }
    };
}
#[cfg(test)]
pub(crate) use store_test;
