//! `gantry bench cloud`: an EC2 pool's provisioner against a real EC2 API (`moto_server`,
//! which it starts itself when installed, or one at `--endpoint`): N nodes bought and given
//! back. What it reports: the daemon's own time per node — the actor's `buy` call, from the
//! decision to the node registered as coming (the launch happens on the pool's worker, off the
//! actor) — the time to each node ready through the API, EC2 calls per node, and instances left
//! behind (leaked) once all were given back.

use crate::backend::cloud::{Cloud, Instance};
use crate::backend::ec2::api::Ec2;
use crate::backend::{NodeEvent, Provisioner};
use serde::Serialize;
use std::time::{Duration, Instant};

pub struct CloudBenchConfig {
    pub nodes: usize,
    /// An EC2 endpoint (`http://127.0.0.1:5000`); none: start `moto_server` here.
    pub endpoint: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CloudBenchReport {
    pub endpoint: String,
    pub nodes: usize,
    /// The actor's time per node: `buy` (decision → registered as coming), microseconds.
    pub buy_p50_us: f64,
    pub buy_max_us: f64,
    /// From `buy` to its instance launched (`RunInstances` answered), through the API: the
    /// pool's worker launches one at a time.
    pub launched_p50_ms: f64,
    pub all_launched_s: f64,
    /// From `buy` to the node ready (its instance running, its address known), through the API.
    pub ready_p50_ms: f64,
    pub ready_max_ms: f64,
    pub all_ready_s: f64,
    /// EC2 calls per node to buy it (launch, and its share of the polls and the sweep).
    pub calls_per_node_buy: f64,
    /// EC2 calls per node to give it back.
    pub calls_per_node_give_back: f64,
    pub all_terminated_s: f64,
    /// Instances of the bench's fleet still pending or running at the end.
    pub leaked: usize,
}

/// `moto_server` on a free port, ended on drop.
struct Moto(std::process::Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_moto() -> Result<(Moto, String), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let child = std::process::Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start moto_server ({e}): pip install 'moto[server]', or give --endpoint"
            )
        })?;
    let moto = Moto(child);
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t0.elapsed() > Duration::from_secs(30) {
            return Err("moto_server did not answer in 30 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((moto, format!("http://127.0.0.1:{port}")))
}

fn pool(
    nodes: usize,
    endpoint: &str,
    fleet: &str,
) -> Result<crate::config::fleet::PoolConfig, String> {
    let text = format!(
        "[[teams]]\nname = \"bench\"\n\n[[pools]]\nname = \"bench\"\nprovider = \"aws\"\nbackend = \"ec2\"\nregion = \"us-east-1\"\nzone = \"us-east-1a\"\ninstance_type = \"p4d.24xlarge\"\ngpu = \"A100\"\ngpus_per_node = 8\nvram_gb = 40\ncpus = 96\nmemory_gb = 1152\ncapacity = \"on-demand\"\nprice_per_hour = 21.96\nnodes = 0\nmax_nodes = {nodes}\n\n[pools.ec2]\nimage = \"ami-f8e54081\"\nzones = [\"us-east-1a\", \"us-east-1b\"]\nendpoint_url = \"{endpoint}\"\nfleet = \"{fleet}\"\n"
    );
    let cfg = crate::config::fleet::parse("bench", &text).map_err(|e| e.to_string())?;
    Ok(cfg.pools[0].clone())
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    super::quantile(v, q)
}

pub fn run(c: &CloudBenchConfig) -> Result<CloudBenchReport, String> {
    // Static test credentials unless the caller has some (moto accepts any).
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    }
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    let (_moto, endpoint) = match &c.endpoint {
        Some(e) => (None, e.clone()),
        None => {
            let (m, e) = start_moto()?;
            (Some(m), e)
        }
    };
    let fleet = format!("bench-{}", std::process::id());
    let p = pool(c.nodes, &endpoint, &fleet)?;
    let names: Vec<String> = (0..c.nodes).map(|i| p.node_name(i as u32)).collect();
    let mut pool = crate::backend::ec2::open(&p, names)
        .map_err(|why| crate::backend::error::OpenError::at(&p, true, why).to_string())?;
    let before = pool.calls();
    let mut buy_us = Vec::new();
    let t0 = Instant::now();
    let mut asked = vec![t0; c.nodes];
    for (h, at) in asked.iter_mut().enumerate() {
        let t = Instant::now();
        pool.buy(h, 0.0);
        buy_us.push(t.elapsed().as_secs_f64() * 1e6);
        *at = t;
    }
    let mut ready_ms = vec![f64::NAN; c.nodes];
    let mut launched_ms = vec![f64::NAN; c.nodes];
    let mut left = c.nodes;
    let deadline = Instant::now() + Duration::from_secs(600);
    while left > 0 {
        if Instant::now() > deadline {
            return Err(format!("{left} node(s) not ready in 10 min"));
        }
        for (_, e) in pool.poll(0.0) {
            match e {
                NodeEvent::Ready(h) if ready_ms[h].is_nan() => {
                    ready_ms[h] = asked[h].elapsed().as_secs_f64() * 1e3;
                    left -= 1;
                }
                NodeEvent::Said {
                    host: Some(h),
                    what,
                } if what.starts_with("launched ") => {
                    launched_ms[h] = asked[h].elapsed().as_secs_f64() * 1e3;
                }
                NodeEvent::Unavailable { why, .. } => return Err(format!("a buy failed: {why}")),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let all_ready_s = t0.elapsed().as_secs_f64();
    let bought = pool.calls() - before;
    let t1 = Instant::now();
    for h in 0..c.nodes {
        pool.give_back(h, 0.0);
    }
    let mut terminated = 0;
    while terminated < c.nodes {
        if Instant::now() > deadline {
            return Err(format!(
                "{} node(s) not terminated in time",
                c.nodes - terminated
            ));
        }
        for (_, e) in pool.poll(0.0) {
            if let NodeEvent::Said { what, .. } = e {
                if what.starts_with("terminated ") {
                    terminated += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let all_terminated_s = t1.elapsed().as_secs_f64();
    let given_back = pool.calls() - before - bought;
    drop(pool);
    // What EC2 holds of the bench's fleet now, asked afresh.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let left: Vec<Instance> = rt
        .block_on(async {
            let ec2 = Ec2::new(crate::backend::ec2::target_of(&p)).await;
            ec2.list().await
        })
        .map_err(|r| r.why().to_string())?;
    let n = c.nodes as f64;
    Ok(CloudBenchReport {
        endpoint,
        nodes: c.nodes,
        buy_p50_us: quantile(&mut buy_us.clone(), 0.5),
        buy_max_us: quantile(&mut buy_us, 1.0),
        launched_p50_ms: quantile(&mut launched_ms.clone(), 0.5),
        all_launched_s: quantile(&mut launched_ms, 1.0) / 1e3,
        ready_p50_ms: quantile(&mut ready_ms.clone(), 0.5),
        ready_max_ms: quantile(&mut ready_ms, 1.0),
        all_ready_s,
        calls_per_node_buy: bought as f64 / n,
        calls_per_node_give_back: given_back as f64 / n,
        all_terminated_s,
        leaked: left.iter().filter(|i| i.live()).count(),
    })
}
