#!/usr/bin/env python3
"""Where a GPU's turn goes in a `scripts/slurm-compare.sh` run, from slurmctld's log and the
jobs' own stamps (issue 39; docs/measured.md, "Slurm side by side").

Run the compare with slurmctld's submit/allocate/complete lines in its log, then point this at
the two directories it printed and made:

  SLURM_CONF_EXTRA='SlurmctldDebug=debug' scripts/slurm-compare.sh
  scripts/slurm-turns.py /tmp/gantry-test-PID-hard-slurm-compare /tmp/gantry-test-PID-hard-compare-stamps

(The next test run sweeps those directories away: read them first.)

Slurm alone's jobs are Slurm ids 1..JOBS, gantry's parts the ones after. Each line: p10, p50,
p90 and the mean, in seconds. The pairings of completions with the next submission or
allocation are by order in time (the k-th completion with the (k+GPUS)-th event), so those
two lines are approximate; the others pair each job's own records.
"""
import bisect
import datetime
import re
import sys


def quantiles(d):
    d = sorted(d)
    n = len(d)
    if n == 0:
        return "no data"
    return "p10 %.3f p50 %.3f p90 %.3f mean %.3f" % (
        d[n // 10], d[n // 2], d[9 * n // 10], sum(d) / n)


def ctld(path):
    sub, alloc, comp, node = {}, {}, {}, {}
    for line in open(path, errors="replace"):
        m = re.match(r"\[(\S+)\] (.*)", line)
        if not m:
            continue
        j = re.search(r"JobId=(\d+)", m.group(2))
        if not j:
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        what, j = m.group(2), int(j.group(1))
        if what.startswith("_slurm_rpc_submit_batch_job"):
            sub[j] = t
        elif what.startswith("sched: Allocate"):
            alloc[j] = t
            node[j] = re.search(r"NodeList=(\S+)", what).group(1)
        elif "_start_job: Started JobId=" in what:
            # Started by the backfill scheduler's pass instead of the main one.
            alloc[j] = t
            node[j] = re.search(r" on (\S+)$", what).group(1)
        elif what.startswith("_job_complete") and what.endswith("done"):
            comp[j] = t
    return sub, alloc, comp, node


def stamps(path):
    """(time, node) per line; a line names the job's node and GPU as NODE/GPU."""
    return [(t, g.split("/")[0]) for t, g in stamped(path)]


def stamped(path):
    out = []
    for line in open(path):
        t, gpu = line.split()
        out.append((float(t), gpu))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cluster, stamp_dir = sys.argv[1], sys.argv[2]
    sub, alloc, comp, node = ctld(cluster + "/ctld.log")
    jobs = len(stamps(stamp_dir + "/slurm.ends"))
    gpus = len({g for _, g in stamped(stamp_dir + "/slurm.starts")}) or 1
    halves = [("slurm", range(1, jobs + 1)), ("gantry", range(jobs + 1, 10 * jobs))]
    for tag, ids in halves:
        ids = [j for j in ids if j in alloc]
        allocs, comps = {}, {}
        for j in ids:
            allocs.setdefault(node[j], []).append(alloc[j])
            if j in comp:
                comps.setdefault(node[j], []).append(comp[j])
        for v in list(allocs.values()) + list(comps.values()):
            v.sort()
        first, last = [], []
        for t, n in stamps(f"{stamp_dir}/{tag}.starts"):
            i = bisect.bisect_right(allocs.get(n, []), t) - 1
            if i >= 0:
                first.append(t - allocs[n][i])
        for t, n in stamps(f"{stamp_dir}/{tag}.ends"):
            v = comps.get(n, [])
            i = bisect.bisect_left(v, t)
            if i < len(v):
                last.append(v[i] - t)
        print(f"{tag:6} allocated -> its first line      {quantiles(first)}")
        print(f"{tag:6} its last line -> _job_complete   {quantiles(last)}")
        c = sorted(comp[j] for j in ids if j in comp)
        a = sorted(alloc[j] for j in ids)
        print(f"{tag:6} a completion -> next allocation  {quantiles([x - y for y, x in zip(c, a[gpus:])])}")
        if tag == "gantry":
            s = sorted(sub[j] for j in ids if j in sub)
            print(f"{tag:6} a completion -> next submission  {quantiles([x - y for y, x in zip(c, s[gpus:])])}")
            print(f"{tag:6} submitted -> allocated           {quantiles([alloc[j] - sub[j] for j in ids if j in sub])}")


if __name__ == "__main__":
    main()
