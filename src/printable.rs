//! Text that came from outside (an agent's tool name, an admin client's user id) made safe to
//! print: one line, no terminal control, bounded width. Every CLI table cell and every log
//! field that carries such text goes through [`escape`] (and tables through [`cell`]), so a
//! value cannot forge a row, clear the screen or reorder text (bidirectional overrides).
//! Pure functions; no imports from the rest of the crate.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` would change how a terminal shows the line rather than show itself: control
/// characters (C0, DEL, C1), line and paragraph separators, and bidirectional controls.
pub(crate) fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Whether the text holds any character [`is_unprintable`] refuses.
pub(crate) fn has_unprintable(text: &str) -> bool {
    text.chars().any(is_unprintable)
}

/// The text with every unprintable character written out as an escape (`\n`, `\t`, `\x1b`,
/// `\u{202e}`) and backslashes doubled only when something was escaped, so plain text comes
/// back unchanged and escaped text cannot be mistaken for plain.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !has_unprintable(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x100 && is_unprintable(c) => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_unprintable(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The widest a table cell is printed, in characters; longer ones end in `…`.
pub(crate) const MAX_CELL: usize = 120;

/// A table cell: [`escape`]d, then cut to `max` characters (the last one `…` when cut).
pub fn cell(text: &str, max: usize) -> String {
    let escaped = escape(text);
    if escaped.chars().count() <= max {
        return escaped.into_owned();
    }
    let mut out: String = escaped.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        for t in ["api_execute", "user-1", "a\\b", "Zürich 東京", ""] {
            assert!(matches!(escape(t), Cow::Borrowed(s) if s == t), "{t}");
        }
    }

    #[test]
    fn controls_are_written_out() {
        let cases = [
            ("a\nb", "a\\nb"),
            ("x\x1b[2Jy", "x\\x1b[2Jy"),
            ("t\tr\r", "t\\tr\\r"),
            ("\u{7f}\u{85}", "\\x7f\\x85"),
            ("evil\u{202e}txt", "evil\\u{202e}txt"),
            ("a\u{2028}b", "a\\u{2028}b"),
            ("back\\slash\n", "back\\\\slash\\n"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape(raw), shown, "{raw:?}");
            assert!(!has_unprintable(&escape(raw)));
        }
    }

    #[test]
    fn cells_are_cut() {
        assert_eq!(cell("abc", 3), "abc");
        assert_eq!(cell("abcd", 3), "ab…");
        assert_eq!(cell("\n\n", 3), "\\n…");
        let huge = "x".repeat(1_000_000);
        assert_eq!(cell(&huge, MAX_CELL).chars().count(), MAX_CELL);
    }
}
