#!/usr/bin/env bash
# Captures every console view of the embedded demo into screenshots/*.txt (tmux, 100×30).
# Usage: scripts/screenshots.sh [path/to/gantry]   (default: target/release/gantry)
set -euo pipefail
bin=${1:-target/release/gantry}
out=screenshots
session=gantry-shots-$$
tmux new-session -d -s "$session" -x 100 -y 30 "$bin"
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
sleep 4
shot() { tmux send-keys -t "$session" "$1"; sleep 1; tmux capture-pane -p -t "$session" > "$out/$2.txt"; }
shot 1 overview
shot 2 jobs
shot 3 fleet
shot 4 teams
shot 5 events
tmux send-keys -t "$session" 2; sleep 0.5
shot p confirm-preempt
tmux send-keys -t "$session" Escape
echo "wrote $out/{overview,jobs,fleet,teams,events,confirm-preempt}.txt"
