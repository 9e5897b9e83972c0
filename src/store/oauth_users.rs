//! `oauth_users`: people who signed in with a bearer token (issuer and `sub`), when they were
//! seen, and their own sealed upstream credentials. A change of credentials is announced on
//! the invalidation channel in the same transaction, as a session's revocation is.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::invalidation::notify;
use super::{Invalidation, Store, StoreError};

/// One signed-in person.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct OAuthUserRow {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    /// The client of the last token seen (`client_id` or `azp`).
    pub client_id: Option<String>,
    /// `None` until the person first signs in (the operator may store credentials before).
    pub first_seen: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    /// Sealed (`auth/sealed.rs`, bound to `id`).
    pub upstream_headers: Option<Vec<u8>>,
    pub upstream_header_names: Option<Vec<String>>,
    /// The APIs those headers are for (names only).
    #[sqlx(default)]
    pub upstream_apis: Option<Vec<String>>,
}

/// A person's credentials as stored: sealed, and their header names and APIs for listings.
pub(crate) struct StoredUpstream<'a> {
    pub sealed: &'a [u8],
    pub names: &'a [String],
    pub apis: &'a [String],
}

impl Store {
    /// Records that `subject` of `issuer` signed in through `client` and returns the person's
    /// row (with their sealed credentials). Called once per cache fill, not per request.
    pub(crate) async fn seen_oauth_user(
        &self,
        issuer: &str,
        subject: &str,
        client: &str,
    ) -> Result<OAuthUserRow, StoreError> {
        let row = sqlx::query_as::<_, OAuthUserRow>(
            "INSERT INTO oauth_users (id, issuer, subject, client_id, first_seen, last_seen) \
             VALUES ($1, $2, $3, $4, now(), now()) \
             ON CONFLICT (issuer, subject) DO UPDATE SET client_id = EXCLUDED.client_id, \
             first_seen = COALESCE(oauth_users.first_seen, now()), last_seen = now() \
             RETURNING *",
        )
        .bind(Uuid::new_v4())
        .bind(issuer)
        .bind(subject)
        .bind(client)
        .fetch_one(&self.pool)
        .await?;
        Ok(row)
    }

    /// The row id of `subject` of `issuer`, made now if the person has never signed in (the
    /// operator may store credentials before they do), and their sealed credentials.
    pub(crate) async fn oauth_user_id(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<(Uuid, Option<Vec<u8>>), StoreError> {
        let row = sqlx::query_as::<_, (Uuid, Option<Vec<u8>>)>(
            "INSERT INTO oauth_users (id, issuer, subject) VALUES ($1, $2, $3) \
             ON CONFLICT (issuer, subject) DO UPDATE SET updated_at = now() \
             RETURNING id, upstream_headers",
        )
        .bind(Uuid::new_v4())
        .bind(issuer)
        .bind(subject)
        .fetch_one(&self.pool)
        .await?;
        Ok(row)
    }

    /// `subject` of `issuer`, if they have a row.
    pub(crate) async fn find_oauth_user(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<Option<OAuthUserRow>, StoreError> {
        let row = sqlx::query_as::<_, OAuthUserRow>(
            "SELECT * FROM oauth_users WHERE issuer = $1 AND subject = $2",
        )
        .bind(issuer)
        .bind(subject)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row)
    }

    /// Replaces a person's sealed upstream credentials (sealed for `id`; `None` deletes them)
    /// if they are still `expected` (what the caller read and changed), with the headers'
    /// names and APIs, and announces the change. `None` when they changed in between.
    pub(crate) async fn set_oauth_user_upstream(
        &self,
        id: Uuid,
        expected: Option<&[u8]>,
        stored: Option<StoredUpstream<'_>>,
    ) -> Result<Option<OAuthUserRow>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_as::<_, OAuthUserRow>(
            "UPDATE oauth_users SET upstream_headers = $3, upstream_header_names = $4, \
             upstream_apis = $5, updated_at = now() \
             WHERE id = $1 AND upstream_headers IS NOT DISTINCT FROM $2 RETURNING *",
        )
        .bind(id)
        .bind(expected)
        .bind(stored.as_ref().map(|s| s.sealed))
        .bind(stored.as_ref().map(|s| s.names))
        .bind(stored.as_ref().map(|s| s.apis))
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_some() {
            notify(&mut tx, &Invalidation::OAuthUser(id)).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes a person's upstream credentials and announces it; `None` when the person has
    /// no row.
    pub(crate) async fn clear_oauth_user_upstream(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<Option<OAuthUserRow>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_as::<_, OAuthUserRow>(
            "UPDATE oauth_users SET upstream_headers = NULL, upstream_header_names = NULL, \
             upstream_apis = NULL, updated_at = now() WHERE issuer = $1 AND subject = $2 \
             RETURNING *",
        )
        .bind(issuer)
        .bind(subject)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(r) = &row {
            notify(&mut tx, &Invalidation::OAuthUser(r.id)).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    /// People, the most recently seen first (then those never seen, newest row first); up to
    /// `limit` from `offset`, only `subject`'s when given.
    pub(crate) async fn list_oauth_users(
        &self,
        subject: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<OAuthUserRow>, StoreError> {
        let rows = sqlx::query_as::<_, OAuthUserRow>(
            "SELECT * FROM oauth_users WHERE ($1::text IS NULL OR subject = $1) \
             ORDER BY last_seen DESC NULLS LAST, updated_at DESC, id LIMIT $2 OFFSET $3",
        )
        .bind(subject)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}
