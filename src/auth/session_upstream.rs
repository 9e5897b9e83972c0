//! A session's or a signed-in person's own upstream credentials, each set of headers scoped to
//! the API it is for (`"upstream": {"api": "github", "headers": {…}}` in
//! `POST /admin/v1/sessions`, `--api github --upstream-header …` on `apigate sessions create`
//! and `apigate oauth users set-upstream`): checked, sealed with the server's secret key
//! (`sealed.rs`) bound to the row id, stored, opened again when the session or person is loaded
//! into the cache, and sent on a call to that API only ([`SessionUpstream::for_call`]). A set
//! that names no API is for the one API a server serves: with several it goes nowhere, and
//! [`SessionUpstream::fits`] refuses it when it is stored. Values never appear in `Debug`,
//! errors or logs.

use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer};
use zeroize::Zeroizing;

use super::sealed::{SealError, SecretKeys};
use crate::upstream::headers;

/// The most headers one set (one API's) may carry.
pub(crate) const MAX_SESSION_HEADERS: usize = 16;
/// The longest header name.
pub(crate) const MAX_HEADER_NAME: usize = 100;
/// The longest header value.
pub(crate) const MAX_HEADER_VALUE: usize = 8 * 1024;
/// The most bytes of names and values together, in one set.
pub(crate) const MAX_HEADERS_TOTAL: usize = 16 * 1024;
/// The most APIs one session or person may hold credentials for.
pub(crate) const MAX_APIS: usize = 16;
/// The most bytes of names and values together, over every API's set.
pub(crate) const MAX_ALL_TOTAL: usize = 32 * 1024;
/// The longest API name (as `[[api]]` names are: `[a-z0-9_-]`, at most 64).
const MAX_API_NAME: usize = 64;

/// One API's headers as given, before any check. `Debug` shows the API and the header names
/// only; deserialising never echoes a value in its error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamInput {
    /// The API (an `[[api]]` name) these headers are for; `None`: the one API the server
    /// serves.
    pub api: Option<String>,
    pub headers: Vec<(String, String)>,
}

crate::debug_fields!(|u: UpstreamInput| {
    api: u.api,
    headers: u.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<&str>>(),
});

const SHAPE: &str = "upstream must be an object {\"api\": \"NAME\", \"headers\": {\"Name\": \
    \"value\", …}} of strings (\"api\" names the API they are for), or a list of such objects";

impl<'de> Deserialize<'de> for UpstreamInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Through a Value, so that serde's messages (which quote what they got) never carry
        // a credential.
        let value = serde_json::Value::deserialize(d).map_err(|_| D::Error::custom(SHAPE))?;
        UpstreamInput::from_value(value).map_err(D::Error::custom)
    }
}

impl UpstreamInput {
    /// From `--upstream-header "Name: value"` arguments, for `api` (`--api NAME`).
    pub(crate) fn from_args(api: Option<String>, args: &[HeaderArg]) -> UpstreamInput {
        UpstreamInput {
            api,
            headers: args
                .iter()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect(),
        }
    }

    fn from_value(value: serde_json::Value) -> Result<UpstreamInput, String> {
        let serde_json::Value::Object(mut outer) = value else {
            return Err(SHAPE.into());
        };
        let headers = match outer.remove("headers") {
            Some(serde_json::Value::Object(h)) => h,
            None => serde_json::Map::new(),
            _ => return Err(SHAPE.into()),
        };
        let api = match outer.remove("api") {
            Some(serde_json::Value::String(a)) => Some(a),
            None | Some(serde_json::Value::Null) => None,
            _ => return Err(SHAPE.into()),
        };
        if !outer.is_empty() {
            return Err(format!(
                "upstream takes only the fields `api` and `headers`; {SHAPE}"
            ));
        }
        let headers = headers
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(SHAPE.to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UpstreamInput { api, headers })
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Checks the API name, the header names, values, count and sizes; the headers as they
    /// will be sent.
    pub fn check(&self) -> Result<SessionUpstream, String> {
        SessionUpstream::check(std::slice::from_ref(self))
    }

    /// The API name, checked.
    fn checked_api(&self) -> Result<Option<String>, String> {
        self.api.as_deref().map(checked_api_name).transpose()
    }
}

/// An API name as credentials name it, checked: `[a-z0-9_-]`, 1 to 64 characters (the rule of
/// `[[api]]` names; it also keeps the sealed format's separators out).
pub(crate) fn checked_api_name(api: &str) -> Result<String, String> {
    let api = api.trim();
    if api.is_empty()
        || api.len() > MAX_API_NAME
        || !api
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "the API of upstream headers must be the name of an [[api]] of the config file \
             (a-z, 0-9, _ and -, 1 to {MAX_API_NAME} characters)"
        ));
    }
    Ok(api.to_string())
}

/// `"upstream"` of `POST /admin/v1/sessions`: one object, or a list of them (one per API);
/// `null` or absent is none.
pub(crate) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<UpstreamInput>, D::Error> {
    use serde::de::Error;
    let value = serde_json::Value::deserialize(d).map_err(|_| D::Error::custom(SHAPE))?;
    match value {
        serde_json::Value::Null => Ok(Vec::new()),
        serde_json::Value::Array(list) => list
            .into_iter()
            .map(|v| UpstreamInput::from_value(v).map_err(D::Error::custom))
            .collect(),
        one => Ok(vec![
            UpstreamInput::from_value(one).map_err(D::Error::custom)?,
        ]),
    }
}

/// One `--upstream-header "Name: value"` argument. `Debug` shows the name only.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderArg {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeaderArg({}: <redacted>)", self.name)
    }
}

impl std::str::FromStr for HeaderArg {
    type Err = String;

    fn from_str(s: &str) -> Result<HeaderArg, String> {
        match s.split_once(':') {
            Some((n, v)) => Ok(HeaderArg {
                name: n.trim().to_string(),
                value: v.trim().to_string(),
            }),
            // Never echo the argument: it may be a bare secret.
            None => Err("expected \"Name: value\" (the argument has no `:`)".to_string()),
        }
    }
}

/// The API a call goes to, as stored credentials are matched against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallApi<'a> {
    /// Its name (`""` for the one API of `--spec`).
    pub name: &'a str,
    /// Whether it is the only API the server serves: then headers that name no API are its.
    pub only: bool,
}

/// The APIs the servers serve, as the last one to start or reload recorded them
/// (`served_apis`): what stored credentials are checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServedApis {
    /// No server has recorded what it serves yet: API names are taken as given.
    Unknown,
    /// One API, from `--spec`: it has no name.
    Unnamed,
    /// The `[[api]]` names of the config file.
    Named(Vec<String>),
}

impl ServedApis {
    /// From the recorded names (`""` is the unnamed API of `--spec`).
    pub fn from_names(mut names: Vec<String>) -> ServedApis {
        names.sort();
        names.dedup();
        match names.as_slice() {
            [] => ServedApis::Unknown,
            [one] if one.is_empty() => ServedApis::Unnamed,
            _ => ServedApis::Named(names.into_iter().filter(|n| !n.is_empty()).collect()),
        }
    }

    /// The names, as recorded.
    pub fn names(&self) -> Vec<String> {
        match self {
            ServedApis::Unknown => Vec::new(),
            ServedApis::Unnamed => vec![String::new()],
            ServedApis::Named(n) => n.clone(),
        }
    }
}

/// One API's headers, ready to send.
#[derive(Clone)]
struct ApiHeaders {
    api: Option<String>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// A session's (or person's) upstream headers, by API, ready to send. `Debug` shows the APIs
/// and the names only.
#[derive(Clone, Default)]
pub struct SessionUpstream {
    sets: Vec<ApiHeaders>,
}

crate::debug_fields!(|u: SessionUpstream| {
    sets: u
        .sets
        .iter()
        .map(|s| (s.api.as_deref().unwrap_or(""), s.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()))
        .collect::<Vec<_>>(),
});

/// What is bound into the sealed value: it opens only for this row, and only as the format it
/// was written in.
fn context(version: u8, row: uuid::Uuid) -> Vec<u8> {
    format!("apigate:session-upstream:v{version}:{row}").into_bytes()
}

/// Version 1 held one set of headers for no API (`name \0 value \n`); version 2 names each
/// header's API (`api \0 name \0 value \n`, `api` empty for none).
const FORMAT: u8 = 2;

impl SessionUpstream {
    /// Checks every set: its API name, its headers (names, values, count and sizes), no API
    /// twice, and the sizes over all sets.
    pub fn check(sets: &[UpstreamInput]) -> Result<SessionUpstream, String> {
        if sets.len() > MAX_APIS {
            return Err(format!(
                "upstream credentials may be stored for at most {MAX_APIS} APIs"
            ));
        }
        let mut out = SessionUpstream::default();
        let mut all = 0usize;
        for set in sets {
            let api = set.checked_api()?;
            if out.sets.iter().any(|s| s.api == api) {
                return Err(match &api {
                    Some(a) => format!("upstream headers for the API {a} are given twice"),
                    None => "upstream headers for no API are given twice".into(),
                });
            }
            let (headers, total) = check_headers(&set.headers)?;
            all += total;
            if all > MAX_ALL_TOTAL {
                return Err(format!(
                    "the upstream headers of all APIs are too large together (at most \
                     {MAX_ALL_TOTAL} bytes)"
                ));
            }
            out.sets.push(ApiHeaders { api, headers });
        }
        Ok(out)
    }

    /// The headers a call to `to` sends: those stored for its API by name, and, when it is
    /// the only API served, those stored for no API (first, so that its own replace them).
    pub fn for_call<'a>(
        &'a self,
        to: CallApi<'a>,
    ) -> impl Iterator<Item = &'a (HeaderName, HeaderValue)> + 'a {
        let unnamed = self.sets.iter().filter(move |s| s.api.is_none() && to.only);
        let named = self
            .sets
            .iter()
            .filter(move |s| !to.name.is_empty() && s.api.as_deref() == Some(to.name));
        unnamed.chain(named).flat_map(|s| s.headers.iter())
    }

    /// Every header of every API (for the scrubber of a test or bench; calls use
    /// [`SessionUpstream::for_call`]).
    pub fn all_headers(&self) -> impl Iterator<Item = &(HeaderName, HeaderValue)> {
        self.sets.iter().flat_map(|s| s.headers.iter())
    }

    /// The header names of every API, for listings.
    pub fn names(&self) -> Vec<String> {
        self.all_headers().map(|(n, _)| n.to_string()).collect()
    }

    /// The APIs headers are stored for (sorted; none for headers that name no API).
    pub fn apis(&self) -> Vec<String> {
        let mut apis: Vec<String> = self.sets.iter().filter_map(|s| s.api.clone()).collect();
        apis.sort();
        apis
    }

    pub fn is_empty(&self) -> bool {
        self.sets.iter().all(|s| s.headers.is_empty())
    }

    /// Whether every set may be stored while `served` is what the servers serve: with several
    /// APIs a set must name one of them, and a named API must be served. The error says the
    /// flag that works and the names to use.
    pub fn fits(&self, served: &ServedApis) -> Result<(), String> {
        for set in &self.sets {
            match (&set.api, served) {
                (None, ServedApis::Named(names)) if names.len() > 1 => {
                    return Err(format!(
                        "these upstream headers name no API, and the server serves several \
                         ({}): say which one they are for with --api NAME (in the admin API, \
                         \"api\": \"NAME\" beside \"headers\"); each API gets only its own \
                         headers",
                        names.join(", ")
                    ));
                }
                (Some(_), ServedApis::Unnamed) => {
                    return Err(
                        "the server serves one API, from --spec, which has no name: \
                        leave out --api (\"api\" in the admin API); the headers then go to \
                        that API"
                            .into(),
                    );
                }
                (Some(api), ServedApis::Named(names)) if !names.contains(api) => {
                    return Err(format!(
                        "no API named {api} is served; the served APIs are {}: give one of \
                         them with --api NAME (\"api\" in the admin API)",
                        names.join(", ")
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// These sets with `other`'s in place of theirs for the same API (a person's credentials
    /// for one API are replaced, the others' kept).
    pub fn replaced_by(&self, other: SessionUpstream) -> Result<SessionUpstream, String> {
        let mut sets: Vec<ApiHeaders> = self
            .sets
            .iter()
            .filter(|s| !other.sets.iter().any(|o| o.api == s.api))
            .cloned()
            .collect();
        sets.extend(other.sets);
        let merged = SessionUpstream { sets };
        if merged.sets.len() > MAX_APIS {
            return Err(format!(
                "upstream credentials may be stored for at most {MAX_APIS} APIs"
            ));
        }
        let all: usize = merged
            .all_headers()
            .map(|(n, v)| n.as_str().len() + v.len())
            .sum();
        if all > MAX_ALL_TOTAL {
            return Err(format!(
                "the upstream headers of all APIs are too large together (at most \
                 {MAX_ALL_TOTAL} bytes)"
            ));
        }
        Ok(merged)
    }

    /// These sets without the one for `api` (`None`: the one that names no API); whether
    /// there was one.
    pub fn without(&self, api: Option<&str>) -> (SessionUpstream, bool) {
        let sets: Vec<ApiHeaders> = self
            .sets
            .iter()
            .filter(|s| s.api.as_deref() != api)
            .cloned()
            .collect();
        let removed = sets.len() != self.sets.len();
        (SessionUpstream { sets }, removed)
    }

    /// Seals the headers for `row` (a session's or a person's id).
    pub fn seal(&self, keys: &SecretKeys, row: uuid::Uuid) -> Result<Vec<u8>, SealError> {
        let mut plain = Zeroizing::new(Vec::new());
        for set in &self.sets {
            for (n, v) in &set.headers {
                // api \0 name \0 value \n — none can contain NUL or LF.
                plain.extend_from_slice(set.api.as_deref().unwrap_or("").as_bytes());
                plain.push(0);
                plain.extend_from_slice(n.as_str().as_bytes());
                plain.push(0);
                plain.extend_from_slice(v.as_bytes());
                plain.push(b'\n');
            }
        }
        keys.seal(&plain, &context(FORMAT, row))
    }

    /// Opens what [`SessionUpstream::seal`] made for `row`; a value sealed before headers
    /// named their API (format 1) opens as headers for no API.
    pub fn open(
        keys: &SecretKeys,
        row: uuid::Uuid,
        sealed: &[u8],
    ) -> Result<SessionUpstream, SealError> {
        let (plain, fields) = match keys.open(sealed, &context(FORMAT, row)) {
            Ok(plain) => (plain, 3),
            Err(SealError::Tampered) => (keys.open(sealed, &context(1, row))?, 2),
            Err(e) => return Err(e),
        };
        let mut out = SessionUpstream::default();
        for line in plain.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let mut parts = line.splitn(fields, |b| *b == 0);
            let api = match fields {
                3 => parts.next().ok_or(SealError::Malformed)?,
                _ => &[][..],
            };
            let (Some(n), Some(v)) = (parts.next(), parts.next()) else {
                return Err(SealError::Malformed);
            };
            let api = match api {
                [] => None,
                a => Some(
                    std::str::from_utf8(a)
                        .map_err(|_| SealError::Malformed)?
                        .to_string(),
                ),
            };
            let name = HeaderName::from_bytes(n).map_err(|_| SealError::Malformed)?;
            let mut value = HeaderValue::from_bytes(v).map_err(|_| SealError::Malformed)?;
            value.set_sensitive(true);
            match out.sets.iter_mut().find(|s| s.api == api) {
                Some(set) => set.headers.push((name, value)),
                None => out.sets.push(ApiHeaders {
                    api,
                    headers: vec![(name, value)],
                }),
            }
        }
        Ok(out)
    }
}

/// One API's headers, checked; and their bytes.
fn check_headers(
    given: &[(String, String)],
) -> Result<(Vec<(HeaderName, HeaderValue)>, usize), String> {
    if given.len() > MAX_SESSION_HEADERS {
        return Err(format!(
            "a session may carry at most {MAX_SESSION_HEADERS} upstream headers per API"
        ));
    }
    let mut total = 0usize;
    let mut out: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(given.len());
    for (name, value) in given {
        let name = name.trim();
        let shown: String = name.chars().take(MAX_HEADER_NAME).collect();
        if name.is_empty() || name.len() > MAX_HEADER_NAME {
            return Err(format!(
                "upstream header names must have 1 to {MAX_HEADER_NAME} characters"
            ));
        }
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{shown:?} is not a valid header name"))?;
        if !headers::session_may_store(header.as_str()) {
            return Err(format!(
                "a session may not set the upstream header {header}: connection, framing, \
                 body, proxy and forwarding headers, Accept-Encoding and method overrides \
                 are not credentials"
            ));
        }
        if out.iter().any(|(n, _)| *n == header) {
            return Err(format!("the upstream header {header} is given twice"));
        }
        let value = value.trim();
        if value.is_empty() || value.len() > MAX_HEADER_VALUE {
            return Err(format!(
                "the value of upstream header {header} must have 1 to {MAX_HEADER_VALUE} bytes"
            ));
        }
        let mut v = HeaderValue::from_str(value).map_err(|_| {
            format!("the value of upstream header {header} has characters a header cannot carry")
        })?;
        v.set_sensitive(true);
        total += header.as_str().len() + value.len();
        if total > MAX_HEADERS_TOTAL {
            return Err(format!(
                "the upstream headers are too large together (at most {MAX_HEADERS_TOTAL} bytes)"
            ));
        }
        out.push((header, v));
    }
    Ok((out, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(pairs: &[(&str, &str)]) -> UpstreamInput {
        UpstreamInput {
            api: None,
            headers: pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn headers_are_checked() {
        let ok = input(&[("Authorization", "Bearer abc"), ("X-Tenant", "t1")])
            .check()
            .unwrap();
        assert_eq!(ok.names(), ["authorization", "x-tenant"]);
        for bad in [
            input(&[("Host", "evil")]),
            input(&[("Transfer-Encoding", "chunked")]),
            input(&[("Content-Type", "text/plain")]),
            input(&[("bad name", "x")]),
            input(&[("X-A", "line\r\nInjected: 1")]),
            input(&[("X-A", "")]),
            input(&[("X-A", "1"), ("x-a", "2")]),
            input(&[("X-A", &"v".repeat(MAX_HEADER_VALUE + 1))]),
        ] {
            let e = bad.check().unwrap_err();
            assert!(
                !e.contains("Bearer") && !e.contains("evil") && !e.contains("Injected"),
                "{e}"
            );
        }
        let many: Vec<(String, String)> = (0..=MAX_SESSION_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(
            UpstreamInput {
                api: None,
                headers: many
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn deserialising_never_echoes_values() {
        let ok: UpstreamInput =
            serde_json::from_str(r#"{"headers": {"Authorization": "Bearer abc"}}"#).unwrap();
        assert_eq!(ok.headers, [("Authorization".into(), "Bearer abc".into())]);
        assert!(!format!("{ok:?}").contains("abc"));
        for bad in [
            r#""Bearer secret-1""#,
            r#"{"headers": "Bearer secret-1"}"#,
            r#"{"headers": {"A": ["secret-1"]}}"#,
            r#"{"headers": {}, "secret-1": 1}"#,
            r#"{"api": ["secret-1"], "headers": {}}"#,
        ] {
            let e = serde_json::from_str::<UpstreamInput>(bad).unwrap_err();
            assert!(!e.to_string().contains("secret-1"), "{e}");
        }
    }

    #[test]
    fn cli_arguments_parse_without_echoing_values() {
        let a: HeaderArg = "Authorization: Bearer a:b".parse().unwrap();
        assert_eq!(
            (a.name.as_str(), a.value.as_str()),
            ("Authorization", "Bearer a:b")
        );
        assert!(!format!("{a:?}").contains("Bearer"));
        let e = "Bearer-secret-without-colon"
            .parse::<HeaderArg>()
            .unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        let input = UpstreamInput::from_args(None, &[a]);
        assert_eq!(input.check().unwrap().names(), ["authorization"]);
    }

    #[test]
    fn seal_and_open_for_one_session_only() {
        let keys = SecretKeys::from_bytes(&[3u8; 32], None).unwrap();
        let up = input(&[("Authorization", "Bearer abc"), ("Cookie", "a=1; b=2")])
            .check()
            .unwrap();
        let id = uuid::Uuid::new_v4();
        let sealed = up.seal(&keys, id).unwrap();
        let back = SessionUpstream::open(&keys, id, &sealed).unwrap();
        let pairs = |u: &SessionUpstream| -> Vec<(HeaderName, HeaderValue)> {
            u.all_headers().cloned().collect()
        };
        assert_eq!(pairs(&back), pairs(&up));
        assert!(back.all_headers().all(|(_, v)| v.is_sensitive()));
        assert!(SessionUpstream::open(&keys, uuid::Uuid::new_v4(), &sealed).is_err());
    }

    fn scoped(api: Option<&str>, pairs: &[(&str, &str)]) -> UpstreamInput {
        UpstreamInput {
            api: api.map(str::to_string),
            ..input(pairs)
        }
    }

    /// The values a call to `to` sends.
    fn sent(up: &SessionUpstream, name: &str, only: bool) -> Vec<String> {
        up.for_call(CallApi { name, only })
            .map(|(_, v)| v.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_call_sends_only_its_own_apis_headers() {
        let up = SessionUpstream::check(&[
            scoped(Some("github"), &[("Authorization", "Bearer gh")]),
            scoped(Some("jira"), &[("Authorization", "Bearer jira")]),
            scoped(None, &[("X-Any", "any")]),
        ])
        .unwrap();
        // (api, the only one served, what goes out)
        for (api, only, want) in [
            ("github", false, vec!["Bearer gh"]),
            ("jira", false, vec!["Bearer jira"]),
            ("weather", false, vec![]),
            ("github", true, vec!["any", "Bearer gh"]),
            ("weather", true, vec!["any"]),
            ("", true, vec!["any"]),
            ("", false, vec![]),
        ] {
            assert_eq!(sent(&up, api, only), want, "{api} only={only}");
        }
        assert_eq!(up.apis(), ["github", "jira"]);
        assert_eq!(up.names(), ["authorization", "authorization", "x-any"]);
        assert!(!format!("{up:?}").contains("Bearer"));
    }

    #[test]
    fn api_names_are_checked_and_not_given_twice() {
        for bad in ["", " ", "GitHub", "a b", "a\0b", "a\nb", &"a".repeat(65)] {
            let e = scoped(Some(bad), &[("X-A", "v")]).check().unwrap_err();
            assert!(e.contains("[[api]]"), "{bad:?}: {e}");
        }
        assert!(
            scoped(Some(" github "), &[("X-A", "v")])
                .check()
                .unwrap()
                .apis()
                == ["github"]
        );
        let twice = SessionUpstream::check(&[
            scoped(Some("a"), &[("X-A", "1")]),
            scoped(Some("a"), &[("X-B", "2")]),
        ]);
        assert!(twice.unwrap_err().contains("twice"));
        let many: Vec<UpstreamInput> = (0..=MAX_APIS)
            .map(|i| scoped(Some(&format!("api{i}")), &[("X-A", "v")]))
            .collect();
        assert!(SessionUpstream::check(&many).is_err());
        let big = "v".repeat(MAX_HEADER_VALUE);
        let heavy: Vec<UpstreamInput> = (0..5)
            .map(|i| scoped(Some(&format!("api{i}")), &[("X-A", &big)]))
            .collect();
        assert!(
            SessionUpstream::check(&heavy)
                .unwrap_err()
                .contains("all APIs")
        );
    }

    #[test]
    fn stored_headers_must_name_a_served_api() {
        let none = scoped(None, &[("X-A", "v")]).check().unwrap();
        let github = scoped(Some("github"), &[("X-A", "v")]).check().unwrap();
        let several =
            ServedApis::from_names(vec!["weather".into(), "github".into(), "jira".into()]);
        let one = ServedApis::from_names(vec!["github".into()]);
        let unnamed = ServedApis::from_names(vec![String::new()]);
        let unknown = ServedApis::from_names(vec![]);
        // (credentials, served, refused with)
        for (up, served, refused) in [
            (&none, &several, Some("--api NAME")),
            (&github, &several, None),
            (&none, &one, None),
            (&github, &one, None),
            (&none, &unnamed, None),
            (&github, &unnamed, Some("leave out --api")),
            (&none, &unknown, None),
            (&github, &unknown, None),
        ] {
            match (up.fits(served), refused) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => assert!(e.contains(want), "{e}"),
                (got, want) => panic!("{up:?} under {served:?}: {got:?}, wanted {want:?}"),
            }
        }
        let e = none.fits(&several).unwrap_err();
        assert!(e.contains("github, jira, weather"), "{e}");
        let other = scoped(Some("billing"), &[("X-A", "v")]).check().unwrap();
        let e = other.fits(&several).unwrap_err();
        assert!(
            e.contains("no API named billing") && e.contains("github, jira, weather"),
            "{e}"
        );
        assert_eq!(several.names(), ["github", "jira", "weather"]);
    }

    #[test]
    fn one_apis_headers_are_replaced_or_removed_alone() {
        let up = SessionUpstream::check(&[
            scoped(Some("github"), &[("Authorization", "Bearer old")]),
            scoped(Some("jira"), &[("Authorization", "Bearer jira")]),
        ])
        .unwrap();
        let new = scoped(Some("github"), &[("Authorization", "Bearer new")])
            .check()
            .unwrap();
        let merged = up.replaced_by(new).unwrap();
        assert_eq!(sent(&merged, "github", false), ["Bearer new"]);
        assert_eq!(sent(&merged, "jira", false), ["Bearer jira"]);
        let (left, removed) = merged.without(Some("jira"));
        assert!(removed);
        assert_eq!(left.apis(), ["github"]);
        assert!(!left.without(Some("jira")).1);
        assert!(left.without(Some("github")).0.is_empty());
    }

    #[test]
    fn the_api_is_sealed_with_the_headers_and_old_values_open_as_for_no_api() {
        let keys = SecretKeys::from_bytes(&[3u8; 32], None).unwrap();
        let id = uuid::Uuid::new_v4();
        let up = SessionUpstream::check(&[
            scoped(Some("github"), &[("Authorization", "Bearer gh")]),
            scoped(None, &[("X-Any", "any")]),
        ])
        .unwrap();
        let back = SessionUpstream::open(&keys, id, &up.seal(&keys, id).unwrap()).unwrap();
        assert_eq!(sent(&back, "github", false), ["Bearer gh"]);
        assert_eq!(sent(&back, "weather", false), Vec::<String>::new());
        assert_eq!(sent(&back, "weather", true), ["any"]);
        // What a server before per-API credentials sealed: `name \0 value \n`, format 1.
        let old = keys
            .seal(b"authorization\0Bearer old\n", &context(1, id))
            .unwrap();
        let back = SessionUpstream::open(&keys, id, &old).unwrap();
        assert_eq!(back.apis(), Vec::<String>::new());
        assert_eq!(sent(&back, "", true), ["Bearer old"]);
        assert_eq!(sent(&back, "github", false), Vec::<String>::new());
        assert!(SessionUpstream::open(&keys, uuid::Uuid::new_v4(), &old).is_err());
    }

    #[test]
    fn upstream_takes_one_object_or_a_list() {
        #[derive(Deserialize)]
        struct Body {
            #[serde(default, deserialize_with = "one_or_many")]
            upstream: Vec<UpstreamInput>,
        }
        let parse = |s: &str| serde_json::from_str::<Body>(s).map(|b| b.upstream);
        let one = parse(r#"{"upstream": {"api": "github", "headers": {"A": "1"}}}"#).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].api.as_deref(), Some("github"));
        let two = parse(
            r#"{"upstream": [{"api": "a", "headers": {"A": "1"}}, {"api": "b", "headers": {"A": "2"}}]}"#,
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert!(parse(r#"{"upstream": null}"#).unwrap().is_empty());
        assert!(parse(r#"{}"#).unwrap().is_empty());
        let e = parse(r#"{"upstream": [{"api": "a", "headers": {"A": 5}}, "secret-2"]}"#)
            .err()
            .unwrap();
        assert!(!e.to_string().contains("secret-2"), "{e}");
    }
}
