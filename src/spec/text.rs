//! Reducing HTML and Markdown in descriptions to plain text for indexing and compact output.

/// Strips HTML tags and entities, Markdown links/emphasis/headings, and folds white space.
pub fn plain(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => {
                // Skip a tag (anything up to '>'), but keep a lone '<' that starts no tag.
                let looks_like_tag = chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphabetic() || *n == '/' || *n == '!');
                if looks_like_tag {
                    for n in chars.by_ref() {
                        if n == '>' {
                            break;
                        }
                    }
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            '&' => {
                let mut entity = String::new();
                while let Some(&n) = chars.peek() {
                    if n == ';' || entity.len() > 8 || !(n.is_ascii_alphanumeric() || n == '#') {
                        break;
                    }
                    entity.push(n);
                    chars.next();
                }
                if chars.peek() == Some(&';') {
                    chars.next();
                    out.push_str(decode_entity(&entity));
                } else {
                    out.push('&');
                    out.push_str(&entity);
                }
            }
            '[' => {
                // Markdown link: keep the text, drop the target.
                out.push(' ');
            }
            ']' => {
                if chars.peek() == Some(&'(') {
                    for n in chars.by_ref() {
                        if n == ')' {
                            break;
                        }
                    }
                }
                out.push(' ');
            }
            '*' | '`' | '#' | '|' => out.push(' '),
            _ => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
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
}
