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
check "the product crate ships the test doubles" "$(grep -rn 'testkit' src/lib.rs)"
exit $bad
