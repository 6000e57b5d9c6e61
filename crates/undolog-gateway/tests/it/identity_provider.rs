//! The npm `oidc-provider` as a real identity provider for the tests (tests/fixtures/
//! oidc_provider.mjs): its people are alice (agent scope), carol (agent and approver) and dave
//! (no scope), all of org acme. Signing in is a form with a user name.

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::harness::{fixture, fixtures, spawn};

pub(crate) struct IdentityProvider {
    pub(crate) issuer: String,
    _child: Child,
    /// Kept open: a provider that writes to a closed pipe dies of EPIPE.
    _stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl IdentityProvider {
    /// Starts a provider whose tokens are for `resource`, and that knows the dashboard as the
    /// public client `undolog-dashboard` at `dashboard_redirect`; `flags` are more of the
    /// fixture's (`--opaque`: opaque access tokens, checked by introspection as the client
    /// `undolog-gateway`).
    pub(crate) async fn start(
        resource: &str,
        dashboard_redirect: &str,
        flags: &[&str],
    ) -> IdentityProvider {
        // ESM resolves packages next to the script: a copy of it runs beside the fixture's
        // node_modules (one per provider, so parallel tests never write the same file).
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let script = fixtures().join(format!("oidc/provider-{}-{n}.mjs", std::process::id()));
        std::fs::copy(fixture("oidc_provider.mjs"), &script).unwrap();
        let mut child = spawn(
            Command::new("node")
                .arg(&script)
                .args(["--resource", resource])
                .args(["--dashboard-redirect", dashboard_redirect])
                .args(flags),
        );
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("the identity provider started within 30 s")
            .unwrap()
            .expect("the identity provider printed its issuer");
        let _ = std::fs::remove_file(&script);
        let ready: serde_json::Value = serde_json::from_str(&first).unwrap();
        IdentityProvider {
            issuer: ready["issuer"].as_str().unwrap().to_owned(),
            _child: child,
            _stdout: lines,
        }
    }
}
