//! Public GPU-cluster traces and the protocols that replay them through the scheduler core.

pub mod csv;
pub mod openb;
pub mod parallel;
pub mod philly;
