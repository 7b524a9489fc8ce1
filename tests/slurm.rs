//! A real Slurm cluster (Debian's slurm-wlm 22.05: `slurmctld`, `slurmd`, `slurmrestd`, with
//! `munged`), started by the test on 127.0.0.1 ports: one node with four declared A100s (GRES
//! backed by plain files — Slurm schedules them; no GPU is needed), and `gantry slurm` reading
//! it through slurmrestd. Needs root and the packages (`.ci/run` installs them); without them
//! each test says it skipped.

#[path = "common/daemon.rs"]
mod common;

use common::{free_port, temp_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn can_run() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let have = [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/slurmrestd",
        "/usr/sbin/munged",
    ]
    .iter()
    .all(|p| Path::new(p).exists());
    if !(root && have) {
        eprintln!(
            "skipped: needs root and Debian's slurm-wlm, slurmrestd and munge (apt-get install slurm-wlm slurmrestd munge)"
        );
    }
    root && have
}

/// A one-node cluster; its daemons are stopped when it is dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    url: String,
    children: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs first (their slurmstepd outlives slurmd), then the daemons.
        self.slurm("scancel", &["--full", "-u", "nobody"]);
        let t0 = Instant::now();
        while !self.slurm("squeue", &["-h"]).trim().is_empty()
            && t0.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        for c in &mut self.children {
            // Each in its own process group (slurmrestd runs under runuser).
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        ensure_munge();
        let dir = temp_dir(&format!("slurm-{name}"));
        // slurmrestd runs as nobody: it must read the configuration.
        for d in [dir.parent().unwrap(), &dir] {
            let _ = Command::new("chmod").arg("755").arg(d).status();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
            .to_string();
        let (ctld, slurmd, rest) = (free_port(), free_port(), free_port());
        std::fs::create_dir_all(dir.join("dev")).unwrap();
        for i in 0..4 {
            std::fs::write(dir.join(format!("dev/nvidia{i}")), "").unwrap();
        }
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("jwt.key"), rand_key()).unwrap();
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=gantry{ctld}\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={ctld}\nSlurmdPort={slurmd}\nSlurmUser=root\nAuthType=auth/munge\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={d}/jwt.key\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/slurmd.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSlurmdParameters=config_overrides\nDefMemPerCPU=10\nGresTypes=gpu\nReturnToService=2\nMpiDefault=none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\nSchedulerParameters=sched_interval=1\nNodeName=gpu-a NodeHostname={host} NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 Gres=gpu:a100:4 State=UNKNOWN\nPartitionName=gpu Nodes=gpu-a Default=YES MaxTime=INFINITE State=UP\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("gres.conf"),
            format!("NodeName=gpu-a Name=gpu Type=a100 File={d}/dev/nvidia[0-3]\n"),
        )
        .unwrap();
        let spawn = |cmd: &mut Command, log: &str| -> Child {
            use std::os::unix::process::CommandExt;
            let out = std::fs::File::create(dir.join(log)).unwrap();
            cmd.env("SLURM_CONF", &conf)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut children = vec![spawn(
            Command::new("/usr/sbin/slurmctld").args(["-D", "-i"]),
            "ctld.out",
        )];
        children.push(spawn(
            Command::new("/usr/sbin/slurmd").args(["-D", "-N", "gpu-a"]),
            "slurmd.out",
        ));
        children.push(spawn(
            Command::new("runuser")
                .args(["-u", "nobody", "--", "env"])
                .arg(format!("SLURM_CONF={}", conf.display()))
                .args(["SLURM_JWT=daemon", "/usr/sbin/slurmrestd"])
                .args(["-a", "rest_auth/jwt", "-s", "openapi/v0.0.38"])
                .arg(format!("127.0.0.1:{rest}")),
            "restd.out",
        ));
        let c = Cluster {
            url: format!("http://127.0.0.1:{rest}"),
            dir,
            conf,
            children,
        };
        c.wait_for("the node to be idle", 30, |c| {
            c.slurm("sinfo", &["-h", "-o", "%t"]).trim() == "idle"
        });
        c
    }

    /// A Slurm command, its stdout.
    fn slurm(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// A batch job submitted as nobody; its id.
    fn sbatch(&self, args: &[&str]) -> u64 {
        let out = Command::new("runuser")
            .args(["-u", "nobody", "--", "env"])
            .arg(format!("SLURM_CONF={}", self.conf.display()))
            .args(["sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        said.trim()
            .parse()
            .unwrap_or_else(|_| panic!("sbatch: {said}{}", String::from_utf8_lossy(&out.stderr)))
    }

    /// A JWT for `user` (slurmrestd takes no root token).
    fn token(&self, user: &str) -> String {
        let t = self.slurm(
            "scontrol",
            &["token", &format!("username={user}"), "lifespan=600"],
        );
        t.trim().trim_start_matches("SLURM_JWT=").to_string()
    }

    fn gantry(&self, token: &str, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("slurm")
            .args(args)
            .env("SLURM_JWT", token)
            .env("SLURMRESTD", &self.url)
            .output()
            .unwrap()
    }

    fn wait_for(&self, what: &str, secs: u64, pred: impl Fn(&Cluster) -> bool) {
        let t0 = Instant::now();
        while !pred(self) {
            assert!(
                t0.elapsed() < Duration::from_secs(secs),
                "timed out waiting for {what}; logs in {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn rand_key() -> Vec<u8> {
    let mut k = vec![0u8; 32];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut k)
        .unwrap();
    k
}

/// munged answers (started here if it does not).
fn ensure_munge() {
    let ok = || {
        Command::new("munge")
            .arg("-n")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if ok() {
        return;
    }
    let _ = std::fs::create_dir_all("/run/munge");
    let _ = Command::new("chown")
        .args(["munge:munge", "/run/munge"])
        .status();
    let _ = Command::new("runuser")
        .args(["-u", "munge", "--", "/usr/sbin/munged"])
        .status();
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "munged did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn gantry_slurm_shows_gpus_who_holds_them_and_why_jobs_wait() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("show");
    let holder = c.sbatch(&["-J", "holder", "--gres=gpu:a100:3", "--wrap", "sleep 120"]);
    c.wait_for("the first job to run", 30, |c| {
        c.slurm("squeue", &["-h", "-j", &holder.to_string(), "-o", "%T"])
            .trim()
            == "RUNNING"
    });
    let waiting = c.sbatch(&["-J", "waiting", "--gres=gpu:a100:2", "--wrap", "sleep 1"]);
    c.wait_for("the second job to be held back for resources", 30, |c| {
        c.slurm("squeue", &["-h", "-j", &waiting.to_string(), "-o", "%r"])
            .trim()
            == "Resources"
    });
    let token = c.token("nobody");
    let out = c.gantry(&token, &["--user", "nobody", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["api"], "v0.0.38", "{v}");
    assert!(v["slurm"].as_str().unwrap().starts_with("22.05"), "{v}");
    let node = &v["nodes"][0];
    assert_eq!(node["name"], "gpu-a");
    assert_eq!(node["gpus"][0]["model"], "a100");
    assert_eq!(node["gpus"][0]["count"], 4);
    assert_eq!(node["gpus_used"][0]["count"], 3, "{node}");
    assert_eq!(
        node["gpus_used"][0]["indices"],
        serde_json::json!([0, 1, 2])
    );
    let job = |id: u64| {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("job {id} in {v}"))
    };
    let h = job(holder);
    assert_eq!(
        (h["state"].as_str(), h["user"].as_str()),
        (Some("running"), Some("nobody"))
    );
    assert_eq!(h["gpus_per_node"], 3);
    let w = job(waiting);
    assert_eq!(w["state"], "pending");
    assert_eq!(w["reason_code"], "Resources");
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .starts_with("waits for free resources"),
        "{w}"
    );
    // The table says the same on one screen.
    let out = c.gantry(&token, &["--user", "nobody"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("3/4 a100"), "{table}");
    assert!(table.contains("waits for free resources"), "{table}");
    // A token slurmctld does not take is an error that says what to do.
    let out = c.gantry("not-a-token", &["--user", "nobody"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("scontrol token username=USER"),
        "{err}"
    );
    // A wrong address names itself.
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "slurm",
            "--slurmrestd",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .env("SLURM_JWT", &token)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach slurmrestd at http://127.0.0.1:"),
        "{err}"
    );
}
