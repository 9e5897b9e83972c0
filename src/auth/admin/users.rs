//! Signed-in people (`oauth_users`): listing who signed in with a bearer token, and storing or
//! deleting a person's own upstream credentials under their issuer and `sub` (sealed as a
//! session's are; the person's next call uses them, on every instance).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::validate::{keep_page, non_blank, offset_cursor, page_size, printable_id};
use super::{Admin, AdminError, HOW_TO_SET_A_KEY};
use crate::auth::session_upstream::{SessionUpstream, UpstreamInput, checked_api_name};
use crate::store::{OAuthUserRow, StoredUpstream};

/// The longest issuer URL taken.
const MAX_ISSUER_CHARS: usize = 2048;

// The actions, as the audit log's `operation` names them.
pub(super) const USER_UPSTREAM_SET: &str = "oauth_user.upstream.set";
pub(super) const USER_UPSTREAM_CLEAR: &str = "oauth_user.upstream.clear";

/// A person, by the issuer of their tokens and their `sub`; with `api`, only their credentials
/// for that API (deleting them).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthUserRef {
    pub issuer: String,
    pub subject: String,
    #[serde(default)]
    pub api: Option<String>,
}

/// `PUT /admin/v1/oauth-users/upstream`: a person and the upstream headers to send for them on
/// calls to one API (`upstream.api`; without it, the one API the server serves).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthUserUpstream {
    pub issuer: String,
    pub subject: String,
    pub upstream: UpstreamInput,
}

/// A person as listed (never a credential: the headers' names only).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthUserInfo {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    /// The client of their last token.
    pub client_id: Option<String>,
    /// When they first and last signed in (to the credential cache's lifetime); `null`
    /// before they ever have.
    pub first_seen: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    pub upstream_headers: Vec<String>,
    /// The APIs those headers are for (none: the one API served).
    pub upstream_apis: Vec<String>,
}

impl From<OAuthUserRow> for OAuthUserInfo {
    fn from(r: OAuthUserRow) -> OAuthUserInfo {
        OAuthUserInfo {
            id: r.id,
            issuer: r.issuer,
            subject: r.subject,
            client_id: r.client_id,
            first_seen: r.first_seen,
            last_seen: r.last_seen,
            upstream_headers: r.upstream_header_names.unwrap_or_default(),
            upstream_apis: r.upstream_apis.unwrap_or_default(),
        }
    }
}

/// Which people to list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthUserQuery {
    /// Only this `sub`.
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One page of people.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthUserPage {
    pub users: Vec<OAuthUserInfo>,
    pub next_cursor: Option<String>,
}

/// The issuer and subject, checked: the issuer without a trailing `/` (as tokens are matched).
fn checked(issuer: &str, subject: &str) -> Result<(String, String), AdminError> {
    let issuer = issuer.trim().trim_end_matches('/');
    let parsed = url::Url::parse(issuer).ok();
    if issuer.len() > MAX_ISSUER_CHARS
        || !parsed.is_some_and(|u| matches!(u.scheme(), "https" | "http"))
    {
        return Err(AdminError::Invalid(format!(
            "issuer must be the http(s) URL of a trusted issuer (its `iss`), at most \
             {MAX_ISSUER_CHARS} characters"
        )));
    }
    // Exactly as tokens carry it (a person is the exact issuer and `sub`): not trimmed, and
    // within the bound a token's `sub` is taken at.
    let max = crate::auth::oauth::MAX_SUBJECT_BYTES;
    if subject.trim().is_empty() || subject.len() > max {
        return Err(AdminError::Invalid(format!(
            "subject must be the person's `sub`, exactly: 1 to {max} bytes"
        )));
    }
    printable_id("subject", subject)?;
    Ok((issuer.to_string(), subject.to_string()))
}

/// How often a change of one API's credentials is tried when another change of the same
/// person's lands in between.
const CHANGE_ATTEMPTS: usize = 3;

/// A person's stored credentials, opened to change one API's.
fn open_stored(
    keys: &crate::auth::sealed::SecretKeys,
    id: Uuid,
    sealed: &[u8],
) -> Result<SessionUpstream, AdminError> {
    SessionUpstream::open(keys, id, sealed).map_err(|e| {
        AdminError::Invalid(format!(
            "the person's stored upstream credentials cannot be opened ({e}), so one API's \
             cannot be changed: delete them all first (`apigate oauth users clear-upstream` \
             without --api, or DELETE /admin/v1/oauth-users/upstream without api), then store \
             them again"
        ))
    })
}

fn changed_meanwhile() -> AdminError {
    AdminError::Conflict(
        "the person's upstream credentials changed while these were being stored; try again".into(),
    )
}

fn target(id: Uuid) -> Option<String> {
    Some(format!("oauth-user:{id}"))
}

impl Admin {
    /// Stores the upstream headers sent on a signed-in person's calls to one API (replacing
    /// theirs for that API; their other APIs' are kept).
    pub async fn set_oauth_user_upstream(
        &self,
        req: OAuthUserUpstream,
    ) -> Result<OAuthUserInfo, AdminError> {
        self.may_change(USER_UPSTREAM_SET, || None).await?;
        let (issuer, subject) = checked(&req.issuer, &req.subject)?;
        if req.upstream.is_empty() {
            return Err(AdminError::Invalid(
                "upstream.headers is empty: give at least one header, or delete the person's \
                 credentials (DELETE /admin/v1/oauth-users/upstream)"
                    .into(),
            ));
        }
        let headers = req.upstream.check().map_err(AdminError::Invalid)?;
        self.fits_served(&headers).await?;
        let Some(keys) = &self.keys else {
            return Err(AdminError::Invalid(format!(
                "upstream credentials cannot be stored: no secret key is configured; \
                 {HOW_TO_SET_A_KEY}"
            )));
        };
        for _ in 0..CHANGE_ATTEMPTS {
            let (id, current) = self.store.oauth_user_id(&issuer, &subject).await?;
            let merged = match &current {
                None => headers.clone(),
                Some(sealed) => open_stored(keys, id, sealed)?
                    .replaced_by(headers.clone())
                    .map_err(AdminError::Invalid)?,
            };
            if let Some(row) = self
                .store_sealed(keys, id, current.as_deref(), &merged)
                .await?
            {
                self.forget_cached(id).await;
                self.record(USER_UPSTREAM_SET, target(id), None).await;
                return Ok(row.into());
            }
        }
        Err(changed_meanwhile())
    }

    /// Deletes a signed-in person's upstream credentials: all of them, or with `who.api` only
    /// those for that API.
    pub async fn clear_oauth_user_upstream(
        &self,
        who: &OAuthUserRef,
    ) -> Result<OAuthUserInfo, AdminError> {
        self.may_change(USER_UPSTREAM_CLEAR, || None).await?;
        let (issuer, subject) = checked(&who.issuer, &who.subject)?;
        let not_found =
            || AdminError::NotFound(format!("no signed-in person {subject:?} of {issuer}"));
        let Some(api) = &who.api else {
            let row = self
                .store
                .clear_oauth_user_upstream(&issuer, &subject)
                .await?
                .ok_or_else(not_found)?;
            self.forget_cached(row.id).await;
            self.record(USER_UPSTREAM_CLEAR, target(row.id), None).await;
            return Ok(row.into());
        };
        let api = checked_api_name(api).map_err(AdminError::Invalid)?;
        let Some(keys) = &self.keys else {
            return Err(AdminError::Invalid(format!(
                "one API's credentials cannot be deleted without the secret key that opens the \
                 others (leave out the API to delete them all); {HOW_TO_SET_A_KEY}"
            )));
        };
        for _ in 0..CHANGE_ATTEMPTS {
            let row = self
                .store
                .find_oauth_user(&issuer, &subject)
                .await?
                .ok_or_else(not_found)?;
            let Some(sealed) = &row.upstream_headers else {
                return Ok(row.into());
            };
            let (left, removed) = open_stored(keys, row.id, sealed)?.without(Some(&api));
            if !removed {
                return Ok(row.into());
            }
            if let Some(row) = self.store_sealed(keys, row.id, Some(sealed), &left).await? {
                self.forget_cached(row.id).await;
                self.record(USER_UPSTREAM_CLEAR, target(row.id), None).await;
                return Ok(row.into());
            }
        }
        Err(changed_meanwhile())
    }

    /// Seals `up` for person `id` and stores it (none left: deletes theirs) if what they have
    /// is still `expected`; `None` when it changed in between.
    async fn store_sealed(
        &self,
        keys: &crate::auth::sealed::SecretKeys,
        id: Uuid,
        expected: Option<&[u8]>,
        up: &SessionUpstream,
    ) -> Result<Option<OAuthUserRow>, AdminError> {
        if up.is_empty() {
            return Ok(self
                .store
                .set_oauth_user_upstream(id, expected, None)
                .await?);
        }
        let sealed = up.seal(keys, id).map_err(|e| {
            tracing::error!(error = %e, "sealing a person's upstream headers failed");
            AdminError::Internal
        })?;
        let (names, apis) = (up.names(), up.apis());
        let stored = StoredUpstream {
            sealed: &sealed,
            names: &names,
            apis: &apis,
        };
        Ok(self
            .store
            .set_oauth_user_upstream(id, expected, Some(stored))
            .await?)
    }

    /// Lists signed-in people, the most recently seen first.
    pub async fn list_oauth_users(&self, q: &OAuthUserQuery) -> Result<OAuthUserPage, AdminError> {
        let limit = page_size(q.limit)?;
        let offset = offset_cursor(q.cursor.as_deref())?;
        let subject = non_blank(q.subject.as_deref());
        let mut rows = self
            .store
            .list_oauth_users(subject, i64::from(limit) + 1, i64::from(offset))
            .await?;
        let more = keep_page(&mut rows, limit);
        Ok(OAuthUserPage {
            users: rows.into_iter().map(OAuthUserInfo::from).collect(),
            next_cursor: more.then(|| (offset + limit).to_string()),
        })
    }

    /// Drops the person from this instance's cache at once (the store's announcement reaches
    /// the others).
    async fn forget_cached(&self, id: Uuid) {
        if let Some(c) = &self.caches {
            c.apply(&crate::store::Invalidation::OAuthUser(id)).await;
        }
    }
}
