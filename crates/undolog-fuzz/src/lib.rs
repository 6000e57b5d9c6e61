//! Fuzz targets: one function per reader of outside bytes, each taking any `&[u8]` and asserting
//! what must hold whatever the bytes are — no panic, and where it means something a round trip
//! (canonical text parses back to itself, a message serialized reads back the same). A broken
//! invariant panics, which the fuzzer reports as a crash. The harness in `fuzz/` (libFuzzer
//! through `cargo fuzz`) calls these functions; the tests here replay the seed corpus in
//! `seeds/<target>/`, where a file named `ok-*` must be accepted and `err-*` refused.

mod body;
mod canonical;
mod config;
mod descriptor;
mod mcp;
mod wire;

pub use body::http_body;
pub use canonical::canonical;
pub use config::config;
pub use descriptor::descriptor;
pub use mcp::mcp_message;
pub use wire::interceptor_wire;

/// What a target made of its input; the fuzzer ignores it, the seed tests check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The reader took the input.
    Accepted,
    /// The reader refused the input with an error.
    Refused,
}

/// A fuzz target: any bytes in, a verdict out; a broken invariant panics.
pub type Target = fn(&[u8]) -> Verdict;

/// Every target by name, as the harness and the seed folders name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("http_body", http_body),
    ("mcp_message", mcp_message),
    ("canonical", canonical),
    ("config", config),
    ("descriptor", descriptor),
    ("interceptor_wire", interceptor_wire),
];

#[cfg(test)]
mod seeds;
