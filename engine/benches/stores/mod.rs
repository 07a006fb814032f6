//! Fresh databases for benchmarks: a new PostgreSQL database (at TENANTRY_TEST_POSTGRES_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres) or a new SQLite file, unmigrated.

use sqlx::Connection;
use tenantry_engine::Store;

/// The server's URL (TENANTRY_TEST_POSTGRES_URL or the default), naming its admin database.
pub fn postgres_admin_url() -> String {
    std::env::var("TENANTRY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A new, empty PostgreSQL database called `name`.
pub async fn postgres(name: &str) -> Store {
    let mut conn = sqlx::PgConnection::connect(&postgres_admin_url()).await.expect("PostgreSQL reachable");
    sqlx::query(&format!("drop database if exists {name}")).execute(&mut conn).await.unwrap();
    sqlx::query(&format!("create database {name}")).execute(&mut conn).await.unwrap();
    reconnect_postgres(name).await
}

/// A new connection pool to the existing PostgreSQL database `name`.
#[allow(dead_code)] // not every bench reconnects
pub async fn reconnect_postgres(name: &str) -> Store {
    let admin = postgres_admin_url();
    let (base, _) = admin.rsplit_once('/').unwrap();
    Store::connect(&format!("{base}/{name}")).await.unwrap()
}

/// A new, empty SQLite file called `name` in the temporary folder.
pub async fn sqlite(name: &str) -> Store {
    let path = std::env::temp_dir().join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Store::connect(&format!("sqlite://{}", path.display())).await.unwrap()
}
