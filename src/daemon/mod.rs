//! The daemon: the single owner of gantry's state. The engine owns jobs and the journal every
//! mutation goes through before it is acknowledged; the state adds the simulated backend, the
//! event log and snapshots; the actor serializes every request onto one thread; the API serves
//! it over a Unix socket (and TCP with tokens).

pub mod actor;
pub mod api;
pub mod auth;
pub mod calendar;
pub mod embedded;
pub mod engine;
pub mod eta;
pub mod experiments;
pub mod journal;
pub mod lives;
pub mod local_gpus;
pub mod lock;
mod probation;
pub mod refusal;
pub mod server;
pub mod serving;
pub mod state;
pub mod tls;
