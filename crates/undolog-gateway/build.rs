//! Generates the engine's gRPC service and messages from `proto/undolog/engine/v1/engine.proto`,
//! compiled by protox (pure Rust), so a build needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let file = "undolog/engine/v1/engine.proto";
    println!("cargo:rerun-if-changed={root}/{file}");
    let descriptors = protox::compile([file], [root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
