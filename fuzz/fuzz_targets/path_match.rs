//! Path-template matching (`spec::match_template`), two ways:
//!
//! - raw: an arbitrary template and concrete path (split at the first NUL byte); must not
//!   panic or hang (agents choose the concrete path, documents the template);
//! - round trip: a generated template (literal text and `{name}` placeholders, several per
//!   segment) filled with percent-encoded values (as clients encode them) must match, with one
//!   value per placeholder, in order, and the literal score of the template. When the
//!   template is unambiguous (every placeholder but the last of a segment is followed by
//!   literal text holding a character clients always encode), the values come back exactly;
//!   otherwise filling the template with the values found gives the same path again.

#![no_main]

use apigate::spec::match_template;
use apigate_fuzz::string;
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What clients encode in a path value: everything but RFC 3986 unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Characters a literal may hold that never appear unencoded in a value (`%` does: it starts
/// every escape).
const ALWAYS_ENCODED: &[char] = &[',', ';', '=', '@', ':', '!', '$', '(', ')', '*', '+', '\''];

enum Part {
    Lit(String),
    Var(String, String),
}

fn literal(u: &mut Unstructured<'_>) -> Result<String> {
    const PIECES: &[&str] = &[
        ".", "...", "-", "_", "~", ",", ";", "=", "@", ":", "json", "v1", "a", "%", "%2F", "é",
        "(", ")", "*", "+", "'", "!", "$",
    ];
    let text = if u.arbitrary()? {
        (*u.choose(PIECES)?).to_string()
    } else {
        u.arbitrary::<String>()?
    };
    // A literal never holds a segment separator or a brace (those end it).
    Ok(text.replace(['/', '{', '}'], ""))
}

fn template(u: &mut Unstructured<'_>) -> Result<Vec<Vec<Part>>> {
    let segments = u.int_in_range(1..=5usize)?;
    let mut out = Vec::new();
    let mut n = 0;
    for _ in 0..segments {
        let mut parts = Vec::new();
        for _ in 0..u.int_in_range(1..=4usize)? {
            if u.arbitrary()? {
                let mut value = string(u)?;
                if value.is_empty() {
                    value.push('x');
                }
                parts.push(Part::Var(format!("p{n}"), value));
                n += 1;
            } else {
                let l = literal(u)?;
                if !l.is_empty() {
                    parts.push(Part::Lit(l));
                }
            }
        }
        if parts.is_empty() {
            parts.push(Part::Lit("s".into()));
        }
        out.push(parts);
    }
    Ok(out)
}

fn unambiguous(segment: &[Part]) -> bool {
    segment.iter().enumerate().all(|(i, p)| match p {
        Part::Lit(_) => true,
        Part::Var(..) => match segment.get(i + 1) {
            None => true,
            Some(Part::Lit(l)) => l.contains(ALWAYS_ENCODED) && !l.contains('%'),
            Some(Part::Var(..)) => false,
        },
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let text = String::from_utf8_lossy(rest);
        let (t, c) = text.split_once('\0').unwrap_or((&text, ""));
        let _ = match_template(t, c);
        return;
    }
    let mut u = Unstructured::new(rest);
    let Ok(segments) = template(&mut u) else {
        return;
    };
    let mut tpl = String::new();
    let mut concrete = String::new();
    let mut expected = Vec::new();
    let mut literal_len = 0;
    for seg in &segments {
        tpl.push('/');
        concrete.push('/');
        for part in seg {
            match part {
                Part::Lit(l) => {
                    tpl.push_str(l);
                    concrete.push_str(l);
                    literal_len += l.len();
                }
                Part::Var(name, value) => {
                    tpl.push_str(&format!("{{{name}}}"));
                    concrete.push_str(&utf8_percent_encode(value, COMPONENT).to_string());
                    expected.push((name.clone(), value.clone()));
                }
            }
        }
    }
    let (score, values) = match_template(&tpl, &concrete)
        .unwrap_or_else(|| panic!("{concrete:?} does not match its own template {tpl:?}"));
    assert_eq!(score, literal_len, "literal score of {tpl:?}");
    let names: Vec<&String> = values.iter().map(|(n, _)| n).collect();
    let want: Vec<&String> = expected.iter().map(|(n, _)| n).collect();
    assert_eq!(names, want, "placeholders of {tpl:?}");
    if segments.iter().all(|s| unambiguous(s)) {
        assert_eq!(values, expected, "{tpl:?} filled as {concrete:?}");
    }
    // Ambiguous templates may split the path differently, but never inside a `%XX` escape:
    // filling the template with the values found gives the same path again. (A literal `%`
    // in a template is not a valid path and may legitimately break this.)
    let literal_percent = segments
        .iter()
        .flatten()
        .any(|p| matches!(p, Part::Lit(l) if l.contains('%')));
    if !literal_percent {
        let mut found = values.iter();
        let mut again = String::new();
        for seg in &segments {
            again.push('/');
            for part in seg {
                match part {
                    Part::Lit(l) => again.push_str(l),
                    Part::Var(..) => {
                        let (_, v) = found.next().expect("one value per placeholder");
                        again.push_str(&utf8_percent_encode(v, COMPONENT).to_string());
                    }
                }
            }
        }
        assert_eq!(
            again, concrete,
            "{tpl:?} matched {concrete:?} as {values:?}"
        );
    }
});
