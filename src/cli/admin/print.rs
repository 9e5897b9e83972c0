//! How the admin commands print: JSON with `--json`, else a message or a table whose every cell
//! is made printable.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::auth::{AuditPage, KeyInfo, OAuthUserPage, Role, SessionPage};
use crate::printable;
use crate::store::AuditRow;

/// `v` as pretty JSON with `--json`, else `text(v)`.
pub(super) fn shown<T: Serialize>(
    json: bool,
    v: &T,
    text: impl FnOnce(&T) -> String,
) -> anyhow::Result<String> {
    if json { to_json(v) } else { Ok(text(v)) }
}

fn to_json<T: Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(format!("{}\n", serde_json::to_string_pretty(v)?))
}

/// What creating a key or a session prints: the headline, the secret (shown this once) and
/// what it grants, a `name: value` line each.
pub(super) fn created(
    headline: String,
    secret_intro: &str,
    secret: &str,
    grants: &[(&str, String)],
) -> String {
    let mut out = format!("{headline}\n{secret_intro}\n\n  {secret}\n\n");
    for (name, value) in grants {
        out.push_str(&format!("{name}: {value}\n"));
    }
    out
}

pub(super) fn keys_table(keys: &[KeyInfo]) -> String {
    table_of(
        keys,
        &[
            ("ID", |k| k.id.to_string()),
            ("PUBLIC ID", |k| k.public_id.clone()),
            ("NAME", |k| k.name.clone()),
            ("FEATURES", |k| list_or_dash(&k.features)),
            ("ROLES", |k| list_or_dash(&k.roles)),
            ("READ-ONLY", |k| yes_no(k.read_only)),
            ("CREATED", |k| minute(Some(k.created_at))),
            ("LAST USED", |k| minute(k.last_used_at)),
            ("STATUS", |k| {
                k.revoked_at
                    .map_or("active".into(), |t| format!("revoked {}", minute(Some(t))))
            }),
        ],
    )
}

pub(super) fn sessions_table(page: &SessionPage) -> String {
    let mut out = table_of(
        &page.sessions,
        &[
            ("ID", |s| s.id.to_string()),
            ("USER", |s| s.user_id.clone()),
            ("TENANT", |s| or_dash(&s.tenant_id)),
            ("ORGANIZATION", |s| or_dash(&s.organization_id)),
            ("ROLES", |s| list_or_dash(&s.roles)),
            ("FEATURES", |s| list_or_dash(&s.features)),
            ("READ-ONLY", |s| yes_no(s.read_only)),
            ("CREATED", |s| minute(Some(s.created_at))),
            ("EXPIRES", |s| minute(s.expires_at)),
            ("LAST USED", |s| minute(s.last_used_at)),
            ("STATUS", |s| s.status.to_string()),
            ("UPSTREAM HEADERS", |s| list_or_dash(&s.upstream_headers)),
            ("FOR APIS", |s| list_or_dash(&s.upstream_apis)),
        ],
    );
    more(&mut out, page.next_cursor.as_deref());
    out
}

/// People who signed in with a bearer token.
pub(super) fn oauth_users_table(page: &OAuthUserPage) -> String {
    let mut out = table_of(
        &page.users,
        &[
            ("SUBJECT", |u| u.subject.clone()),
            ("ISSUER", |u| u.issuer.clone()),
            ("CLIENT", |u| or_dash(&u.client_id)),
            ("FIRST SEEN", |u| minute(u.first_seen)),
            ("LAST SEEN", |u| minute(u.last_seen)),
            ("UPSTREAM HEADERS", |u| list_or_dash(&u.upstream_headers)),
            ("FOR APIS", |u| list_or_dash(&u.upstream_apis)),
        ],
    );
    more(&mut out, page.next_cursor.as_deref());
    out
}

pub(super) fn audit_table(page: &AuditPage) -> String {
    let mut out = table_of(
        &page.entries,
        &[
            ("AT (UTC)", |e| e.at.format("%Y-%m-%d %H:%M:%S").to_string()),
            ("ACTOR", |e| or_dash(&e.actor)),
            ("USER", |e| or_dash(&e.user_id)),
            ("TENANT", |e| or_dash(&e.tenant_id)),
            ("TOOL", |e| e.tool.clone()),
            ("OPERATION", operation),
            ("DECISION", |e| e.decision.clone()),
            ("STATUS", |e| {
                e.upstream_status.map_or("-".into(), |s| s.to_string())
            }),
            ("MS", |e| e.duration_ms.to_string()),
            ("ERROR", |e| or_dash(&e.error_code)),
            ("CREDENTIALS", |e| list_or_dash(&e.credential_sources)),
        ],
    );
    more(&mut out, page.next_cursor.as_deref());
    out
}

/// What an audit row did: `METHOD /path` of a call, or an admin action and what it was done to.
fn operation(e: &AuditRow) -> String {
    match (&e.method, &e.path, &e.target) {
        (Some(m), Some(p), _) => format!("{m} {p}"),
        // An admin action: what it did, to what.
        (_, _, Some(target)) => {
            format!("{} {target}", e.operation.as_deref().unwrap_or_default())
        }
        _ => or_dash(&e.operation),
    }
}

pub(super) fn roles_table(roles: &[Role]) -> String {
    table_of(
        roles,
        &[
            ("NAME", |r| r.name.clone()),
            ("FEATURES", |r| list_or_dash(&r.features)),
            ("UPDATED", |r| minute(Some(r.updated_at))),
        ],
    )
}

/// A column of a table of `T`s: its header, and its cell for one `T`.
type Column<T> = (&'static str, fn(&T) -> String);

/// A [`table`] of `items`, a column for each `(header, cell)`.
fn table_of<T>(items: &[T], columns: &[Column<T>]) -> String {
    let headers: Vec<&str> = columns.iter().map(|(header, _)| *header).collect();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, cell)| cell(item)).collect())
        .collect();
    table(&headers, &rows)
}

fn or_dash(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "-".into())
}

/// After a page that has a next one: the flag that fetches it.
fn more(out: &mut String, next_cursor: Option<&str>) {
    if let Some(c) = next_cursor {
        out.push_str(&format!("more: --cursor {c}\n"));
    }
}

fn minute(t: Option<DateTime<Utc>>) -> String {
    t.map_or("-".into(), |t| t.format("%Y-%m-%d %H:%M").to_string())
}

pub(super) fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Left-aligned columns separated by two spaces. Every cell is printed through
/// [`printable::cell`]: control characters escaped (a value cannot start a row of its own or
/// drive the terminal) and at most [`printable::MAX_CELL`] characters wide.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| printable::cell(c, printable::MAX_CELL))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let text = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut headers.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
    }

    #[test]
    fn table_cells_are_escaped_and_capped() {
        let huge = "n".repeat(1_000_000);
        let t = table(
            &["A", "B"],
            &[vec!["x\n2026-01-01  forged\x1b[2J".into(), huge]],
        );
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(!t.contains('\x1b'));
        assert!(t.contains("x\\n2026-01-01  forged\\x1b[2J"));
        assert!(t.lines().all(|l| l.chars().count() < 300));
    }
}
