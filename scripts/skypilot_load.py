"""What SkyPilot's own loader makes of each task file under a directory, offline.

    python scripts/skypilot_load.py tests/skypilot/corpus tests/skypilot/verdicts.json

Run with a Python that has `skypilot==0.14.1` (no cloud credentials or network needed). For
every file SkyPilot loads (`sky.utils.dag_utils.load_chain_dag_from_yaml`): each task's
`num_nodes`, each of its resources' accelerators, spot, cloud, region, instance type, CPUs and
memory, and
its SkyServe `service` section as read.
Files SkyPilot refuses are left out. Written to the second argument (SkyPilot prints progress
lines of its own on stdout). `tests/specs/skypilot_loader.rs` compares gantry with this.
"""
import atexit, json, logging, os, shutil, sys, tempfile

os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
logging.disable(logging.CRITICAL)
# SkyPilot reads a Lambda instance type's GPUs from its catalog, which it fetches from GitHub
# when ~/.sky has none: offline (CI, a fresh machine) the file would not load. The catalog
# gantry carries is SkyPilot's own file (core/src/catalog/lambda.csv), so it is put where
# SkyPilot looks, in a HOME of this run's own: the user's ~/.sky is left as it is.
_home = tempfile.mkdtemp(prefix="gantry-skypilot-home-")
atexit.register(shutil.rmtree, _home, True)
os.environ["HOME"] = _home
from sky.skylet import constants  # noqa: E402

_catalog = os.path.join(_home, ".sky", "catalogs", constants.CATALOG_SCHEMA_VERSION, "lambda")
os.makedirs(_catalog)
shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "src", "catalog", "lambda.csv"),
            os.path.join(_catalog, "vms.csv"))
from sky.utils import dag_utils  # noqa: E402


def service(s):
    """A SkyServe section as `sky serve up` reads it: replicas, policy, probe, port."""
    qps = s.target_qps_per_replica
    if isinstance(qps, dict):
        qps = min(qps.values())
    return {
        "min_replicas": s.min_replicas,
        "max_replicas": s.max_replicas if s.max_replicas is not None else s.min_replicas,
        "target_qps_per_replica": float(qps) if qps is not None else None,
        "readiness_path": s.readiness_path,
        "initial_delay_seconds": float(s.initial_delay_seconds),
        "readiness_timeout_seconds": float(s.readiness_timeout_seconds),
        "post_data": s.post_data is not None,
        "upscale_delay_seconds": float(s.upscale_delay_seconds) if s.upscale_delay_seconds is not None else None,
        "downscale_delay_seconds": float(s.downscale_delay_seconds) if s.downscale_delay_seconds is not None else None,
        "ports": int(s.ports) if s.ports is not None else None,
        "load_balancing_policy": s.load_balancing_policy,
    }


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
                "cpus": r.cpus,
                "memory": r.memory,
            })
        if not isinstance(res, list):
            # `any_of` is a set: iterated in hash order, which changes from run to run
            # (PYTHONHASHSEED). Written in one order, that of their JSON.
            alts.sort(key=lambda a: json.dumps(a, sort_keys=True))
        task = {"num_nodes": t.num_nodes, "alternatives": alts}
        if t.service is not None:
            task["service"] = service(t.service)
        tasks.append(task)
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
