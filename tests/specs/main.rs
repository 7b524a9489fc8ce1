//! Job specs as users write them: gantry's own, SkyPilot task files (judged by SkyPilot's own loader
//! where it is installed), dstack and sbatch files.

#[path = "../support/mod.rs"]
mod support;

mod dstack;
mod skypilot_loader;
mod skypilot_oracle;
mod skypilot_schema;
mod spec;
