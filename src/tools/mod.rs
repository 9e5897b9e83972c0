//! The three tools as plain async functions over core types. Adapters (MCP over HTTP, SSE,
//! stdio) call [`Engine::call`] and only change how results look. Split by job: what every
//! call shares (`engine.rs`), the pipeline that runs one (`pipeline.rs`), and its steps, each
//! handed the few settings it reads rather than the engine: typed arguments (`args.rs`), the
//! operation they name and who may see it (`resolve.rs`), validation and the tool bodies
//! (`ops.rs`), one page of an `api_execute` (`page.rs`, `paging/`, `credentials.rs`,
//! `binary_out.rs`, `upload.rs`), its result (`result.rs`, `select.rs`). This file only
//! declares them and says what the crate may name.

pub mod args;
pub mod binary_out;
mod credentials;
pub(crate) mod defs;
mod discover;
pub mod error;
mod lacking;
mod method_override;
mod ops;
pub mod output;
mod overview;
mod page;
pub mod paging;
mod resolve;
mod result;
mod schema;
pub mod select;
pub mod upload;

mod engine;
mod pass;
mod pipeline;

pub use crate::types::Code;
pub use crate::types::{Tool, UnknownTool};
pub use binary_out::BinaryOptions;
pub(crate) use binary_out::BinaryOut;
pub use discover::shown_by_default;
pub use engine::{Access, Caller, Engine};
pub use error::ToolError;
pub use lacking::Lacking;
pub use ops::Planned;
pub use output::Output;
pub use page::Budgets;
pub(crate) use pass::Named;
pub use pass::UNKNOWN_TOOL;
pub(crate) use pipeline::ToolResult;
