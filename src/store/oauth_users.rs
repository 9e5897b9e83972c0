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
    /// operator may store credentials before they do).
    pub(crate) async fn oauth_user_id(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<Uuid, StoreError> {
        let (id,) = sqlx::query_as::<_, (Uuid,)>(
            "INSERT INTO oauth_users (id, issuer, subject) VALUES ($1, $2, $3) \
             ON CONFLICT (issuer, subject) DO UPDATE SET updated_at = now() RETURNING id",
        )
        .bind(Uuid::new_v4())
        .bind(issuer)
        .bind(subject)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    /// Stores a person's sealed upstream credentials (sealed for `id`) and the headers' names,
    /// and announces the change.
    pub(crate) async fn set_oauth_user_upstream(
        &self,
        id: Uuid,
        sealed: &[u8],
        names: &[String],
    ) -> Result<OAuthUserRow, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_as::<_, OAuthUserRow>(
            "UPDATE oauth_users SET upstream_headers = $2, upstream_header_names = $3, \
             updated_at = now() WHERE id = $1 RETURNING *",
        )
        .bind(id)
        .bind(sealed)
        .bind(names)
        .fetch_one(&mut *tx)
        .await?;
        notify(&mut tx, &Invalidation::OAuthUser(id)).await?;
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
             updated_at = now() WHERE issuer = $1 AND subject = $2 RETURNING *",
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
