//! Thin rmcp adapter: the tool list, call dispatch, mapping core results to MCP results.
