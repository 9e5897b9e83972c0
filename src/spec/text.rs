//! Reducing HTML and Markdown in descriptions to plain text for indexing and compact output.

/// Strips HTML tags and entities, Markdown links/emphasis/headings, and folds white space.
/// Link text and inline markup keep their place in the sentence: `see "[HTTP
/// method](…)."` becomes `see "HTTP method."`.
pub fn plain(input: &str) -> String {
    let chars: Vec<char> = input.chars().collect();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '<' => {
                // Skip a tag (anything up to '>'), but keep a lone '<' that starts no tag.
                let looks_like_tag = chars
                    .get(i)
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '/' || *n == '!');
                if looks_like_tag {
                    let start = i;
                    while i < chars.len() && chars[i] != '>' {
                        i += 1;
                    }
                    let tag: String = chars[start..i].iter().collect();
                    i += 1;
                    if !is_inline_tag(&tag) {
                        out.push(' ');
                    }
                } else {
                    out.push(c);
                }
            }
            '&' => {
                let mut entity = String::new();
                while let Some(&n) = chars.get(i) {
                    if n == ';' || entity.len() > 8 || !(n.is_ascii_alphanumeric() || n == '#') {
                        break;
                    }
                    entity.push(n);
                    i += 1;
                }
                if chars.get(i) == Some(&';') {
                    i += 1;
                    out.push_str(decode_entity(&entity));
                } else {
                    out.push('&');
                    out.push_str(&entity);
                }
            }
            '[' => match link_end(&chars, i) {
                // A Markdown link: keep its text (handled as it comes), drop the target.
                Some(_) => {}
                None => out.push(c),
            },
            ']' if chars.get(i) == Some(&'(') && chars[i..].contains(&')') => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                i += 1;
            }
            '*' | '`' => {}
            '#' | '|' => out.push(' '),
            _ => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where `[text](target)` starting after the `[` at `from` ends, if it is a link.
fn link_end(chars: &[char], from: usize) -> Option<usize> {
    let close = from
        + chars
            .get(from..)?
            .iter()
            .position(|&c| c == ']' || c == '[')?;
    if chars[close] != ']' || chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = close + 1 + chars[close + 1..].iter().position(|&c| c == ')')?;
    Some(end)
}

/// Tags that sit inside a sentence (`<code>`, `<a>`, `<b>`): removing them adds no space.
fn is_inline_tag(tag: &str) -> bool {
    let name: String = tag
        .trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        name.as_str(),
        "a" | "b" | "i" | "em" | "strong" | "code" | "span" | "tt" | "kbd" | "var" | "sub" | "sup"
    )
}

fn decode_entity(entity: &str) -> &'static str {
    match entity {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "#39" | "apos" => "'",
        _ => " ",
    }
}

/// The first sentence of `input` as plain text, cut to `max` characters (with `…`).
pub fn first_sentence(input: &str, max: usize) -> String {
    let text = plain(input);
    let first = text.split_inclusive(". ").next().unwrap_or(&text).trim();
    if first.chars().count() > max {
        let mut s: String = first.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn strips_html_and_markdown() {
        assert_eq!(
            plain("<p>Creates a <code>charge</code> &amp; more.</p>\n\n## Notes"),
            "Creates a charge & more. Notes"
        );
        assert_eq!(
            plain("See [the docs](https://x.y/z) for **details** on `a < b`"),
            "See the docs for details on a < b"
        );
    }

    #[test]
    fn link_text_and_inline_markup_keep_their_place() {
        assert_eq!(
            plain(r#"see "[HTTP method](https://docs.github.com/rest/overview#http-method).""#),
            r#"see "HTTP method.""#
        );
        assert_eq!(
            plain("Set <code>state</code>. Use `open`, then **close**."),
            "Set state. Use open, then close."
        );
        assert_eq!(
            plain("items[0] and [not a link]"),
            "items[0] and [not a link]"
        );
        assert_eq!(plain("<p>One</p><p>Two</p>"), "One Two");
        assert_eq!(
            plain("unclosed [link](http://x"),
            "unclosed [link](http://x"
        );
    }
}
