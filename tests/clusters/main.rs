//! Clusters: Kubernetes (through the API double, checked with the real kubectl) and a real Slurm.

#[path = "../support/mod.rs"]
mod support;

mod kube;
mod kube_auto;
mod kube_jobs;
mod kube_pods;
mod slurm;
mod slurm_compare;
