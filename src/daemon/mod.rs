//! The daemon: the single owner of gantry's state. Built so far: the engine that owns it, the durable journal every
//! mutation goes through before it is acknowledged, and the job state machine.

pub mod engine;
pub mod job;
pub mod journal;
