//! The gateway with real parts: official Python MCP clients (2.x modern and legacy, 1.x), the
//! Python bank upstream over Streamable HTTP and stdio, the npm reference server-memory, the MCP
//! conformance suite against its own fixture upstream (directly and through the gateway), and
//! agent frameworks' own clients (langchain-mcp-adapters, the OpenAI Agents SDK, the Inspector CLI).

mod bad_input;
mod catalog_misses;
mod clients;
mod config;
mod conformance;
mod cross_site;
mod dashboard;
mod events;
mod faults;
mod fleet;
mod forwarding;
mod frameworks;
mod grpc;
mod grpc_calls;
mod grpc_for_gateways;
mod grpc_settling;
mod hardening;
mod harness;
mod http_guards;
mod identity_provider;
mod input_rounds;
mod interceptors;
mod isolation;
mod issuer;
mod laundering;
mod list_hints;
mod metrics;
mod notify;
mod oauth;
mod oauth_provider;
mod ownership;
mod postgres;
mod recovery;
mod rest_and_sdk;
mod roles;
mod runs;
mod secrets;
mod semantics;
mod session_owners;
mod stateless;
mod subscriptions;
mod tasks;
mod traces;
mod undo_once;
mod undo_steps;
mod upstream_tasks;
