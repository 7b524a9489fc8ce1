//! Test "hosts": real `sshd`s on 127.0.0.1 ports, each in its own PID, UTS and mount
//! namespace (`unshare`), so each has its own process table, hostname and home; a client key
//! they accept and an ssh_config for the pools that reach them. Shared by the SSH and cloud
//! tests.

use super::daemon::{free_port, temp_dir};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One "host": an sshd in namespaces of its own.
pub struct Host {
    pub name: String,
    pub port: u16,
    pub unshare: Child,
}

impl Host {
    /// The namespace's first process (sshd): killing it takes the whole host down.
    pub fn init_pid(&self) -> Option<u32> {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.unshare.id()))
                .ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    pub fn entry(&self) -> String {
        format!("root@127.0.0.1:{}", self.port)
    }

    /// Processes in this host's PID namespace.
    pub fn processes(&self) -> Vec<(u32, String)> {
        let Some(init) = self.init_pid() else {
            return Vec::new();
        };
        let ns = std::fs::read_link(format!("/proc/{init}/ns/pid")).ok();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok() != ns {
                continue;
            }
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            out.push((pid, cmd));
        }
        out
    }

    pub fn kill_agent(&self) -> usize {
        let agents: Vec<u32> = self
            .processes()
            .into_iter()
            .filter(|(_, c)| c.contains(".gantry/bin/gantry-") && c.contains(" agent"))
            .map(|(p, _)| p)
            .collect();
        for p in &agents {
            unsafe { libc::kill(*p as i32, libc::SIGKILL) };
        }
        agents.len()
    }

    /// The machine is replaced by a fresh one at the same address (a cloud node bought again
    /// for the same name): every process on it but sshd ends, and the agent's state goes.
    pub fn replace(&self, hosts_dir: &Path, i: usize) {
        let init = self.init_pid();
        for (pid, _) in self.processes() {
            if Some(pid) != init {
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        let _ = std::fs::remove_dir_all(hosts_dir.join(format!("home{i}/.gantry")));
    }

    /// The host dies: every process on it, sshd included.
    pub fn kill(&mut self) {
        if let Some(init) = self.init_pid() {
            unsafe { libc::kill(init as i32, libc::SIGKILL) };
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// A few hosts, a client key they accept and an ssh_config for the pool.
pub struct Hosts {
    pub dir: PathBuf,
    pub hosts: Vec<Host>,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            h.kill();
            // The agent's state on the "host" (root's home is shared by the test hosts).
            let home = std::env::var_os("HOME").map_or(PathBuf::from("/root"), PathBuf::from);
            let _ = std::fs::remove_dir_all(home.join(".gantry/agent").join(&h.name));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn can_run() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let ok = root
        && Path::new("/usr/sbin/sshd").exists()
        && Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--uts", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "skipped: needs root, /usr/sbin/sshd (apt-get install openssh-server) and unshare"
        );
    }
    ok
}

pub fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen failed");
}

pub fn hosts(test: &str, n: usize) -> Hosts {
    let dir = temp_dir(&format!("hosts-{test}"));
    keygen(&dir.join("client"));
    std::fs::copy(dir.join("client.pub"), dir.join("authorized_keys")).unwrap();
    std::fs::write(
        dir.join("ssh_config"),
        format!(
            "Host *\n  IdentityFile {0}/client\n  UserKnownHostsFile {0}/known_hosts\n  StrictHostKeyChecking accept-new\n  BatchMode yes\n  LogLevel ERROR\n",
            dir.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
    let mut out = Hosts {
        dir: dir.clone(),
        hosts: Vec::new(),
    };
    for i in 0..n {
        let name = format!("gt{}-{test}-{i}", std::process::id());
        let key = dir.join(format!("host{i}"));
        keygen(&key);
        let port = free_port();
        let cfg = dir.join(format!("sshd{i}"));
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}/authorized_keys\nUsePAM no\nStrictModes no\nPermitRootLogin yes\nPidFile {}/sshd{i}.pid\n",
                key.display(),
                dir.display(),
                dir.display()
            ),
        )
        .unwrap();
        // Each host has its own home for root (an empty directory mounted over /root in
        // its mount namespace): sessions do not run this machine's shell rc files (whose
        // tools may hang a login — pyenv's rehash lock, left by a session killed mid-login,
        // stalled every later one for a minute), and agents keep their state apart, as on
        // separate machines.
        let home = dir.join(format!("home{i}"));
        std::fs::create_dir_all(&home).unwrap();
        let unshare = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--uts", "sh", "-c"])
            .arg(format!(
                "hostname {name} && mount --bind {} /root && exec /usr/sbin/sshd -D -e -f {}",
                home.display(),
                cfg.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        out.hosts.push(Host {
            name,
            port,
            unshare,
        });
    }
    for h in &out.hosts {
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", h.port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(10), "sshd did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    out
}

impl Hosts {
    /// A fleet file with one SSH pool over `entries`.
    pub fn fleet(&self, entries: &[String], lost_after: &str) -> PathBuf {
        let hosts: Vec<String> = entries.iter().map(|e| format!("\"{e}\"")).collect();
        let text = format!(
            r#"[[teams]]
name = "lab"

[[pools]]
provider = "ssh"
region = "onprem"
zone = "rack1"
name = "lab"
instance_type = "ssh host"
gpu = "A100-80GB"
gpus_per_node = 2
vram_gb = 80
cpus = 8
memory_gb = 32
capacity = "reserved"
price_per_hour = 1.5
hosts = [{}]
lost_after = "{lost_after}"

[pools.ssh]
config = "{}/ssh_config"
"#,
            hosts.join(", "),
            self.dir.display()
        );
        let path = self.dir.join("fleet.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn entries(&self) -> Vec<String> {
        self.hosts.iter().map(Host::entry).collect()
    }
}
