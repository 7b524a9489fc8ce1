//! The daemon: the single owner of gantry's state. The engine owns jobs and the journal every
//! mutation goes through before it is acknowledged; the state adds the simulated backend, the
//! event log and snapshots; the actor serializes every request onto one thread; the API serves
//! it over a Unix socket (and TCP with tokens).

pub mod actor;
pub mod api;
pub mod audit;
pub mod auth;
pub mod calendar;
pub mod embedded;
pub mod engine;
mod exec;
mod heap;
pub mod host;
pub mod job;
pub mod journal;
pub mod lives;
pub mod lock;
pub mod logs;
pub mod metrics;
mod probation;
mod replay;
pub mod server;
pub mod serving;
pub mod state;
mod stream;
pub mod tls;
mod uploads;
