//! `undolog signature`: the canonical form, signature and lock key of one call.

use anyhow::Context;
use undolog_types::{Args as CallArgs, CallIdentity, OrgId, SessionId};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The org the call belongs to.
    #[arg(long)]
    org: String,
    /// The agent session.
    #[arg(long)]
    session: String,
    /// The tool's name.
    #[arg(long)]
    tool: String,
    /// The arguments, as a JSON object.
    #[arg(long)]
    args: String,
    /// The caller's step index, when it supplies one.
    #[arg(long)]
    step: Option<u64>,
    /// Also print the canonical JSON and the lock key.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn run(a: &Args) -> anyhow::Result<()> {
    let org = OrgId::new(a.org.clone()).context("--org")?;
    let session = SessionId::new(a.session.clone()).context("--session")?;
    let args = CallArgs::parse(&a.args).context("--args")?;
    let identity = CallIdentity {
        org: &org,
        session: &session,
        tool: &a.tool,
        args: &args,
        step: a.step,
    };
    let signature = identity.signature();
    if a.verbose {
        println!("canonical: {}", identity.canonical());
        println!("signature: {signature}");
        println!("lock key:  {:016x}", signature.lock_key().0);
    } else {
        println!("{signature}");
    }
    Ok(())
}
