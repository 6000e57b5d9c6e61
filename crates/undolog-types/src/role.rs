use crate::strings::string_enum;

string_enum!(
    /// What a credential may do. Each role may do all that the roles before it may.
    Role, "role" {
        /// Calls tools (MCP, REST, the SDK's effect API) and reads its own org. Every new key is
        /// an agent unless it is made otherwise.
        Agent => "agent",
        /// Also decides approvals, never for a call it made itself.
        Approver => "approver",
        /// Also undoes sessions, resolves in-doubt effects and manages keys.
        Admin => "admin",
    }
);

impl Role {
    /// Whether this role may do what `needed` may.
    pub fn includes(self, needed: Role) -> bool {
        self.rank() >= needed.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Role::Agent => 0,
            Role::Approver => 1,
            Role::Admin => 2,
        }
    }
}
