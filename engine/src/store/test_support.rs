//! Test databases: a fresh SQLite file or a fresh PostgreSQL database per test, migrated, so the
//! same store test runs against both backends. PostgreSQL is found through
//! `TENANTRY_TEST_POSTGRES_URL` (default: the local server on 127.0.0.1:5432 as `postgres`).

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

/// A migrated store on a new, empty database of the given backend.
pub async fn fresh_store(backend: super::Backend) -> Store {
    let store = match backend {
        super::Backend::Sqlite => {
            let dir = std::env::temp_dir().join("tenantry-tests");
            std::fs::create_dir_all(&dir).expect("temp dir");
            let path = dir.join(format!("{}.db", unique_name("t")));
            Store::connect(&format!("sqlite://{}", path.display())).await.expect("sqlite")
        }
        super::Backend::Postgres => {
            let admin = postgres_admin_url();
            let name = unique_name("tenantry_test");
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL reachable");
            sqlx::query(&format!("create database {name}")).execute(&mut conn).await.expect("create database");
            let (base, _) = admin.rsplit_once('/').expect("url with a database");
            Store::connect(&format!("{base}/{name}")).await.expect("postgres")
        }
    };
    store.migrate().await.expect("migrations apply");
    store
}

/// Declares one async test per backend from one body: `store_test!(name, |store| async { … })`.
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
pub(crate) use store_test;
