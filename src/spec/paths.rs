//! Matching a concrete request path (`/pets/42`) to a path template (`/pets/{petId}`), and
//! extracting the parameter values.

/// One template segment split into literal text and `{name}` placeholders.
#[derive(Debug)]
enum Part<'a> {
    Lit(&'a str),
    Var(&'a str),
}

fn parts(segment: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let mut rest = segment;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        if start > 0 {
            out.push(Part::Lit(&rest[..start]));
        }
        out.push(Part::Var(&rest[start + 1..start + len]));
        rest = &rest[start + len + 1..];
    }
    if !rest.is_empty() {
        out.push(Part::Lit(rest));
    }
    out
}

/// Matches one concrete segment against a template segment; returns captured values.
fn match_segment<'c>(
    template: &[Part<'_>],
    concrete: &'c str,
    out: &mut Vec<(String, &'c str)>,
) -> bool {
    match template {
        [] => concrete.is_empty(),
        [Part::Lit(l), rest @ ..] => concrete
            .strip_prefix(l)
            .is_some_and(|c| match_segment(rest, c, out)),
        [Part::Var(name), rest @ ..] => {
            // The variable takes the shortest non-empty prefix that lets the rest match.
            for end in value_ends(concrete) {
                let mark = out.len();
                out.push((name.to_string(), &concrete[..end]));
                if match_segment(rest, &concrete[end..], out) {
                    return true;
                }
                out.truncate(mark);
            }
            false
        }
    }
}

/// The byte offsets where a value captured from the start of `concrete` may end: after each
/// character, but never inside a `%XX` escape nor between the escapes of one percent-encoded
/// UTF-8 character (`%C3%A9`), which would decode to a stray `%` or a replacement character
/// and no longer be the value the client encoded.
fn value_ends(concrete: &str) -> Vec<usize> {
    let b = concrete.as_bytes();
    let escaped = |i: usize| -> Option<u8> {
        let [b'%', hi, lo] = *b.get(i..i + 3)? else {
            return None;
        };
        let digit = |c: u8| char::from(c).to_digit(16);
        u8::try_from(digit(hi)? * 16 + digit(lo)?).ok()
    };
    let mut ends = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let step = match escaped(i) {
            Some(lead) => {
                // The escapes of one character: as many as its lead byte announces.
                let n = (lead.leading_ones() as usize).clamp(1, 4);
                let bytes: Option<Vec<u8>> = (0..n).map(|k| escaped(i + 3 * k)).collect();
                match bytes {
                    Some(bytes) if n > 1 && std::str::from_utf8(&bytes).is_ok() => 3 * n,
                    _ => 3,
                }
            }
            None => concrete[i..].chars().next().map_or(1, char::len_utf8),
        };
        i += step;
        ends.push(i);
    }
    ends
}

/// How well `concrete` matches `template`: `None` if it does not; otherwise the number of
/// literal characters matched (more is a better match) and the decoded parameter values.
pub fn match_template(template: &str, concrete: &str) -> Option<(usize, Vec<(String, String)>)> {
    let t: Vec<&str> = template.trim_end_matches('/').split('/').collect();
    let c: Vec<&str> = concrete.trim_end_matches('/').split('/').collect();
    if t.len() != c.len() {
        return None;
    }
    let mut literal = 0;
    let mut values = Vec::new();
    for (ts, cs) in t.iter().zip(&c) {
        let p = parts(ts);
        literal += p
            .iter()
            .map(|p| if let Part::Lit(l) = p { l.len() } else { 0 })
            .sum::<usize>();
        let mut caps = Vec::new();
        if !match_segment(&p, cs, &mut caps) {
            return None;
        }
        for (name, raw) in caps {
            let decoded = percent_encoding::percent_decode_str(raw)
                .decode_utf8_lossy()
                .into_owned();
            values.push((name, decoded));
        }
    }
    Some((literal, values))
}

#[cfg(test)]
mod tests {
    use super::match_template;

    #[test]
    fn matches_templates_and_extracts_values() {
        let (_, v) = match_template("/pets/{petId}", "/pets/42").unwrap();
        assert_eq!(v, vec![("petId".to_string(), "42".to_string())]);
        let (_, v) = match_template("/compare/{base}...{head}", "/compare/main...feature").unwrap();
        assert_eq!(v[0].1, "main");
        assert_eq!(v[1].1, "feature");
        assert!(match_template("/pets/{petId}", "/pets").is_none());
        assert!(match_template("/pets/{petId}", "/pets/").is_none());
        let (lit_a, _) = match_template("/pets/findByTags", "/pets/findByTags").unwrap();
        let (lit_b, _) = match_template("/pets/{petId}", "/pets/findByTags").unwrap();
        assert!(lit_a > lit_b);
        let (_, v) = match_template("/files/{name}.json", "/files/a%20b.json").unwrap();
        assert_eq!(v[0].1, "a b");
    }

    #[test]
    fn values_never_end_inside_an_escaped_character() {
        // Adjacent placeholders: each value is a whole character, as the client encoded it.
        let (_, v) = match_template("/{a}{b}", "/%7B1e400%23").unwrap();
        assert_eq!(v, [("a".into(), "{".into()), ("b".into(), "1e400#".into())]);
        let (_, v) = match_template("/{a}{b}", "/%C3%A9x").unwrap();
        assert_eq!(v, [("a".into(), "é".into()), ("b".into(), "x".into())]);
        let (_, v) = match_template("/{a}{b}", "/%F0%9F%98%80%25").unwrap();
        assert_eq!(v, [("a".into(), "😀".into()), ("b".into(), "%".into())]);
        // Not an escape, or not UTF-8: one character or one escape at a time.
        let (_, v) = match_template("/{a}{b}", "/%zz").unwrap();
        assert_eq!(v, [("a".into(), "%".into()), ("b".into(), "zz".into())]);
        let (_, v) = match_template("/{a}{b}", "/%FF%FE").unwrap();
        assert_eq!(v[0].1, "\u{fffd}");
        assert!(match_template("/{a}{b}", "/%C3%A9").is_none());
    }
}
