use crate::strings::string_enum;

string_enum!(
    /// How dangerous a tool is, which decides whether it runs again, waits for a person, or can
    /// be undone.
    Tier, "tier" {
        /// Runs every time (fresh data), logged, never replayed, nothing to undo.
        ReadOnly => "read_only",
        /// Runs once per identical call; a repeat is replayed; undo runs its compensation.
        Compensable => "compensable",
        /// Runs once, only after a person approves; cannot be undone. The fail-closed default.
        Irreversible => "irreversible",
    }
);

impl Tier {
    /// Whether an identical call in the same session gets the stored result instead of running.
    pub fn replays(self) -> bool {
        !matches!(self, Tier::ReadOnly)
    }
}
