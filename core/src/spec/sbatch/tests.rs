//! Batch scripts read as sbatch reads them.

use super::values::{memory_mib, time_s};
use super::*;

fn spec(text: &str) -> JobSpec {
    parse("job.sbatch", text).unwrap_or_else(|e| panic!("{e}"))
}
fn err(text: &str) -> String {
    parse("job.sbatch", text).unwrap_err().to_string()
}

#[test]
fn directives_become_the_spec() {
    let s = spec(
        "#!/bin/bash\n#SBATCH --job-name=pretrain\n#SBATCH -N 2\n#SBATCH --gres=gpu:a100:8\n#SBATCH --ntasks-per-node=8 --cpus-per-task=6\n#SBATCH --mem=512G\n#SBATCH -t 2-00:00:00\n#SBATCH --signal=B:USR1@120\n#SBATCH -A ml -q high\n#SBATCH --export=ALL,NCCL_DEBUG=INFO\n\nsrun python train.py\n#SBATCH --nodes=9\n",
    );
    assert_eq!(s.name.as_deref(), Some("pretrain"));
    assert_eq!(s.nodes, 2);
    let a = &s.accelerators.as_ref().unwrap().options[0];
    assert_eq!((a.model.as_str(), a.count), ("a100", GpuCount::Whole(8)));
    assert_eq!((s.cpu_milli, s.mem_mib), (48_000, 512 * 1024));
    assert_eq!(s.time_limit_s, Some(172_800.0));
    let c = s.checkpoint.as_ref().unwrap();
    assert_eq!((c.signal.0.as_str(), c.grace_s), ("SIGUSR1", 120.0));
    assert_eq!(
        (s.team.as_deref(), s.priority.as_deref()),
        (Some("ml"), Some("high"))
    );
    assert_eq!(s.envs["NCCL_DEBUG"], "INFO");
    assert_eq!(
        s.ignored,
        [
            "`--export=ALL` (line 10: the submitter's environment is not carried to the job; give VAR=VALUE)",
            "Slurm's own commands or SLURM_* variables (line 12): gantry runs the script on each of its 2 node(s) with GANTRY_NODE_RANK, GANTRY_NUM_NODES and GANTRY_HEAD_IP; outside a Slurm pool there is no srun, scontrol or SLURM_*",
        ]
    );
    // The script itself is the run; the directive after the first command is a comment.
    assert!(s.run.as_deref().unwrap().starts_with("#!/bin/bash\n"));
}

#[test]
fn every_way_of_asking_for_gpus_gives_gpus_per_node() {
    let per = |d: &str| {
        let s = spec(&format!("#!/bin/sh\n#SBATCH -N 2\n#SBATCH {d}\nhostname\n"));
        s.accelerators
            .map(|a| (a.options[0].model.clone(), a.options[0].count))
    };
    let w = GpuCount::Whole;
    assert_eq!(per("--gres=gpu:4"), Some((ANY.into(), w(4))));
    assert_eq!(per("--gres=gpu"), Some((ANY.into(), w(1))));
    assert_eq!(per("--gpus-per-node=h100:8"), Some(("h100".into(), w(8))));
    assert_eq!(per("--gpus=16"), Some((ANY.into(), w(8))));
    assert_eq!(per("-G a100:4"), Some(("a100".into(), w(2))));
    assert_eq!(
        per("--ntasks-per-node=4 --gpus-per-task=1"),
        Some((ANY.into(), w(4)))
    );
    assert_eq!(per("--gres=shard:2"), None);
    assert!(err("#!/bin/sh\n#SBATCH -N 2 --gpus=3\n").contains("do not divide evenly"));
    let e = err("#!/bin/sh\n#SBATCH --gres=gpu:a100:4\n#SBATCH --gpus-per-node=8\n");
    assert_eq!(
        e,
        "job.sbatch:3:9: `--gpus-per-node=8`: asks for 8 GPU(s) per node, but `--gres=gpu:a100:4` (line 2) for 4 a100 GPU(s)"
    );
}

const ANY: &str = super::super::ANY_MODEL;

#[test]
fn what_is_not_acted_on_is_listed_and_what_would_change_the_job_is_refused() {
    let s = spec(
        "#!/bin/bash\n#SBATCH -p gpu -o out.%j --mail-type=END # who cares\n#SBATCH --frobnicate=3\n#SBATCH --mem=0\necho hi\n",
    );
    assert_eq!(
        s.ignored,
        [
            "`-p gpu` (line 2: gantry chooses where the job runs)",
            "`-o out.%j` (line 2: gantry keeps the job's output: `gantry logs`)",
            "`--mail-type=END` (line 2: not acted on)",
            "`--frobnicate=3` (line 3: not an sbatch option gantry knows)",
            "`--mem=0` (line 4: all of a node's memory; gantry reserves none)",
        ]
    );
    assert_eq!(
        err("#!/bin/bash\n#SBATCH --array=0-9\n"),
        "job.sbatch:2:9: `--array=0-9`: job arrays are not run by gantry: submit one job per task (e.g. a loop of `gantry submit` with the index in an env)"
    );
    assert!(err("#!/bin/bash\n#SBATCH -d afterok:12\n")
        .starts_with("job.sbatch:2:9: `-d afterok:12`: dependencies"));
    assert_eq!(
        err("#!/bin/bash\n#SBATCH  --time=soon\n"),
        "job.sbatch:2:10: `--time=soon`: `soon`: expected a time like 90 (minutes), 1:30:00, 2-00:00:00 or UNLIMITED"
    );
    assert!(err("#!/bin/bash\n#SBATCH --nodes=2-4\n").contains("a range of nodes"));
    assert!(err("#!/bin/bash\n#SBATCH --signal=KILL@30\n").contains("allowed: USR1"));
    assert!(err("#!/bin/bash\n#SBATCH --job-name\n").contains("needs a value"));
    assert!(err("echo no shebang\n").starts_with("job.sbatch:1:1: a batch script starts with #!"));
}

#[test]
fn times_memory_and_quoting_read_as_sbatch_reads_them() {
    let t = |v: &str| time_s(v).unwrap();
    assert_eq!(t("90"), Some(5400.0));
    assert_eq!(t("1:30"), Some(90.0));
    assert_eq!(t("1:00:00"), Some(3600.0));
    assert_eq!(t("1-12"), Some(129_600.0));
    assert_eq!(t("1-0:30"), Some(88_200.0));
    assert_eq!(t("UNLIMITED"), None);
    assert_eq!(memory_mib("500").unwrap(), 500);
    assert_eq!(memory_mib("64G").unwrap(), 65_536);
    assert_eq!(memory_mib("2T").unwrap(), 2 * 1024 * 1024);
    assert!(memory_mib("4X").is_err());
    let s = spec("#!/bin/bash\n#SBATCH --job-name=\"two words\" --signal=10\nrun\n");
    assert_eq!(s.name.as_deref(), Some("two words"));
    assert_eq!(s.checkpoint.unwrap().grace_s, 60.0);
}

#[test]
fn other_interpreters_run_the_script_as_the_kernel_would() {
    let s = spec("#!/usr/bin/env python3\n#SBATCH --gres=gpu:1\nprint('hi')\n");
    let run = s.run.unwrap();
    assert!(
        run.starts_with("exec /usr/bin/env 'python3' /dev/fd/3 3<<'GANTRY_BATCH_SCRIPT'\n#!/usr/bin/env python3\n"),
        "{run}"
    );
    assert!(run.ends_with("print('hi')\nGANTRY_BATCH_SCRIPT\n"));
    // Run for real (perl is in every Debian): the directives are its comments.
    let run = spec("#!/usr/bin/perl -w\n#SBATCH -N 1\nprint \"from perl\\n\";\n").run;
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(run.unwrap())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from perl\n");
    // A shell script is its own run (gantry runs `run` with bash).
    let s = spec("#!/usr/bin/env -S bash -e\n#SBATCH -N 1\necho hi\n");
    assert_eq!(
        s.run.as_deref(),
        Some("#!/usr/bin/env -S bash -e\n#SBATCH -N 1\necho hi\n")
    );
}

#[test]
fn only_scripts_are_read_as_scripts() {
    assert!(is_batch_script("job.sbatch", "name: x\n"));
    assert!(is_batch_script("train.sh", "#!/bin/bash\n#SBATCH -N 1\n"));
    assert!(!is_batch_script("task.yaml", "#!/bin/bash\nrun: echo\n"));
    assert!(!is_batch_script("task.yaml", "name: x\n#SBATCH -N 1\n"));
}
