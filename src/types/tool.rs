//! [`Tool`]: which of the three tools a call names, parsed once where a call arrives (the MCP
//! adapters) and used by the pipeline, the metrics, the monitor and the permission checks,
//! with the feature that grants it.

/// One of the three tools. Ordered as their names sort (the monitor's `uniqueTools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    Discover,
    Execute,
    Schema,
}

/// A tool name that is none of the three: the agent's text, kept for the error message and
/// the audit row's length (it is never logged or stored as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTool(pub String);

impl Tool {
    /// The three, in the order `tools/list` shows them.
    pub const ALL: [Tool; 3] = [Tool::Discover, Tool::Schema, Tool::Execute];

    /// `api_discover`, `api_schema`, `api_execute`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Discover => "api_discover",
            Tool::Schema => "api_schema",
            Tool::Execute => "api_execute",
        }
    }

    /// The feature a caller must hold to use the tool: `apigate.discover`, `apigate.schema`,
    /// `apigate.execute`.
    pub fn feature(self) -> &'static str {
        match self {
            Tool::Discover => "apigate.discover",
            Tool::Schema => "apigate.schema",
            Tool::Execute => "apigate.execute",
        }
    }

    /// The tool whose feature is `feature`.
    pub fn of_feature(feature: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.feature() == feature)
    }

    /// The tool `name` names (exactly: tool names are case-sensitive), or the name as unknown.
    pub fn parse(name: &str) -> Result<Tool, UnknownTool> {
        Tool::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| UnknownTool(name.to_string()))
    }
}

#[cfg(test)]
#[test]
fn names_round_trip_and_nothing_else_parses() {
    assert_eq!(Tool::ALL.map(|t| Tool::parse(t.name())), Tool::ALL.map(Ok));
    let mut sorted = Tool::ALL;
    sorted.sort();
    assert!(sorted.windows(2).all(|w| w[0].name() < w[1].name()));
    assert_eq!(
        Tool::ALL.map(|t| Tool::of_feature(t.feature())),
        Tool::ALL.map(Some)
    );
    for other in ["API_DISCOVER", "api_discover ", "", "unknown"] {
        assert_eq!(Tool::parse(other), Err(UnknownTool(other.into())));
    }
}
