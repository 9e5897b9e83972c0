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
            let mut ends: Vec<usize> = concrete.char_indices().map(|(i, _)| i).skip(1).collect();
            ends.push(concrete.len());
            for end in ends {
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
}
