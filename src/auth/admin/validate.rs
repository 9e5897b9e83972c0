//! Checking and cleaning what a caller sends: ids, role names, features, page sizes and
//! cursors.

use super::{AdminError, DEFAULT_PAGE, MAX_PAGE};
use crate::auth::features::validate_feature;

pub(super) fn page_size(limit: Option<u32>) -> Result<u32, AdminError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(AdminError::Invalid(format!(
            "limit {n} is out of range: 1 to {MAX_PAGE}"
        ))),
    }
}

/// Cuts rows fetched with one extra (`limit + 1`) to the page; whether there are more.
pub(super) fn keep_page<T>(rows: &mut Vec<T>, limit: u32) -> bool {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    more
}

/// The offset an offset cursor (`nextCursor` of a list that pages by offset) names; 0 without.
pub(super) fn offset_cursor(cursor: Option<&str>) -> Result<u32, AdminError> {
    match cursor {
        None => Ok(0),
        Some(c) => c.parse::<u32>().map_err(|_| bad_cursor(c)),
    }
}

pub(super) fn bad_cursor(c: &str) -> AdminError {
    let shown: String = c.chars().take(40).collect();
    AdminError::Invalid(format!(
        "cursor {shown:?} is not one this server returned: pass `nextCursor` from the previous page"
    ))
}

/// The longest user, tenant or organization id accepted.
pub(crate) const MAX_ID_CHARS: usize = 200;

/// Refuses an id that would print as something else (control characters, bidirectional
/// overrides): it reaches the audit log and the operator's terminal.
pub(super) fn printable_id(field: &str, value: &str) -> Result<(), AdminError> {
    if crate::printable::has_unprintable(value) {
        return Err(AdminError::Invalid(format!(
            "{field} contains a control character (a line break, tab, escape or bidirectional \
             control); use printable text"
        )));
    }
    Ok(())
}

pub(super) fn valid_role_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
}

pub(super) fn invalid_role_name(name: &str) -> AdminError {
    AdminError::Invalid(format!(
        "invalid role name {:?}: use 1 to 100 letters, digits, `.`, `_`, `-`, `:`",
        crate::printable::cell(name, 100)
    ))
}

pub(super) fn non_blank(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

pub(super) fn dedup(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for i in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == i) {
            out.push(i.to_string());
        }
    }
    out
}

pub(super) fn clean_features(features: &[String]) -> Result<Vec<String>, AdminError> {
    let features = dedup(features);
    for f in &features {
        validate_feature(f).map_err(AdminError::Invalid)?;
    }
    Ok(features)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_cleaned() {
        let f = clean_features(&[" a.b ".into(), "a.b".into(), "".into(), "c.*".into()]).unwrap();
        assert_eq!(f, ["a.b", "c.*"]);
        assert!(clean_features(&["a b".into()]).is_err());
    }
}
