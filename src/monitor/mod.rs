//! The agent-monitor protocol: the client gate every tool call passes (fail-closed) and the
//! reference monitor server (`apigate monitor`).
