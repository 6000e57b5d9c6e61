//! The gateway with real parts: official Python MCP clients (2.x modern and legacy, 1.x), the
//! Python bank upstream over Streamable HTTP and stdio, the npm reference server-memory, and agent
//! frameworks' own clients (langchain-mcp-adapters, the OpenAI Agents SDK, the Inspector CLI).

mod bad_input;
mod clients;
mod config;
mod dashboard;
mod events;
mod faults;
mod forwarding;
mod frameworks;
mod harness;
mod interceptors;
mod postgres;
mod rest_and_sdk;
mod semantics;
mod undo_steps;
