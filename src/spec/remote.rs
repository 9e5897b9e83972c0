//! Which documents a spec's `$ref`s may fetch. A document the operator wrote (a file) may name
//! any file or URL. A document fetched from a URL (a remote spec, or a document such a spec
//! names) may name only URLs on its own origin, the spec's origin, or an origin the operator
//! lists (`ref-origins` in the `[[api]]` table); and only public addresses, unless that
//! document itself came from a loopback, link-local or private address. The host is resolved
//! once, every address checked, and the fetch connects only to those addresses
//! (`source::Pinned`: no second lookup for DNS rebinding, no proxy, no redirect). A refusal
//! happens before any connection, so it reads the same whether a port is open or closed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::SpecError;
use super::source::{self, Budget, Location, Pinned, Raw};

/// What loading a spec may fetch: one byte budget for the spec and every document its `$ref`s
/// name (`--max-spec-bytes`), and the origins beyond the spec's own that a remote document's
/// `$ref`s may reach (`ref-origins`).
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    pub max_bytes: u64,
    pub ref_origins: Vec<url::Origin>,
}

impl Default for FetchPolicy {
    fn default() -> FetchPolicy {
        FetchPolicy {
            max_bytes: source::DEFAULT_MAX_SPEC_BYTES,
            ref_origins: Vec::new(),
        }
    }
}

/// Parses one `ref-origins` entry: `http(s)://host[:port]`, nothing after it but `/`.
pub fn parse_origin(text: &str) -> Result<url::Origin, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    let bare = url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.path() == "/";
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare {
        return Err(format!(
            "{text:?} is not an origin: write scheme, host and port only, as \
             \"https://schemas.example.com\" or \"http://10.0.0.5:8080\""
        ));
    }
    Ok(url.origin())
}

/// One load's fetches: the policy and the byte budget they share.
pub(crate) struct Fetcher<'a> {
    policy: &'a FetchPolicy,
    pub budget: Budget,
}

impl<'a> Fetcher<'a> {
    pub fn new(policy: &'a FetchPolicy) -> Fetcher<'a> {
        Fetcher {
            policy,
            budget: Budget::new(policy.max_bytes),
        }
    }

    /// The bytes of the document at `target`, which a `$ref` of the document at `base` names
    /// (`base_internal`: that document came from an internal address); `main` is the spec's
    /// own location.
    pub async fn referenced(
        &mut self,
        main: &Location,
        base: &Location,
        base_internal: bool,
        target: &Location,
    ) -> Result<Raw, SpecError> {
        let pin = match (base, target) {
            // The operator's own file names it.
            (Location::File(_), _) => None,
            (Location::Url(_), Location::File(_)) => {
                return Err(not_allowed(
                    main,
                    target,
                    "a remote document names a local file",
                ));
            }
            (Location::Url(b), Location::Url(t)) => {
                Some(self.check(main, b, base_internal, target, t).await?)
            }
        };
        let raw = source::read_raw(target, None, &mut self.budget, pin.as_ref()).await?;
        raw.ok_or_else(|| SpecError::Read {
            file: target.display(),
            message: "the server answered 304 Not Modified to a plain GET".into(),
        })
    }

    /// Where the URL `t` (a `$ref` of the remote document at `b`) may be fetched from, or why
    /// it may not be.
    async fn check(
        &self,
        main: &Location,
        b: &url::Url,
        base_internal: bool,
        target: &Location,
        t: &url::Url,
    ) -> Result<Pinned, SpecError> {
        if !matches!(t.scheme(), "http" | "https") {
            return Err(not_allowed(
                main,
                target,
                "only http(s) documents are fetched",
            ));
        }
        let origin = t.origin();
        let main_origin = match main {
            Location::Url(m) => Some(m.origin()),
            Location::File(_) => None,
        };
        let known = origin == b.origin()
            || main_origin.as_ref() == Some(&origin)
            || self.policy.ref_origins.contains(&origin);
        if !known {
            return Err(not_allowed(
                main,
                target,
                "a remote spec's $refs stay on its own origin; list other origins in \
                 `ref-origins` of the api's table in apigate.toml",
            ));
        }
        let port = t.port_or_known_default().unwrap_or(80);
        let (host, addrs) = match t.host() {
            Some(url::Host::Ipv4(a)) => (None, vec![SocketAddr::new(a.into(), port)]),
            Some(url::Host::Ipv6(a)) => (None, vec![SocketAddr::new(a.into(), port)]),
            Some(url::Host::Domain(d)) => {
                let found: Vec<SocketAddr> = tokio::net::lookup_host((d, port))
                    .await
                    .map(|found| found.collect())
                    .unwrap_or_default();
                if found.is_empty() {
                    return Err(SpecError::Read {
                        file: target.display(),
                        message: format!("the host {d:?} does not resolve"),
                    });
                }
                (Some(d.to_string()), found)
            }
            None => return Err(not_allowed(main, target, "the URL has no host")),
        };
        if !base_internal && addrs.iter().any(|a| is_internal(a.ip())) {
            return Err(not_allowed(
                main,
                target,
                "its host is a loopback, link-local or private address, and the document \
                 naming it was not loaded from one",
            ));
        }
        Ok(Pinned { host, addrs })
    }
}

/// The refusal of a `$ref` to `target`.
fn not_allowed(main: &Location, target: &Location, why: &str) -> SpecError {
    SpecError::NotAllowed {
        file: main.display(),
        reference: target.display(),
        why: why.to_string(),
    }
}

/// Whether `ip` is an address a public document must not make apigate fetch: loopback,
/// unspecified, private (RFC 1918, unique local), link-local (169.254/16, fe80::/10), shared
/// (100.64/10), multicast, broadcast and reserved ranges; an IPv6 address that carries an IPv4
/// one (mapped, compatible, NAT64, 6to4) is judged by that.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => internal_v4(a),
        IpAddr::V6(a) => internal_v6(a),
    }
}

fn internal_v4(a: Ipv4Addr) -> bool {
    let [x, y, ..] = a.octets();
    a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_documentation()
        || x == 0
        || (x == 100 && (64..128).contains(&y))
        || (x == 192 && y == 0 && a.octets()[2] == 0)
        || (x == 198 && (18..20).contains(&y))
        || x >= 240
}

fn internal_v6(a: Ipv6Addr) -> bool {
    if let Some(v4) = a.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    let s = a.segments();
    // ::a.b.c.d (IPv4-compatible, deprecated) and 64:ff9b::/96 (NAT64) carry an IPv4 address
    // in their last 32 bits; 2002::/16 (6to4) in the next 32 after the prefix.
    let last_v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if (s[..6] == [0; 6] && !a.is_loopback() && !a.is_unspecified())
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        return internal_v4(last_v4);
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return internal_v4(v4);
    }
    a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] == 0x2001 && s[1] == 0xdb8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_classified() {
        let rows: &[(&str, bool)] = &[
            ("127.0.0.1", true),
            ("127.8.9.10", true),
            ("0.0.0.0", true),
            ("0.1.2.3", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("172.32.0.1", false),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("100.64.0.1", true),
            ("224.0.0.1", true),
            ("255.255.255.255", true),
            ("8.8.8.8", false),
            ("93.184.216.34", false),
            ("::1", true),
            ("::", true),
            ("fe80::1", true),
            ("fc00::1", true),
            ("fd12:3456::1", true),
            ("ff02::1", true),
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", true),
            ("::ffff:169.254.169.254", true),
            ("::ffff:8.8.8.8", false),
            ("::127.0.0.1", true),
            ("64:ff9b::a00:1", true),
            ("64:ff9b::808:808", false),
            ("2002:7f00:1::", true),
            ("2002:808:808::", false),
            ("2606:4700:4700::1111", false),
        ];
        for (text, internal) in rows {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_internal(ip), *internal, "{text}");
        }
    }

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert!(parse_origin("https://schemas.example.com").is_ok());
        assert!(parse_origin("http://10.0.0.5:8080/").is_ok());
        assert_eq!(
            parse_origin("https://a.example:443").unwrap(),
            parse_origin("https://a.example").unwrap()
        );
        for bad in [
            "schemas.example.com",
            "ftp://a.example",
            "https://a.example/path",
            "https://user@a.example",
            "https://a.example/?q=1",
            "file:///etc",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    /// A remote document's ref to another origin, to a local file or to a non-http scheme is
    /// refused before anything is fetched; the same origin is let through to the fetch.
    #[tokio::test]
    async fn a_remote_documents_refs_stay_on_allowed_origins() {
        let policy = FetchPolicy::default();
        let mut fetcher = Fetcher::new(&policy);
        let main = Location::parse("http://127.0.0.1:9/spec.json").unwrap();
        let refused = [
            "http://127.0.0.1:10/x.json",
            "https://127.0.0.1:9/x.json",
            "http://localhost:9/x.json",
        ];
        for target in refused {
            let target = Location::parse(target).unwrap();
            let e = fetcher.referenced(&main, &main, true, &target).await;
            assert!(matches!(e, Err(SpecError::NotAllowed { .. })), "{target:?}");
        }
        let file = Location::File("/etc/passwd".into());
        let e = fetcher.referenced(&main, &main, true, &file).await;
        assert!(matches!(e, Err(SpecError::NotAllowed { .. })));
        let scheme = main.join("file:///etc/passwd").unwrap();
        let e = fetcher.referenced(&main, &main, true, &scheme).await;
        assert!(matches!(e, Err(SpecError::NotAllowed { .. })));
        // Same origin, from a public document: loopback is refused.
        let same = main.join("other.json").unwrap();
        let e = fetcher.referenced(&main, &main, false, &same).await;
        assert!(matches!(e, Err(SpecError::NotAllowed { .. })));
    }
}
