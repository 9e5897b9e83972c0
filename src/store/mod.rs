//! The only sqlx user: pool, embedded migrations, queries for `api_keys`, `roles`, `audit_log`.
