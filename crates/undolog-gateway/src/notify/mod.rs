//! Telling people of held calls where they are: webhooks, Slack, email.
pub(crate) mod links;
pub(crate) mod message;
