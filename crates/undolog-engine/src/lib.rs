//! The effect engine: every tool call passes through [`Engine::intercept`], which records it as an
//! effect and answers execute, replay, awaiting approval, or rejected. The caller runs the tool and
//! reports with [`Engine::commit`] or [`Engine::fail`]. Approvals, in-doubt effects, sessions,
//! snapshots and undo (a saga of compensations, run by the engine through a [`Compensator`] or
//! step by step by the caller) complete the API.
//!
//! Decisions are made by the sans-IO [`core`]; [`Engine`] is the executor that carries them out
//! over a [`undolog_store::Store`], one transaction per operation.
//!
//! Invariant: the engine never speaks HTTP or MCP, and never writes SQL.

mod approvals;
mod call;
mod clock;
mod config;
pub mod core;
pub mod crash_points;
mod effect_outcomes;
mod engine;
mod error;
mod events;
mod outcome;
mod saga;
mod undo_steps;

pub use call::{Call, ToolPolicy};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::EngineConfig;
pub use core::{CompensationFailure, Decider, ReadOutcome, Resolution};
pub use engine::executor::{Health, renewing};
pub use engine::readers::Reader;
pub use engine::sessions::{RunCache, SNAPSHOT_FORMAT};
pub use engine::{BatchObserver, Engine, validate};
pub use error::Error;
pub use events::{Event, hold_reason};
pub use outcome::{Intercept, Rejection};
pub use saga::{
    Compensated, Compensator, StepOutcome, UndoReport, UndoRun, UndoStep, UndoSteps, run_undo,
};
pub use undo_steps::{PlannedStep, UndoPlanned, UndoProgress};
