//! The `LISTEN/NOTIFY` channel that tells every instance to drop cached credentials:
//! announcing a change inside a transaction, and listening for them.

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use uuid::Uuid;

use super::{Store, StoreError};

/// The channel on which credential changes are announced.
const INVALIDATION_CHANNEL: &str = "apigate_auth";

impl Store {
    /// Subscribes to credential changes made by any instance sharing this database.
    pub(crate) async fn listen(&self) -> Result<InvalidationListener, StoreError> {
        let listener = InvalidationListener::subscribe(&self.pool).await?;
        Ok(InvalidationListener {
            pool: self.pool.clone(),
            listener: Some(listener),
        })
    }
}

pub(super) async fn notify(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    what: &Invalidation,
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(INVALIDATION_CHANNEL)
        .bind(what.to_payload())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A credential change announced over `LISTEN/NOTIFY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalidation {
    Key(Uuid),
    Session(Uuid),
    /// A signed-in person's upstream credentials changed (`oauth_users.id`).
    OAuthUser(Uuid),
    /// Some role changed: every cached principal may have different features now.
    Roles,
}

impl Invalidation {
    fn to_payload(&self) -> String {
        match self {
            Invalidation::Key(id) => format!("key:{id}"),
            Invalidation::Session(id) => format!("session:{id}"),
            Invalidation::OAuthUser(id) => format!("oauth-user:{id}"),
            Invalidation::Roles => "roles".to_string(),
        }
    }

    fn parse(payload: &str) -> Option<Invalidation> {
        if payload == "roles" {
            return Some(Invalidation::Roles);
        }
        let (kind, id) = payload.split_once(':')?;
        let id = Uuid::parse_str(id).ok()?;
        match kind {
            "key" => Some(Invalidation::Key(id)),
            "session" => Some(Invalidation::Session(id)),
            "oauth-user" => Some(Invalidation::OAuthUser(id)),
            _ => None,
        }
    }
}

/// What the listener saw.
#[derive(Debug)]
pub(crate) enum Heard {
    Change(Invalidation),
    /// The connection dropped (and was re-established): changes may have been missed.
    Gap,
}

pub(crate) struct InvalidationListener {
    pool: PgPool,
    /// `None` after an error: the next call subscribes again and reports a [`Heard::Gap`].
    listener: Option<PgListener>,
}

impl InvalidationListener {
    async fn subscribe(pool: &PgPool) -> Result<PgListener, StoreError> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(INVALIDATION_CHANNEL).await?;
        Ok(listener)
    }

    pub(crate) async fn next(&mut self) -> Result<Heard, StoreError> {
        loop {
            let Some(listener) = self.listener.as_mut() else {
                // sqlx reconnects a failed listener silently on its next call, so changes
                // announced while it was down would go unnoticed: subscribe afresh and say so.
                self.listener = Some(InvalidationListener::subscribe(&self.pool).await?);
                return Ok(Heard::Gap);
            };
            let received = match listener.try_recv().await {
                Ok(r) => r,
                Err(e) => {
                    self.listener = None;
                    return Err(e.into());
                }
            };
            match received {
                None => return Ok(Heard::Gap),
                Some(n) => match Invalidation::parse(n.payload()) {
                    Some(i) => return Ok(Heard::Change(i)),
                    None => {
                        tracing::warn!(payload = n.payload(), "ignoring unknown invalidation");
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidation_payloads_round_trip() {
        let id = Uuid::new_v4();
        for i in [
            Invalidation::Key(id),
            Invalidation::Session(id),
            Invalidation::Roles,
        ] {
            assert_eq!(Invalidation::parse(&i.to_payload()), Some(i));
        }
        assert_eq!(Invalidation::parse("key:nope"), None);
        assert_eq!(Invalidation::parse("other"), None);
    }
}
