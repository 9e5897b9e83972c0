//! What the commands' help and messages share, a leaf of `cli`: the headings `--help` groups
//! the flags under, and a count with its noun in the right number.

/// The headings `dev`, `serve` and `stdio --help` group their flags under, in this order
/// after the essentials (which have none): clap shows a heading where its first flag is
/// declared, so the commands declare the groups in this order.
pub mod heading {
    /// No heading: the essentials, first. Flags after a flattened group that sets a heading
    /// name it (or this), as clap keeps that heading for what follows.
    pub const ESSENTIALS: Option<&str> = None;
    pub const KEYS: &str = "Keys and sessions";
    pub const SIGN_IN: &str = "Sign-in (OAuth)";
    pub const LIMITS: &str = "Limits";
    pub const UPSTREAM: &str = "Upstream";
    pub const MONITOR: &str = "Agent monitor";
    pub const RANKING: &str = "Ranking";
    pub const HTTP: &str = "HTTP";
    pub const IDENTITY: &str = "Identity assertions";
}

/// `n` and the noun in its number: "1 rule", "3 rules".
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_count_takes_the_noun_in_its_number() {
        assert_eq!(super::count(1, "rule", "rules"), "1 rule");
        assert_eq!(super::count(0, "rule", "rules"), "0 rules");
        assert_eq!(super::count(20, "operation", "operations"), "20 operations");
    }
}
