//! A fresh Postgres database per test: `apigate_test_<uuid>` on the server named by
//! `DATABASE_URL`, else on a throwaway cluster the tests start themselves (`pg_cluster.rs`),
//! migrated, and dropped when the `TestDb` goes out of scope. Fails loudly, with instructions,
//! when no server is reachable.

use std::str::FromStr;

use apigate::store::Store;
use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;
use uuid::Uuid;

pub struct TestDb {
    pub store: Store,
    /// The URL of the test database (give it to a second instance, a CLI run, …).
    pub url: String,
    name: String,
    server_url: String,
}

fn server_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| crate::pg_cluster::url().to_string())
}

async fn admin_connection(server_url: &str) -> sqlx::PgConnection {
    let opts = PgConnectOptions::from_str(server_url)
        .unwrap_or_else(|e| panic!("DATABASE_URL is not a Postgres URL: {e}"));
    match opts.connect().await {
        Ok(c) => c,
        Err(e) => panic!(
            "\n\nThese tests need a Postgres server, and none answered at {}: {e}\n\
             Point DATABASE_URL at a server where this user may CREATE DATABASE, or unset it\n\
             to let the tests start a throwaway cluster (needs the Postgres server package).\n",
            apigate::store::describe_target(server_url)
        ),
    }
}

impl TestDb {
    pub async fn new() -> TestDb {
        let server_url = server_url();
        let name = format!("apigate_test_{}", Uuid::new_v4().simple());
        let mut conn = admin_connection(&server_url).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
        drop(conn);
        let mut url = url::Url::parse(&server_url).expect("DATABASE_URL parses as a URL");
        url.set_path(&format!("/{name}"));
        let url = url.to_string();
        let store = Store::connect(&url)
            .await
            .expect("connect to the test database");
        store.migrate().await.expect("migrations apply");
        TestDb {
            store,
            url,
            name,
            server_url,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Runs on its own thread and runtime: Drop cannot await, and the test's runtime may be
        // shutting down. WITH (FORCE) ends the pool's remaining connections.
        let (server_url, name) = (self.server_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut conn = PgConnectOptions::from_str(&server_url)
                    .ok()?
                    .connect()
                    .await
                    .ok()?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await
                .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(_))) {
            eprintln!("note: could not drop test database {}", self.name);
        }
    }
}
