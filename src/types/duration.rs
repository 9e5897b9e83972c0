//! Durations as every duration flag and message writes them: `10s`, `500ms`, `5m`, `1h`, `7d`.

use std::time::Duration;

/// `10s`, `1.5s`, `250ms`, `5m` — for messages.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Parses `10`, `10s`, `500ms`, `5m`, `1h`, `7d` into a duration (a bare number is seconds).
/// Every duration flag takes this form.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 10s, 500ms, 5m, 1h"))?;
    let d = match unit.trim() {
        "" | "s" | "sec" | "secs" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" | "min" | "mins" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        "d" => Duration::from_secs(n.saturating_mul(86_400)),
        other => return Err(format!("invalid duration unit {other:?} in {s:?}")),
    };
    if d.is_zero() {
        return Err("a duration must be greater than zero".to_owned());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert_eq!(
            parse_duration("3d").unwrap(),
            Duration::from_secs(3 * 86_400)
        );
        assert!(parse_duration("3w").is_err());
        assert_eq!(human_duration(Duration::from_secs(10)), "10s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
    }
}
