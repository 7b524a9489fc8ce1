//! Backends: where GPUs come from and where jobs run. Built so far: the local host (real child
//! processes; GPUs through NVML when a driver is present).

pub mod local;
