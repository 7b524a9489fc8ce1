//! The daemon: the single owner of gantry's state. Built so far: the durable journal every
//! mutation goes through before it is acknowledged, and the job state machine.

pub mod job;
pub mod journal;
