//! Integration tests of the shared vocabulary: the vectors file, properties, state machines.

mod properties;
mod states;
mod vectors;
