//! A real Slurm cluster for the tests (Debian's slurm-wlm 22.05: `slurmctld`, one `slurmd`
//! per node, `slurmrestd`, with `munged`) on 127.0.0.1 ports, and gantry daemons over it.

use super::daemon::{free_port, start_with, temp_dir, Daemon};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn can_run() -> bool {
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
pub struct Cluster {
    pub dir: PathBuf,
    /// Its GPUs are character devices (else Slurm sets no CUDA_VISIBLE_DEVICES).
    pub char_devices: bool,
    pub conf: PathBuf,
    pub url: String,
    children: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs first (their slurmstepd outlives slurmd), every user's (the tests submit as
        // root and as nobody), then the daemons.
        let ids: Vec<String> = self
            .slurm("squeue", &["-h", "-o", "%i"])
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if !ids.is_empty() {
            let mut args = vec!["--full"];
            args.extend(ids.iter().map(String::as_str));
            self.slurm("scancel", &args);
        }
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
        // Whatever a job of this cluster still runs (its script is under the cluster's
        // directory), and the slurmstepd above it: issue 41 found them running minutes after
        // the suite passed.
        for (pid, parent) in processes_under(&self.dir) {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            if std::fs::read(format!("/proc/{parent}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"slurmstepd"))
            {
                unsafe { libc::kill(parent as i32, libc::SIGKILL) };
            }
        }
    }
}

/// The processes whose command line names `dir`, with their parents.
fn processes_under(dir: &std::path::Path) -> Vec<(u32, u32)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(&needle) || pid == std::process::id() {
            continue;
        }
        // `pid (comm) state ppid …`: the parent after the command's closing parenthesis.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
        out.push((pid, parent));
    }
    out
}

impl Cluster {
    /// A cluster of `nodes` (name, GPU type, count) in one partition `gpu`, each node its
    /// own `slurmd`, its GPUs character devices (Slurm drops plain files) named in gres.conf.
    pub fn start(name: &str, nodes: &[(&str, &str, u32)]) -> Cluster {
        Cluster::start_conf(name, nodes, "")
    }

    /// The same with `extra` lines in slurm.conf (`SchedulerType=…`).
    pub fn start_conf(name: &str, nodes: &[(&str, &str, u32)], extra: &str) -> Cluster {
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
        let (ctld, rest) = (free_port(), free_port());
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("jwt.key"), rand_key()).unwrap();
        let d = dir.display();
        let (mut node_lines, mut gres) = (String::new(), String::new());
        let mut char_devices = true;
        for (n, kind, count) in nodes {
            let devs = dir.join("dev").join(n);
            std::fs::create_dir_all(&devs).unwrap();
            for i in 0..*count {
                let path = devs.join(format!("nvidia{i}"));
                let made = Command::new("mknod")
                    .arg(&path)
                    .args(["c", "195", &i.to_string()])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if !made {
                    // A container without CAP_MKNOD: plain files still make GRES Slurm
                    // schedules, but it then sets no CUDA_VISIBLE_DEVICES.
                    char_devices = false;
                    std::fs::write(&path, "").unwrap();
                }
            }
            node_lines.push_str(&format!(
                "NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={} CPUs={} RealMemory=1000 Gres=gpu:{kind}:{count} State=UNKNOWN\n",
                free_port(),
                (*count).max(4)
            ));
            gres.push_str(&format!(
                "NodeName={n} Name=gpu Type={kind} File={}/nvidia[0-{}]\n",
                devs.display(),
                count - 1
            ));
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.0).collect();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=gantry{ctld}\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={ctld}\nSlurmUser=root\nAuthType=auth/munge\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={d}/jwt.key\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\nSlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/slurmd-%n.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSlurmdParameters=config_overrides\nDefMemPerCPU=10\nGresTypes=gpu\nReturnToService=2\nMpiDefault=none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\nSchedulerParameters=sched_interval=1\nKillWait=5\n{extra}{node_lines}PartitionName=gpu Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
                names.join(",")
            ),
        )
        .unwrap();
        std::fs::write(dir.join("gres.conf"), gres).unwrap();
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
        for n in &names {
            std::fs::create_dir_all(dir.join("spool").join(n)).unwrap();
            children.push(spawn(
                Command::new("/usr/sbin/slurmd").args(["-D", "-N", n]),
                &format!("slurmd-{n}.out"),
            ));
        }
        let mut c = Cluster {
            char_devices,
            url: format!("http://127.0.0.1:{rest}"),
            dir,
            conf,
            children,
        };
        c.start_restd(rest);
        c.wait_for("the nodes to be idle", 30, |c| {
            let states = c.slurm("sinfo", &["-h", "-N", "-o", "%t"]);
            states.lines().count() == names.len() && states.lines().all(|s| s.trim() == "idle")
        });
        c
    }

    /// slurmrestd on 127.0.0.1:`port`, as nobody, with JWT auth.
    pub fn start_restd(&mut self, port: u16) {
        use std::os::unix::process::CommandExt;
        let out = std::fs::File::create(self.dir.join("restd.out")).unwrap();
        let child = Command::new("runuser")
            .args(["-u", "nobody", "--", "env"])
            .arg(format!("SLURM_CONF={}", self.conf.display()))
            .arg("SLURM_JWT=daemon")
            // More of slurmrestd's environment where a bench asks (RESTD_ENV="K=V …", as
            // `MALLOC_ARENA_MAX=2`: docs/backends.md, "slurmrestd's memory").
            .args(
                std::env::var("RESTD_ENV")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .arg("/usr/sbin/slurmrestd")
            .args(["-a", "rest_auth/jwt", "-s", "openapi/v0.0.38"])
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// Stops slurmrestd (the last daemon started).
    pub fn stop_restd(&mut self) {
        if let Some(mut c) = self.children.pop() {
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    /// A Slurm command, its stdout.
    pub fn slurm(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// A batch job submitted as nobody; its id.
    pub fn sbatch(&self, args: &[&str]) -> u64 {
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
    pub fn token(&self, user: &str) -> String {
        self.token_for(user, 600)
    }

    /// A JWT for `user` that lasts `secs`.
    pub fn token_for(&self, user: &str, secs: u32) -> String {
        let out = Command::new("scontrol")
            .args([
                "token",
                &format!("username={user}"),
                &format!("lifespan={secs}"),
            ])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&out.stdout);
        let t = t.trim().trim_start_matches("SLURM_JWT=").to_string();
        assert!(
            !t.is_empty(),
            "scontrol token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    pub fn gantry(&self, token: &str, args: &[&str]) -> std::process::Output {
        self.gantry_as(token, "root", args)
    }

    /// `gantry slurm` with `$USER` set to `user`.
    pub fn gantry_as(&self, token: &str, user: &str, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("slurm")
            .args(args)
            .env("SLURM_JWT", token)
            .env("SLURMRESTD", &self.url)
            .env("USER", user)
            .output()
            .unwrap()
    }

    pub fn wait_for(&self, what: &str, secs: u64, pred: impl Fn(&Cluster) -> bool) {
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

/// A daemon over a fleet of Slurm pools (name, gpu, per node, nodes) reading `c` as nobody,
/// submitting to partition `gpu`.
pub fn daemon_over(c: &Cluster, test: &str, pools: &[(&str, &str, u8, &[&str])]) -> Daemon {
    let pools: Vec<_> = pools
        .iter()
        .map(|&(n, g, k, nodes)| (n, g, k, nodes, "gpu"))
        .collect();
    daemon_over_partitions(c, test, &pools)
}

/// The same, each pool submitting to its own partition.
pub fn daemon_over_partitions(
    c: &Cluster,
    test: &str,
    pools: &[(&str, &str, u8, &[&str], &str)],
) -> Daemon {
    daemon_over_with(c, test, pools, &[])
}

/// The same, with more of the daemon's flags.
pub fn daemon_over_with(
    c: &Cluster,
    test: &str,
    pools: &[(&str, &str, u8, &[&str], &str)],
    extra: &[&str],
) -> Daemon {
    daemon_over_as(c, test, pools, extra, false)
}

/// A daemon over `c` (as `daemon_over`) that runs as nobody, the user of its token: it
/// submits its parts through slurmrestd. Its PATH holds no Slurm command (only `sleep`, `cat`
/// and `date`), so a part that went to `sbatch` would fail to start.
pub fn daemon_over_as_nobody(
    c: &Cluster,
    test: &str,
    pools: &[(&str, &str, u8, &[&str])],
) -> Daemon {
    let pools: Vec<_> = pools
        .iter()
        .map(|&(n, g, k, nodes)| (n, g, k, nodes, "gpu"))
        .collect();
    daemon_over_as(c, test, &pools, &[], true)
}

fn daemon_over_as(
    c: &Cluster,
    test: &str,
    pools: &[(&str, &str, u8, &[&str], &str)],
    extra: &[&str],
    nobody: bool,
) -> Daemon {
    let dir = temp_dir(test);
    let mut text = String::from("[[teams]]\nname = \"lab\"\n");
    for (name, gpu, count, nodes, partition) in pools {
        let hosts: Vec<String> = nodes.iter().map(|n| format!("\"{n}\"")).collect();
        text.push_str(&format!(
            "\n[[pools]]\nprovider = \"slurm\"\nregion = \"hpc\"\nzone = \"dc\"\nname = \"{name}\"\ninstance_type = \"node\"\ngpu = \"{gpu}\"\ngpus_per_node = {count}\nvram_gb = 80\ncpus = {}\nmemory_gb = 1\ncapacity = \"reserved\"\nprice_per_hour = 2.0\nhosts = [{}]\n[pools.slurm]\nslurmrestd = \"{}\"\npartition = \"{partition}\"\nuser = \"nobody\"\n",
            (*count).max(4),
            hosts.join(", "),
            c.url
        ));
    }
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, text).unwrap();
    // For the daemon's whole life: a paired run of ten rounds outlives `token`'s ten minutes
    // (the pool then says the token expired, and nothing more runs).
    let token = c.token_for("nobody", 6 * 3600);
    let err = std::fs::File::create(dir.join("daemon.err")).unwrap();
    let conf = c.conf.clone();
    let mut args = vec!["--config", fleet.to_str().unwrap()];
    args.extend_from_slice(extra);
    if nobody {
        // The commands its jobs run (they get the daemon's PATH, as from sbatch).
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for cmd in ["sleep", "cat", "date"] {
            std::os::unix::fs::symlink(format!("/bin/{cmd}"), bin.join(cmd)).unwrap();
        }
        let status = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let home = dir.clone();
    start_with(dir, &args, |cmd| {
        use std::os::unix::process::CommandExt;
        cmd.env("SLURM_JWT", token)
            .env("SLURM_CONF", conf)
            .stderr(err);
        if nobody {
            cmd.uid(65534)
                .gid(65534)
                .env("USER", "nobody")
                .env("LOGNAME", "nobody")
                .env("HOME", &home)
                .env("PATH", home.join("bin"));
        }
    })
}

/// `d` (started by `daemon_over`) killed and started again over the same journal and fleet
/// file: a daemon restart.
pub fn restart_over(c: &Cluster, d: &mut Daemon) {
    let _ = d.child.kill();
    let _ = d.child.wait();
    let _ = std::fs::remove_file(&d.socket);
    let fleet = d.dir.join("fleet.toml");
    let err = std::fs::File::create(d.dir.join("daemon.err")).unwrap();
    let mut cmd = super::daemon::daemon_cmd(
        &d.dir,
        &d.socket,
        d.port,
        &["--config", fleet.to_str().unwrap()],
    );
    cmd.env("SLURM_JWT", c.token("nobody"))
        .env("SLURM_CONF", &c.conf)
        .stderr(err);
    d.child = cmd.spawn().unwrap();
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(&d.socket).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the daemon did not start again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Slurm's running gantry jobs: (name, node).
pub fn gantry_jobs(c: &Cluster) -> Vec<(String, String)> {
    c.slurm("squeue", &["-h", "-t", "RUNNING", "-o", "%j %N"])
        .lines()
        .filter(|l| l.starts_with("gantry-"))
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.trim().to_string()))
        .collect()
}
