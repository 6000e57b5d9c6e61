//! Crash points for the fault suite: places where a test may stop the process at once, as a
//! power cut or SIGKILL would, to check that nothing acknowledged is lost and nothing runs twice.
//!
//! Compiled only with the `failpoints` feature, which only tests enable; then a point does nothing
//! unless the `FAILPOINTS` environment variable names it (the `fail` crate's syntax, such as
//! `FAILPOINTS=call::before_commit=return`). Without the feature both functions are empty.

/// Reads `FAILPOINTS`; call once at process start.
pub fn from_env() {
    #[cfg(feature = "failpoints")]
    std::mem::forget(fail::FailScenario::setup());
}

/// Aborts the process here when the fault suite configured `name`.
pub fn crash_point(name: &str) {
    #[cfg(feature = "failpoints")]
    if fail::eval(name, |_| ()).is_some() {
        eprintln!("crash point {name}: aborting");
        std::process::abort();
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}
