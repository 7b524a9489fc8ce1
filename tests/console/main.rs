//! The console: its screens as snapshots, its tables, and the real binary driven in tmux.

#[path = "../support/mod.rs"]
mod support;

mod console;
mod console_tables;
mod snapshots;
