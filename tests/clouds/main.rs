//! Clouds: EC2 and S3 on moto, Lambda Cloud through its API double, file mounts from buckets.

#[path = "../support/mod.rs"]
mod support;

mod cloud;
mod file_mounts;
mod lambda_cloud;
