#!/usr/bin/env bash
# The layers docs/architecture.md draws, checked: the core crate links no runtime, terminal,
# database, HTTP or cluster client, and no arrow inside the product crate runs upward. Prints
# each offending line and fails; prints nothing and succeeds when the layers hold.
set -uo pipefail
cd "$(dirname "$0")/.."
bad=0
check() {
  local what=$1 out=$2
  if [ -n "$out" ]; then
    echo "layers: $what:"
    echo "$out"
    bad=1
  fi
}
check "gantry-core depends on an IO crate" \
  "$(cargo tree -p gantry-core -e normal --prefix none | grep -E '^(tokio|ratatui|crossterm|rusqlite|reqwest|kube|axum|hyper)( |$)')"
# std reaches files, sockets, processes and the clock without a crate: the core's own code
# (its test modules, which end its files, aside) must not.
check "the core's code does IO or reads a clock" \
  "$(find core/src -name '*.rs' ! -name 'tests.rs' -exec awk '/^#\[cfg\(test\)\]/ { exit } /std::(fs|net|process|thread)|SystemTime|Instant::now|std::env::var/ { print FILENAME ":" FNR ": " $0 }' {} \;)"
check "daemon, backends, config or sim use the client or the console" \
  "$(grep -rnE 'crate::(client|console)' src/daemon src/backend src/config src/sim)"
check "config uses a backend" "$(grep -rn 'crate::backend' src/config)"
check "console or client reach into the daemon or a backend" \
  "$(grep -rnE 'crate::(daemon|backend)' src/console src/client)"
check "daemon, client or trace use the simulator or the benchmarks" \
  "$(grep -rnE 'crate::(sim|bench)::' src/daemon src/client src/trace)"
check "backends or config use the daemon, the simulator or the benchmarks" \
  "$(grep -rnE 'crate::(daemon|sim|bench)\b' src/backend src/config)"
check "the console reaches past the client's vocabulary" \
  "$(grep -rnE 'crate::(daemon|backend|config|sim|bench|client)\b' src/console)"
check "a part outside backend/ (and the fleet file's config/) asks which backend a pool is" \
  "$(grep -rnE '\.is_(ssh|kube|slurm|local|ec2|lambda|simulated)\(\)|buys_machines\(\)|lists_cluster_nodes\(\)|Backend::(Ssh|Local|Slurm|Kubernetes|Ec2|Lambda|Simulated)\b' src/daemon src/cli src/console src/client src/sim src/bench src/trace)"
check "a backend imports the registry's list (each declares its Registration; the list is above them)" \
  "$(grep -rn 'backend::registry' src/backend --include='*.rs' | grep -vE '^src/backend/(registry|mod)\.rs:')"
check "the daemon's HTTP API has a handler outside daemon/api/" \
  "$(grep -rnE 'axum::(extract|routing|response)' src/daemon | grep -vE '^src/daemon/(api|serving)/')"
# One wire vocabulary: the daemon answers with core::api types, which the CLI, the console and
# the client read typed.
check "the daemon's API answers with a type of its own (put it in core/src/api)" \
  "$(grep -rnE 'derive\([^)]*\bSerialize\b' src/daemon/api)"
check "the CLI, console or client look up a field of untyped JSON (read it as its core::api type)" \
  "$(grep -rnE '[A-Za-z_)]\["[a-z_]+"\]' src/cli src/console src/client)"
check "a part reaches the journal past the engine (name the operation in daemon/engine/records.rs)" \
  "$(grep -rnE '\.store\(\)' src tests --include='*.rs' | grep -v '^src/daemon/engine/')"
check "the state, actor, engine or journal answer with an HTTP error (a daemon::refusal::Refusal; statuses are daemon/api's)" \
  "$(grep -rn 'ApiError' src/daemon/state src/daemon/actor src/daemon/engine src/daemon/journal)"
# The daemon's state is components with private fields, each with a small API (runs, nodes,
# telemetry, billing, the event log, reclaim, services, retiring pools); `State` holds them
# and orders their work in a few files: what it was opened with (open.rs), what clients read
# (view.rs), and the rest (mod.rs).
state_files=$(grep -rlE '^impl State \{' src/daemon/state | sort)
check "more than 3 files implement State (give the work to the component it concerns)" \
  "$([ "$(echo "$state_files" | grep -c .)" -le 3 ] || echo "$state_files")"
check "a file of the state takes in its parent whole (use super::*)" \
  "$(grep -rn '^use super::\*' src/daemon/state)"
check "a component of the state has a public field (reach it through its API)" \
  "$(awk '/^(pub(\([a-z:]+\))? )?struct (Runs|Nodes|Telemetry|Billing|EventLog|Reclaim|Services|Retirees|Restarts) \{/ { inside = 1; next } inside && /^\}/ { inside = 0 } inside && /^    pub/ { print FILENAME ":" FNR ": " $0 }' $(find src/daemon/state -name '*.rs'))"
# Each integration test binary links the whole product (kube, the AWS SDK): a few, by what
# their tests need (tests/*/main.rs), with helpers in tests/support/.
bins=$(ls tests/*.rs tests/*/main.rs 2>/dev/null | wc -l)
check "more than 8 integration test binaries" "$([ "$bins" -le 8 ] || ls tests/*.rs tests/*/main.rs)"
check "a test mounts a helper by #[path] (only a binary's main.rs mounts tests/support)" \
  "$(grep -rn '#\[path' tests --include='*.rs' | grep -v '/main.rs:')"
check "the product crate ships the test doubles" "$(grep -rn 'testkit' src/lib.rs)"
exit $bad
