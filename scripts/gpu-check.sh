#!/usr/bin/env bash
# GPU check for the local backend, for a machine with NVIDIA GPUs (CI has none; it is skipped
# there). Prints what it saw at each step:
#   1. discovery: gantry's GPUs (index, UUID, memory) next to nvidia-smi's;
#   2. gantry bench local: one NVML sample of every GPU, and a local job placement → running;
#   3. a real CUDA job through the daemon (PyTorch matmul loop, if torch with CUDA is here):
#      its GPU's utilization and VRAM in gantry's telemetry while it computes; after it goes
#      idle (holding its memory), `gantry reclaim` flags it; `gantry preempt` delivers SIGTERM
#      and its checkpoint file appears.
#   4. /metrics while the job runs: the DCGM-named per-GPU series and gantry_job_gpu_info carry
#      the GPU's real UUID, so PromQL joins them with the DCGM exporter's.
# Usage: scripts/gpu-check.sh   (from anywhere; builds gantry in release mode, or runs the
#        binary GANTRY_BIN names, for a GPU machine without a Rust toolchain)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no nvidia-smi on this host: skipped"
  exit 0
fi
if [ -n "${GANTRY_BIN:-}" ]; then
  bin=$GANTRY_BIN
else
  cargo build --release --quiet
  bin=$PWD/target/release/gantry
fi
"$bin" --version
fail=0

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
    print(g["index"], g["uuid"], g["memory_total_mib"], sep=",")
' | sort)
if [ "$smi" = "$ours" ]; then
  echo "match: $(echo "$ours" | wc -l) GPU(s)"
else
  echo "MISMATCH"; diff <(echo "$smi") <(echo "$ours") || true; fail=1
fi

echo "== gantry bench local"
"$bin" bench local

echo "== a CUDA job through the daemon"
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "no PyTorch with CUDA here (pip install torch): the CUDA job check is skipped"
  exit $fail
fi
work=$(mktemp -d)
# This host alone, reclaim after 1 idle minute (the default is 15) so the check is short.
"$bin" fleet --print-local | sed 's/^idle_window = "15m"/idle_window = "1m"/' > "$work/fleet.toml"
export GANTRY_CONNECT=$work/sock
"$bin" daemon --metrics-listen 127.0.0.1:9477 --config "$work/fleet.toml" --db "$work/state.db" --socket "$work/sock" \
  > "$work/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$work/sock" ] && break; sleep 0.1; done
head -3 "$work/daemon.log"
"$bin" fleet
model=$("$bin" fleet --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["model"])')

cat > "$work/matmul.py" <<'EOF'
# Computes for BUSY_S seconds, then holds its GPU memory and idles; on SIGTERM it writes a
# checkpoint and exits 0.
import os, signal, sys, time
import torch
ck = os.environ["GANTRY_CHECKPOINT_DIR"]
os.makedirs(ck, exist_ok=True)
step = 0
def checkpoint(*_):
    with open(os.path.join(ck, "step.txt"), "w") as f:
        f.write(f"{step}\n")
    print(f"checkpointed at step {step}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint)
print("visible:", os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.get_device_name(0), flush=True)
a = torch.randn(8192, 8192, device="cuda")
end = time.time() + float(os.environ.get("BUSY_S", "60"))
while time.time() < end:
    b = a @ a
    torch.cuda.synchronize()
    step += 1
print(f"busy phase done after {step} steps; idling", flush=True)
while True:
    time.sleep(1)
EOF
cat > "$work/job.yaml" <<EOF
name: matmul
resources:
  cpus: 2
  memory: 8
  accelerators: $model:1
envs:
  BUSY_S: "60"
checkpoint:
  dir: $work/ckpt
  grace: 30s
run: python3 $work/matmul.py
EOF
id=$("$bin" submit "$work/job.yaml" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
t0=$SECONDS
echo "submitted job $id"
for _ in $(seq 100); do
  "$bin" jobs --output json | grep -q '"state": "running"' && break; sleep 0.2
done
sleep 15
echo "-- while it computes (gantry fleet --pool host):"
"$bin" fleet --pool host
"$bin" fleet --pool host --output json | python3 -c '
import json, sys
d = json.load(sys.stdin)
gpus = [g for n in d["nodes"] for g in n["gpus"] if g["jobs"]]
for g in gpus:
    print("job GPU %d: utilization %.0f%%, VRAM used %d MiB, %.0f W"
          % (g["index"], g["util_pct"], g["vram_used_mib"], g["power_w"] or 0))
ok = gpus and all(g["util_pct"] > 50 and g["vram_used_mib"] > 0 for g in gpus)
print("utilization > 50% and VRAM seen:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
' || fail=1
echo "-- /metrics (the DCGM exporter's label names; the job's GPU by its real UUID):"
python3 - "$id" <<'PY' || fail=1
import sys, subprocess, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=10).read().decode()
uuids = set(subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout.split())
info = [l for l in text.splitlines() if l.startswith("gantry_job_gpu_info{")]
util = [l for l in text.splitlines() if l.startswith("DCGM_FI_DEV_GPU_UTIL{") or l.startswith("gantry_gpu_utilization")]
for l in info + util[:4]:
    print("  " + l)
job = f'job="{sys.argv[1]}"'
ok = any(job in l and any(u in l for u in uuids) for l in info)
print("gantry_job_gpu_info names the job's GPU by nvidia-smi's UUID:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
PY
echo "-- after its busy minute and one idle minute (gantry reclaim):"
# The job computes for 60 s after CUDA starts, then idles; the window is 1 minute of samples
# all under the threshold, so the flag comes some 2 to 2.5 minutes after the start.
flagged=NO
for i in $(seq 60); do
  if "$bin" reclaim --output json | python3 -c "
import json, sys
sys.exit(0 if any(i['job'] == $id for i in json.load(sys.stdin)['items']) else 1)"; then
    flagged=yes; break
  fi
  sleep 5
done
"$bin" fleet --pool host
"$bin" reclaim
echo "reclaim flags the idle job: $flagged ($((SECONDS - t0)) s after it was submitted)"
[ $flagged = yes ] || fail=1
echo "-- preempt (SIGTERM, grace 30 s, requeue):"
"$bin" preempt "$id"
for _ in $(seq 150); do [ -f "$work/ckpt/step.txt" ] && break; sleep 0.2; done
if [ -f "$work/ckpt/step.txt" ]; then
  echo "checkpoint file appeared: step $(cat "$work/ckpt/step.txt")"
else
  echo "NO checkpoint file"; fail=1
fi
sleep 2
"$bin" job "$id" | tail -8
"$bin" cancel "$id" >/dev/null 2>&1 || true
echo "== gpu-check: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
