#!/usr/bin/env bash
# GPU check for the local backend, for a machine with NVIDIA GPUs (CI has none; it is skipped
# there). Prints what gantry sees next to what nvidia-smi sees, and gantry's telemetry timing.
# Usage: scripts/gpu-check.sh   (from the repository root; builds gantry in release mode)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no nvidia-smi on this host: skipped"
  exit 0
fi
cargo build --release --quiet
bin=target/release/gantry

echo "== nvidia-smi"
nvidia-smi --query-gpu=index,uuid,name,memory.total,utilization.gpu,temperature.gpu,power.draw,mig.mode.current --format=csv
echo "== gantry gpus"
"$bin" gpus
echo "== discovery matches nvidia-smi (index, uuid, memory)"
smi=$(nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader,nounits | tr -d ' ' | sort)
ours=$("$bin" gpus --output json | python3 -c '
import json, sys
d = json.load(sys.stdin)
for g in d.get("gpus", []):
    print(f"{g[\"index\"]},{g[\"uuid\"]},{g[\"memory_total_mib\"]}")
' | sort)
if [ "$smi" = "$ours" ]; then echo "match: $(echo "$ours" | wc -l) GPU(s)"; else echo "MISMATCH"; diff <(echo "$smi") <(echo "$ours") || true; exit 1; fi
echo "== gantry bench local"
"$bin" bench local
