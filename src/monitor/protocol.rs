//! The agent-monitor protocol's messages (`docs/monitor-protocol.md`) as one serde type: the
//! client builds an [`Event`] and posts it, the reference monitor parses the same type, so the
//! two cannot drift apart. [`GateDecision`] is a monitor's answer to `tool.pre_execute`.
//!
//! The JSON is exactly the documented wire format (tests below parse every example of the
//! document and write it back unchanged). Parsing is lenient where other plugins may differ:
//! every field but `type` has a default, so an event with a missing field still parses.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Fields every event carries (besides `type` and `sessionID`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Base {
    /// Unix time in milliseconds when the event was built.
    pub timestamp: i64,
    pub project: String,
    pub directory: String,
    pub worktree: String,
}

/// Which call a `tool.pre_execute` or `tool.post_execute` is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Call {
    pub tool: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "callID")]
    pub call_id: String,
}

/// `sessionStats` of a `tool.pre_execute`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    /// Calls of the session so far, this one included (0 when a plugin did not say).
    #[serde(default)]
    pub tool_call_count: u64,
    /// How many different tools the session has called.
    #[serde(default)]
    pub unique_tools: u64,
    /// Milliseconds since the session was first seen.
    #[serde(default)]
    pub duration: u64,
}

/// `finalStats` of a `session.idle`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalStats {
    #[serde(default)]
    pub duration: u64,
    #[serde(default)]
    pub total_tool_calls: u64,
    /// Tool names, sorted.
    #[serde(default)]
    pub unique_tools: Vec<String>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// One protocol event, tagged by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A session initialized, or apigate saw it for the first time.
    #[serde(rename = "session.started")]
    SessionStarted {
        #[serde(flatten)]
        base: Base,
        #[serde(rename = "sessionID", default)]
        session_id: String,
        /// Equal to `timestamp`.
        #[serde(rename = "startTime", default)]
        start_time: i64,
    },
    /// A call is about to run; the monitor's answer decides.
    #[serde(rename = "tool.pre_execute")]
    PreExecute {
        #[serde(flatten)]
        base: Base,
        #[serde(flatten)]
        call: Call,
        /// The sanitized arguments (`monitor::sanitize_args`).
        #[serde(default = "empty_object")]
        args: Value,
        #[serde(rename = "sessionStats", default)]
        session_stats: SessionStats,
        /// For `api_execute`: the request as its dry run shows it (`monitor::preview`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<Value>,
    },
    /// A call succeeded.
    #[serde(rename = "tool.post_execute")]
    PostExecute {
        #[serde(flatten)]
        base: Base,
        #[serde(flatten)]
        call: Call,
        #[serde(default)]
        title: String,
        /// Bytes of the result's compact JSON.
        #[serde(rename = "outputLength", default)]
        output_length: u64,
        /// Whether the call named an operation.
        #[serde(rename = "hasMetadata", default)]
        has_metadata: bool,
    },
    /// A call was blocked or failed while running.
    #[serde(rename = "session.error")]
    SessionError {
        #[serde(flatten)]
        base: Base,
        #[serde(rename = "sessionID", default)]
        session_id: String,
        /// The error's code, at most 500 characters.
        #[serde(default)]
        error: String,
    },
    /// A session closed or went idle.
    #[serde(rename = "session.idle")]
    SessionIdle {
        #[serde(flatten)]
        base: Base,
        #[serde(rename = "sessionID", default)]
        session_id: String,
        #[serde(rename = "finalStats", default)]
        final_stats: FinalStats,
    },
}

impl Event {
    /// Every `type` the protocol defines.
    pub(crate) const TYPES: [&'static str; 5] = [
        "session.started",
        "tool.pre_execute",
        "tool.post_execute",
        "session.error",
        "session.idle",
    ];

    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStarted { .. } => "session.started",
            Event::PreExecute { .. } => "tool.pre_execute",
            Event::PostExecute { .. } => "tool.post_execute",
            Event::SessionError { .. } => "session.error",
            Event::SessionIdle { .. } => "session.idle",
        }
    }

    /// The fields every event carries.
    pub fn base(&self) -> &Base {
        match self {
            Event::SessionStarted { base, .. }
            | Event::PreExecute { base, .. }
            | Event::PostExecute { base, .. }
            | Event::SessionError { base, .. }
            | Event::SessionIdle { base, .. } => base,
        }
    }

    /// The session the event belongs to (empty when a plugin sent none).
    pub fn session_id(&self) -> &str {
        match self {
            Event::PreExecute { call, .. } | Event::PostExecute { call, .. } => &call.session_id,
            Event::SessionStarted { session_id, .. }
            | Event::SessionError { session_id, .. }
            | Event::SessionIdle { session_id, .. } => session_id,
        }
    }
}

/// Why a received body is not a protocol event.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("the body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("an event is a JSON object")]
    NotAnObject,
    #[error("an event needs a string `type`")]
    MissingType,
    #[error("invalid {kind} event: {source}")]
    Invalid {
        kind: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A received event: the JSON as it came (kept for display and logs, extra fields and all)
/// and, for the types the protocol defines, the parsed [`Event`] (`None` for other types,
/// which a monitor records and otherwise ignores).
#[derive(Debug, Clone)]
pub struct ReceivedEvent {
    pub raw: Value,
    pub event: Option<Event>,
}

impl ReceivedEvent {
    /// Parses a request body: a JSON object with a string `type`; a known type must also
    /// have fields of the right types.
    pub fn parse(body: &[u8]) -> Result<ReceivedEvent, EventError> {
        let raw: Value = serde_json::from_slice(body).map_err(EventError::NotJson)?;
        let Value::Object(map) = &raw else {
            return Err(EventError::NotAnObject);
        };
        let Some(kind) = map.get("type").and_then(Value::as_str) else {
            return Err(EventError::MissingType);
        };
        if !Event::TYPES.contains(&kind) {
            return Ok(ReceivedEvent { raw, event: None });
        }
        let event = Event::deserialize(&raw).map_err(|source| EventError::Invalid {
            kind: kind.to_owned(),
            source,
        })?;
        Ok(ReceivedEvent {
            raw,
            event: Some(event),
        })
    }
}

/// A monitor's answer to `tool.pre_execute`: `{"block": false}` or
/// `{"block": true, "reason": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateDecision {
    pub block: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl GateDecision {
    pub fn allow() -> GateDecision {
        GateDecision {
            block: false,
            reason: None,
        }
    }

    pub fn block(reason: impl Into<String>) -> GateDecision {
        GateDecision {
            block: true,
            reason: Some(reason.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every JSON example in `docs/monitor-protocol.md`, in order.
    fn documented_examples() -> Vec<Value> {
        let doc = include_str!("../../docs/monitor-protocol.md");
        let mut examples = Vec::new();
        let mut rest = doc;
        while let Some(start) = rest.find("```json\n") {
            let after = &rest[start + "```json\n".len()..];
            let end = after.find("```").expect("a closed code block");
            examples.push(serde_json::from_str(&after[..end]).expect("the example is JSON"));
            rest = &after[end..];
        }
        examples
    }

    #[test]
    fn every_documented_event_parses_and_is_written_back_unchanged() {
        let examples: Vec<Value> = documented_examples()
            .into_iter()
            .filter(|e| e.get("type").is_some())
            .collect();
        let kinds: Vec<&str> = examples
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, Event::TYPES, "one example per event type");
        for example in examples {
            let event: Event = serde_json::from_value(example.clone()).unwrap();
            assert_eq!(event.kind(), example["type"]);
            assert_eq!(event.session_id(), example["sessionID"]);
            let back = serde_json::to_value(&event).unwrap();
            assert_eq!(back, example);
            // Same keys in the same order, as the document shows them.
            let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(&back), keys(&example));
        }
    }

    #[test]
    fn documented_decisions_parse_and_are_written_back_unchanged() {
        let block = json!({"block": true, "reason": "Deleting pets needs a person's approval"});
        let d: GateDecision = serde_json::from_value(block.clone()).unwrap();
        assert_eq!(serde_json::to_value(&d).unwrap(), block);
        assert_eq!(
            serde_json::to_value(GateDecision::allow()).unwrap(),
            json!({"block": false})
        );
    }

    #[test]
    fn received_bodies_are_checked_and_unknown_types_kept() {
        assert!(matches!(
            ReceivedEvent::parse(b"{nope"),
            Err(EventError::NotJson(_))
        ));
        assert!(matches!(
            ReceivedEvent::parse(b"[1]"),
            Err(EventError::NotAnObject)
        ));
        assert!(matches!(
            ReceivedEvent::parse(b"{}"),
            Err(EventError::MissingType)
        ));
        let other = ReceivedEvent::parse(br#"{"type": "custom.thing", "x": 1}"#).unwrap();
        assert!(other.event.is_none());
        assert_eq!(other.raw["x"], 1);
        // A known type with a field of the wrong type is refused, naming it.
        let e = ReceivedEvent::parse(br#"{"type": "tool.pre_execute", "timestamp": "soon"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tool.pre_execute"), "{e}");
        // Missing fields default, extra ones are kept in `raw`.
        let r =
            ReceivedEvent::parse(br#"{"type": "tool.pre_execute", "tool": "t", "extra": true}"#)
                .unwrap();
        let Some(Event::PreExecute {
            call: Call { tool, .. },
            args,
            session_stats,
            ..
        }) = r.event
        else {
            panic!("not a pre_execute")
        };
        assert_eq!(tool, "t");
        assert_eq!(args, json!({}));
        assert_eq!(session_stats.tool_call_count, 0);
        assert_eq!(r.raw["extra"], true);
    }
}
