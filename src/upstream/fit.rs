//! Fitting a parsed (and already scrubbed) response body into the budget the agent is shown.
//! A list body (a top-level array, or an object whose largest array is most of it) loses
//! whole items from the end of that array and keeps every other key, wherever it stands; the
//! cut is described by [`Cut`]. Text is cut on a character boundary; any other body, and a
//! body that was itself cut on reading, keeps the longest valid JSON prefix ([`cut_json`]).
//! Pure: no I/O.

use serde::Serialize;
use serde_json::Value;

use super::cut::cut_json;
use super::redact::Secrets;

/// What a structured cut left out: `shown` of the `total` items of the array at `pointer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Cut {
    /// JSON pointer of the array in the body (`""` for a top-level array).
    pub pointer: String,
    pub shown: usize,
    pub total: usize,
}

/// A body within the budget.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub body: Value,
    /// Something was left out.
    pub truncated: bool,
    /// How, when whole items of a list were left out.
    pub cut: Option<Cut>,
}

/// Objects are searched this deep for the list (`{"data": {"items": [...]}}` is depth 2).
const MAX_LIST_DEPTH: usize = 3;

/// The bytes `v` takes as compact JSON, counted without building the text.
pub(crate) fn json_len<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail, nor can serializing JSON values and plain structs.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// The pointer of the body's list: `""` for a top-level array, else the largest array reached
/// through objects only (`/data`, `/workflow_runs`), if it holds at least half of the body's
/// bytes. `None` for a body that is not a list.
pub(crate) fn list_pointer(body: &Value) -> Option<String> {
    if body.is_array() {
        return Some(String::new());
    }
    let mut best: Option<(usize, String)> = None;
    largest_array(body, &mut String::new(), 0, &mut best);
    let (size, pointer) = best?;
    (size * 2 >= json_len(body)).then_some(pointer)
}

fn largest_array(v: &Value, at: &mut String, depth: usize, best: &mut Option<(usize, String)>) {
    let Value::Object(m) = v else { return };
    if depth >= MAX_LIST_DEPTH {
        return;
    }
    for (k, child) in m {
        let len = at.len();
        at.push('/');
        at.push_str(&k.replace('~', "~0").replace('/', "~1"));
        match child {
            Value::Array(_) => {
                let size = json_len(child);
                if best.as_ref().is_none_or(|(b, _)| size > *b) {
                    *best = Some((size, at.clone()));
                }
            }
            Value::Object(_) => largest_array(child, at, depth + 1, best),
            _ => {}
        }
        at.truncate(len);
    }
}

/// `body` within `budget` bytes of compact JSON. `whole` is false when the body was already
/// cut on reading (over `--max-read-bytes`): it then keeps the prefix cut.
pub fn fit(mut body: Value, budget: usize, whole: bool, secrets: &Secrets) -> Fitted {
    // Text counts its own bytes, as it was read, and is cut on a character boundary.
    if let Value::String(text) = &mut body {
        if text.len() <= budget {
            return Fitted {
                body,
                truncated: !whole,
                cut: None,
            };
        }
        let mut end = budget;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        secrets.trim_partial_tail(text);
        return Fitted {
            body,
            truncated: true,
            cut: None,
        };
    }
    let len = json_len(&body);
    if len <= budget {
        return Fitted {
            body,
            truncated: !whole,
            cut: None,
        };
    }
    if whole
        && let Some(pointer) = list_pointer(&body)
        && let Some(Value::Array(items)) = body.pointer_mut(&pointer)
    {
        let list_len = json_len(&Value::Array(Vec::new()))
            + items.iter().map(json_len).sum::<usize>()
            + items.len().saturating_sub(1);
        // What the body takes with the list empty.
        let envelope = len - list_len + 2;
        if envelope <= budget {
            let mut used = envelope;
            let mut shown = 0;
            for item in items.iter() {
                let more = json_len(item) + usize::from(shown > 0);
                if used + more > budget {
                    break;
                }
                used += more;
                shown += 1;
            }
            let total = items.len();
            items.truncate(shown);
            return Fitted {
                body,
                truncated: true,
                cut: Some(Cut {
                    pointer,
                    shown,
                    total,
                }),
            };
        }
    }
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let body = cut_json(&bytes[..budget.min(bytes.len())], budget, secrets).unwrap_or(Value::Null);
    Fitted {
        body,
        truncated: true,
        cut: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fits(v: Value, budget: usize) -> Fitted {
        let f = fit(v, budget, true, &Secrets::default());
        assert!(json_len(&f.body) <= budget, "{} over {budget}", f.body);
        f
    }

    #[test]
    fn a_list_loses_whole_items_and_keeps_its_envelope() {
        let items: Vec<Value> = (0..100)
            .map(|i| json!({"id": format!("ch_{i}"), "amount": i * 100, "meta": {"k": "v"}}))
            .collect();
        // Stripe puts `has_more` and `url` after `data`: they stay.
        let doc = json!({"object": "list", "data": items, "has_more": true, "url": "/v1/charges"});
        let f = fits(doc.clone(), 1000);
        assert!(f.truncated);
        let cut = f.cut.unwrap();
        assert_eq!(cut.pointer, "/data");
        assert_eq!(cut.total, 100);
        let data = f.body["data"].as_array().unwrap();
        assert_eq!(data.len(), cut.shown);
        assert!(cut.shown > 5 && cut.shown < 100, "{cut:?}");
        assert_eq!(data[..], doc["data"].as_array().unwrap()[..cut.shown]);
        assert_eq!(f.body["has_more"], true);
        assert_eq!(f.body["url"], "/v1/charges");
        // A top-level array.
        let f = fits(doc["data"].clone(), 500);
        assert_eq!(f.cut.unwrap().pointer, "");
        // Fits: untouched.
        let f = fits(doc.clone(), 1 << 20);
        assert!(!f.truncated && f.cut.is_none() && f.body == doc);
        // An item larger than the budget: none shown, never part of one.
        let f = fits(json!({"data": [{"text": "x".repeat(500)}], "n": 1}), 100);
        assert_eq!(f.body, json!({"data": [], "n": 1}));
        assert_eq!(f.cut.unwrap().shown, 0);
    }

    #[test]
    fn other_bodies_keep_the_prefix_cut() {
        // The array is a small part of the body: not a list.
        let doc = json!({"id": 1, "text": "y".repeat(2000), "labels": ["a", "b"]});
        let f = fits(doc, 500);
        assert!(f.truncated && f.cut.is_none());
        assert_eq!(f.body["id"], 1);
        // A body cut on reading keeps the prefix cut even when it is a list.
        let items: Vec<Value> = (0..100).map(|i| json!({"id": i})).collect();
        let f = fit(json!({"data": items}), 200, false, &Secrets::default());
        assert!(f.truncated && f.cut.is_none());
        // A huge envelope key: no list cut can fit it.
        let doc = json!({"note": "z".repeat(1000), "data": [[1], [2]]});
        assert!(fits(doc, 300).cut.is_none());
        // Text counts its own bytes and is cut on a character boundary.
        let f = fit(json!("abcdéf"), 5, true, &Secrets::default());
        assert_eq!((f.body, f.truncated), (json!("abcd"), true));
        assert!(!fit(json!("abc"), 5, true, &Secrets::default()).truncated);
    }

    #[test]
    fn the_list_is_the_largest_array() {
        let items: Vec<u32> = (1000..1030).collect();
        let doc = json!({"meta": {"tags": [1]}, "page": {"items": items}});
        assert_eq!(list_pointer(&doc).as_deref(), Some("/page/items"));
        assert_eq!(
            list_pointer(&json!({"a/b": [1, 2, 3, 4, 5, 6, 7, 8, 9]})).as_deref(),
            Some("/a~1b")
        );
        assert_eq!(list_pointer(&json!({"id": 1})), None);
    }
}
