#!/usr/bin/env python3
"""A lower bound on the average queueing delay that ANY scheduler can reach on the Philly replay.

`gantry replay philly` replays each VC as its own cluster of 8-GPU nodes. This script computes,
for the same jobs and VC sizes, a bound that no policy can beat — clairvoyant or not, preemptive
with free checkpoints, ignoring node boundaries — so that a target on the average queueing delay
can be checked for feasibility before anyone tunes a policy against it.

The relaxation, per VC of C GPUs (every real schedule is feasible in it):
  * time is cut into slots of DT seconds; job j (g_j GPUs for p_j seconds, submitted at r_j) may
    use any slot from the one holding r_j on, at most g_j*DT GPU-seconds per slot, g_j*p_j in all;
  * the slots hold at most C*DT GPU-seconds;
  * its completion C_j is at least r_j + p_j, and at least its mean busy time plus p_j/2 (its
    work runs at a rate of at most g_j, so the work ends no earlier than that); a slot's work is
    counted at the slot's start, which can only lower the mean busy time.
Minimising the sum of C_j is a linear programme (HiGHS, through scipy). Only the congested
windows need it: the timeline is cut where demand (every job running from its submission)
exceeds the VC, windows are those periods widened by WINDOW hours before, and every job outside
them is counted with zero queueing. Restricting a schedule to the jobs of one window gives a
schedule of that window alone, so the windows' bounds add up.

Queueing delay = completion - submission - duration, as gantry's replay counts it, averaged over
the same jobs (those of the 11 VCs, inside the date window, no larger than their VC).

Usage: scripts/philly-queue-bound.py [--trace F] [--vcs F] [--from D] [--to D] [--slot 900]
                                     [--window 48] [--vc-scale 1]
Needs python3 with numpy and scipy (pip install scipy). Takes a few minutes on two cores.
"""
import argparse
import calendar
import csv
import math
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix


def parse_time(text):
    text = text.strip()
    fmt = "%Y-%m-%d %H:%M:%S" if " " in text else "%Y-%m-%d"
    return calendar.timegm(time.strptime(text, fmt))


def congested_windows(jobs, gpus, before):
    """Half-open [lo, hi) arrival windows around the periods where the jobs, each started at its
    submission, would need more than `gpus` GPUs."""
    edges = sorted([(r, g) for r, p, g in jobs] + [(r + p, -g) for r, p, g in jobs])
    periods, demand, start = [], 0, None
    for t, d in edges:
        demand += d
        if demand > gpus and start is None:
            start = t
        elif demand <= gpus and start is not None:
            periods.append((start, t))
            start = None
    windows = []
    for a, b in periods:
        lo = a - before
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], b))
        else:
            windows.append((lo, b))
    return windows


def completion_bound(jobs, gpus, slot):
    """The LP bound on the sum of completion times of `jobs` [(r, p, g)] alone on `gpus` GPUs."""
    n = len(jobs)
    work = [g * p for r, p, g in jobs]
    # Some optimal solution ends by this horizon: work can always move to an earlier slot unless
    # that slot is full or the job is at its rate there, so after the last submission a job's
    # work ends within (all work)/C + its own duration.
    horizon = max(r for r, p, g in jobs) + sum(work) / gpus + max(p for r, p, g in jobs) + 2 * slot
    slots = int(math.ceil(horizon / slot))
    size = sum(slots - int(r // slot) for r, p, g in jobs)
    if size > 20_000_000:
        raise SystemExit(f"a congested window of {n} jobs needs {size:,} variables, more than "
                         "this machine should hold: pass a longer --slot (e.g. 3600)")
    cells = [(j, s) for j, (r, p, g) in enumerate(jobs) for s in range(int(r // slot), slots)]
    nx = len(cells)
    jj = np.fromiter((j for j, s in cells), dtype=np.int64, count=nx)
    ss = np.fromiter((s for j, s in cells), dtype=np.int64, count=nx)
    cols = np.arange(nx)
    w = np.array(work)
    # sum_s x_js = g_j p_j
    a_eq = coo_matrix((np.ones(nx), (jj, cols)), shape=(n, nx + n)).tocsr()
    # slot capacity; then mean busy time + p/2 - y_j <= 0
    rows = np.concatenate([ss, slots + jj, slots + np.arange(n)])
    cs = np.concatenate([cols, cols, nx + np.arange(n)])
    vals = np.concatenate([np.ones(nx), ss * slot / w[jj], -np.ones(n)])
    a_ub = coo_matrix((vals, (rows, cs)), shape=(slots + n, nx + n)).tocsr()
    b_ub = np.concatenate([np.full(slots, gpus * slot), [-p / 2 for r, p, g in jobs]])
    cap = np.array([jobs[j][2] * slot for j, s in cells])
    bounds = [(0, c) for c in cap] + [(r + p, None) for r, p, g in jobs]
    cost = np.concatenate([np.zeros(nx), np.ones(n)])
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.array(work, dtype=float),
                  bounds=bounds, method="highs")
    if res.status != 0:
        raise SystemExit(f"linear programme failed: {res.message}")
    return res.fun


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="../shared/traces/philly/philly.csv")
    ap.add_argument("--vcs", default="../shared/traces/philly/philly_vc.csv")
    ap.add_argument("--from", dest="since", default="2017-10-01")
    ap.add_argument("--to", dest="until", default="2017-11-30")
    ap.add_argument("--slot", type=float, default=900.0, help="slot length, seconds")
    ap.add_argument("--window", type=float, default=48.0, help="hours before a congestion")
    ap.add_argument("--vc-scale", type=float, default=1.0)
    args = ap.parse_args()
    since, until = parse_time(args.since), parse_time(args.until)
    with open(args.vcs, newline="") as f:
        vcs = [(r["vc"], max(1, round(int(r["node num"]) * args.vc_scale)))
               for r in csv.DictReader(f)]
    per_vc = {vc: [] for vc, _ in vcs}
    with open(args.trace, newline="") as f:
        for r in csv.DictReader(f):
            t = parse_time(r["timestamp"])
            if since <= t < until and r["cluster"] in per_vc:
                per_vc[r["cluster"]].append((t, float(r["duration"]), max(1, int(r["num_gpus"]))))
    total_wait, total_jobs = 0.0, 0
    print(f"{'vc':8} {'nodes':>5} {'jobs':>6} {'windows':>7} {'queue bound s':>14}")
    for vc, nodes in vcs:
        gpus = nodes * 8
        jobs = sorted(j for j in per_vc[vc] if j[2] <= gpus)
        total_jobs += len(jobs)
        wait = 0.0
        windows = congested_windows(jobs, gpus, args.window * 3600)
        for lo, hi in windows:
            seg = [j for j in jobs if lo <= j[0] < hi and j[1] > 0]
            if not seg:
                continue
            base = seg[0][0]
            seg = [(r - base, p, g) for r, p, g in seg]
            bound = completion_bound(seg, gpus, args.slot)
            wait += max(0.0, bound - sum(r + p for r, p, g in seg))
        total_wait += wait
        avg = wait / len(jobs) if jobs else 0.0
        print(f"{vc:8} {nodes:5} {len(jobs):6} {len(windows):7} {avg:14.1f}", flush=True)
    print(f"all {total_jobs} jobs: no policy's average queueing delay is below "
          f"{total_wait / max(total_jobs, 1):.1f} s")


if __name__ == "__main__":
    main()
