//! Text analysis shared by indexing and querying: identifier-aware splitting
//! (`listPullRequests`, `pull_requests`, `/repos/{owner}/pulls`, `chat.postMessage`),
//! lower-casing, stop words and English stemming. Both sides use the same functions, so a
//! term produced for a document is spelled exactly like the term produced for a query.

use std::collections::HashMap;

use tantivy::tokenizer::{Stemmer, TextAnalyzer, WhitespaceTokenizer};

/// Splits text into lower-case words: on every non-alphanumeric character, at camelCase
/// boundaries (`postMessage` → `post message`, `HTTPServer` → `http server`). Letters and
/// digits stay together (`v1beta1`, `oauth2`).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut cur, &mut out);
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let lower_run = chars[i + 1..]
                .iter()
                .take_while(|n| n.is_lowercase())
                .count();
            // `aB` splits before B; `ABcd` splits before B (the end of an acronym), but a
            // plural acronym stays whole (`PRs`, `IDs`).
            if prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && lower_run >= 2)
            {
                flush(&mut cur, &mut out);
            }
        }
        cur.extend(c.to_lowercase());
    }
    flush(&mut cur, &mut out);
    out
}

fn flush(cur: &mut String, out: &mut Vec<String>) {
    if !cur.is_empty() {
        out.push(std::mem::take(cur));
    }
}

/// Words that carry no meaning for finding an operation, in documents or in queries.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "etc",
    "ever",
    "every",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "let",
    "lets",
    "may",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "someone",
    "something",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "thus",
    "to",
    "too",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "very",
    "via",
    "want",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "need",
    "needs",
    "wants",
    "like",
    "right",
    "already",
    "e",
    "g",
    "ie",
    "eg",
    "using",
    "use",
    "used",
    "one",
    "given",
    "specified",
    "whatever",
    "able",
];

pub(crate) fn is_stop(word: &str) -> bool {
    word.len() < 2 || word.bytes().all(|b| b.is_ascii_digit()) || STOP_WORDS.contains(&word)
}

/// Stems single lower-case words with the English Snowball stemmer.
pub(crate) struct Stems {
    analyzer: TextAnalyzer,
    /// API text repeats a small vocabulary: each word is stemmed once.
    cache: HashMap<String, String>,
}

impl Stems {
    pub(crate) fn new() -> Stems {
        Stems {
            analyzer: TextAnalyzer::builder(WhitespaceTokenizer::default())
                .filter(Stemmer::default())
                .build(),
            cache: HashMap::new(),
        }
    }

    /// How many words are remembered.
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }

    pub(crate) fn stem(&mut self, word: &str) -> String {
        if let Some(s) = self.cache.get(word) {
            return s.clone();
        }
        let mut stream = self.analyzer.token_stream(word);
        let stem = match stream.next() {
            Some(t) => t.text.clone(),
            None => word.to_string(),
        };
        self.cache.insert(word.to_string(), stem.clone());
        stem
    }

    /// Words of `text` without stop words, stemmed: the terms stored in the index.
    pub(crate) fn terms(&mut self, text: &str) -> Vec<String> {
        words(text)
            .into_iter()
            .filter(|w| !is_stop(w))
            .map(|w| self.stem(&w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_split() {
        assert_eq!(words("listPullRequests"), ["list", "pull", "requests"]);
        assert_eq!(words("pull_requests"), ["pull", "requests"]);
        assert_eq!(words("/repos/{owner}/pulls"), ["repos", "owner", "pulls"]);
        assert_eq!(words("chat.postMessage"), ["chat", "post", "message"]);
        assert_eq!(words("HTTPServerError"), ["http", "server", "error"]);
        assert_eq!(words("open PRs"), ["open", "prs"]);
        assert_eq!(words("apps/v1beta1"), ["apps", "v1beta1"]);
        assert_eq!(
            words("get_api_contents_by_path"),
            ["get", "api", "contents", "by", "path"]
        );
    }

    #[test]
    fn terms_are_stemmed_without_stop_words() {
        let mut s = Stems::new();
        assert_eq!(s.terms("Lists the repositories"), ["list", "repositori"]);
        assert_eq!(s.terms("repository"), ["repositori"]);
        assert_eq!(s.terms("issue #42"), ["issu"]);
    }
}
