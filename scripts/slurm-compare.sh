#!/usr/bin/env bash
# The same job set through Slurm alone and through gantry's Slurm pool, on one real Slurm
# 22.05 cluster started here (root, Debian's slurm-wlm, slurmrestd and munge), one after the
# other, in paired rounds: makespans, waits from each send, first starts, the ratios (min /
# median / max) and the daemon's memory after each round (issues 39, 68). A release build.
#   JOBS=1000 JOB_SECONDS=1 NODES=4 GPUS=8 ROUNDS=3 scripts/slurm-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export JOBS="${JOBS:-1000}" JOB_SECONDS="${JOB_SECONDS:-1}" NODES="${NODES:-4}" GPUS="${GPUS:-8}" ROUNDS="${ROUNDS:-3}"
exec cargo test --release --test clusters slurm_alone_against_gantry_on_slurm -- --ignored --nocapture --test-threads 1
