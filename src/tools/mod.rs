//! The three tools as plain async functions over core types, and the call pipeline
//! (auth → permissions → rate limit → validation → monitor → tool → audit).
