//! Test doubles for what cannot run on the machines gantry is built on, shared by the tests
//! and the benchmarks: a Kubernetes API server (no kube-apiserver can be installed here) and
//! Lambda Cloud's API (no account here; also the docs' dry run, `--bin lambda-double`).
//! Each keeps the semantics gantry relies on and is checked against a real client. And the
//! tests' scratch directories, which a later run sweeps (`scratch`).

pub mod apiserver;
pub mod lambda;
pub mod scratch;
