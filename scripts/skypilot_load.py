"""What SkyPilot's own loader makes of each task file under a directory, offline.

    python scripts/skypilot_load.py tests/skypilot/corpus tests/skypilot/verdicts.json

Run with a Python that has `skypilot==0.14.1` (no cloud credentials or network needed). For
every file SkyPilot loads (`sky.utils.dag_utils.load_chain_dag_from_yaml`): each task's
`num_nodes` and each of its resources' accelerators, spot, cloud, region and instance type.
Files SkyPilot refuses are left out. Written to the second argument (SkyPilot prints progress
lines of its own on stdout). `tests/skypilot_loader.rs` compares gantry with this.
"""
import json, logging, os, sys

os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
logging.disable(logging.CRITICAL)
from sky.utils import dag_utils  # noqa: E402


def load(path):
    dag = dag_utils.load_chain_dag_from_yaml(path)
    tasks = []
    for t in dag.tasks:
        res = t.resources
        alts = []
        for r in res:
            alts.append({
                "accelerators": {k: float(v) for k, v in (r.accelerators or {}).items()},
                "use_spot": bool(r.use_spot),
                "cloud": str(r.cloud).lower() if r.cloud is not None else None,
                "region": r.region,
                "instance_type": r.instance_type,
            })
        if not isinstance(res, list):
            # `any_of` is a set: iterated in hash order, which changes from run to run
            # (PYTHONHASHSEED). Written in one order, that of their JSON.
            alts.sort(key=lambda a: json.dumps(a, sort_keys=True))
        tasks.append({"num_nodes": t.num_nodes, "alternatives": alts})
    return tasks


root = sys.argv[1]
out = {}
for d, _, files in os.walk(root):
    for f in files:
        if not f.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(d, f)
        try:
            out[os.path.relpath(path, root)] = load(path)
        except BaseException:  # SkyPilot refuses the file (or exits on it): not in the corpus
            pass
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
    f.write("\n")
