//! What a response says of the page after it ([`Next`], or a [`Continuation`] this server
//! cannot follow), the response as the conventions read it ([`Seen`]), and which query
//! parameters an operation declares: the words the paging conventions share.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use url::Url;

use crate::spec::{Operation, ParamIn};

/// The longest continuation value a result shows.
pub(super) const MAX_SHOWN: usize = 512;

/// What a response says of the page after it.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// The query of the next page.
    Query(Map<String, Value>),
    /// No page after this one.
    End,
    /// A next page this server cannot ask for.
    Unmapped(Continuation),
}

/// A next page the response shows and the operation's arguments cannot express.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Continuation {
    /// Where the response shows it: `header link`, or the JSON pointer of a body field.
    pub at: String,
    /// Its value, scrubbed of credentials, at most 512 characters.
    pub value: String,
    /// Why it cannot be followed with api_execute.
    pub why: String,
}

impl Continuation {
    pub(crate) fn new(at: &str, value: &str, why: String) -> Continuation {
        // Text the API sent, shown to a model: control and direction characters escaped.
        let mut value = crate::printable::escape(value).into_owned();
        if value.len() > MAX_SHOWN {
            let mut end = MAX_SHOWN;
            while !value.is_char_boundary(end) {
                end -= 1;
            }
            value.truncate(end);
            value.push('…');
        }
        Continuation {
            at: crate::printable::escape(at).into_owned(),
            value,
            why: crate::printable::escape(&why).into_owned(),
        }
    }

    /// The sentence a result or a `pages` stop says.
    pub(crate) fn says(&self) -> String {
        format!(
            "the API shows a next page that api_execute cannot ask for: {} = {:?} ({})",
            self.at, self.value, self.why
        )
    }
}

/// One response as the mapper sees it.
#[derive(Clone, Copy)]
pub(super) struct Seen<'a> {
    pub op: &'a Operation,
    pub request: &'a Url,
    pub sent: &'a Map<String, Value>,
    pub headers: &'a Map<String, Value>,
    pub body: &'a Value,
    pub list: Option<&'a str>,
}

impl Seen<'_> {
    /// The page's items, when the body holds a list.
    pub fn items(&self) -> Option<&Vec<Value>> {
        self.body.pointer(self.list?)?.as_array()
    }
}

/// Whether the operation declares the query parameter `name`.
pub(super) fn declares(op: &Operation, name: &str) -> bool {
    op.parameters
        .iter()
        .any(|p| p.location == ParamIn::Query && p.name == name)
}
