//! slurmrestd over HTTP (`http://host:6820`) or its Unix socket (`unix:/run/slurmrestd.sock`):
//! which OpenAPI version the server serves (detected, and said), and what it says, with errors
//! that name the server and what to do.

use super::inventory::{self, Answer, Inventory, Job, Node, Partition};
use super::token::{self, Token};
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;
use std::time::{Duration, Instant};

/// The versions gantry reads, newest first. v0.0.38 (Slurm 22.05) is tested against a real
/// slurmrestd; later ones are read by the same tolerant parser (lists for states, objects for
/// numbers).
pub const VERSIONS: [&str; 5] = ["v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38"];

/// The version whose job description gantry posts (`submit`); with the others, `sbatch`.
pub const SUBMITS: &str = "v0.0.38";

/// The most an answer may be: slurmrestd spends about 3.3 kB on a job, so 20,000 jobs are
/// 66 MB; this leaves room for 300,000.
const MAX_BODY: u64 = 1 << 30;

/// How far before the last read the next one asks for changes: Slurm stamps its changes in
/// whole seconds (a change in the second of the last read is not "since" it) and the daemon's
/// clock may run a little ahead of slurmctld's.
const SINCE_MARGIN_S: i64 = 2;

/// A whole read at least this often, whatever Slurm says changed.
const FULL_READ_EVERY: Duration = Duration::from_secs(30);

/// The queue is read again no sooner than this many times what its last read took, so that
/// reading it holds slurmrestd (and the daemon's parse) at most a tenth of the time. While
/// jobs start and end, Slurm answers a read since a time with every job it holds, finished
/// ones included: 3–7 MB of JSON on a busy 32-GPU cluster, 65 MB at 20,000 jobs, each built by
/// slurmrestd on the cluster's head node. A small queue is still read each refresh, and any
/// queue at least every `FULL_READ_EVERY` (a whole read reads it). What the queue says that
/// cannot wait does not come from it: a run's end comes from its exit file.
const QUEUE_SPACING: u32 = 10;

/// What the last read found, and when it asked: the next asks slurmrestd only for what
/// changed since (`update_time`), and an answer of 304 Not Modified — no body, nothing built
/// by slurmrestd or parsed here — keeps what was found.
#[derive(Default)]
struct LastRead {
    /// The daemon's clock (seconds since the epoch) when the last read began.
    asked_at: Option<i64>,
    full_at: Option<Instant>,
    /// The same for the queue, read less often where it is large (`QUEUE_SPACING`): when its
    /// last read began (the daemon's clock, and this process's) and what that read took.
    jobs_asked_at: Option<i64>,
    jobs_began: Option<Instant>,
    jobs_took: Duration,
    nodes: Vec<Node>,
    partitions: Vec<Partition>,
    jobs: Vec<Job>,
}

impl LastRead {
    /// What the next read asks for changes since; `None` for a whole read.
    fn since(&self) -> Option<i64> {
        let fresh = self.full_at?.elapsed() < FULL_READ_EVERY;
        fresh.then_some(self.asked_at? - SINCE_MARGIN_S)
    }

    /// Whether a node now holds fewer GPUs than the cluster's own running jobs held there at
    /// the queue's last read: some of them ended.
    fn foreign_gpus_freed(&self) -> bool {
        let mut held: std::collections::HashMap<&str, u32> = Default::default();
        for j in self.jobs.iter().filter(|j| j.running() && !j.is_gantrys()) {
            for (node, gpus) in &j.alloc {
                *held.entry(node.as_str()).or_default() += super::gres::count(gpus);
            }
        }
        self.nodes.iter().any(|n| {
            held.get(n.name.as_str())
                .is_some_and(|&h| h > 0 && n.gpus_used.iter().map(|g| g.count).sum::<u32>() < h)
        })
    }

    /// Whether the queue is read this time: always in a whole read, else once its last
    /// read's cost allows (`spacing` times what it took).
    fn queue_due(&self, whole: bool, spacing: u32) -> bool {
        whole
            || self
                .jobs_began
                .is_none_or(|t| t.elapsed() >= self.jobs_took * spacing)
    }
}

/// Why slurmrestd took no job.
#[derive(Debug)]
pub enum SubmitFailed {
    /// Its API version's job description is not one gantry writes.
    Unsupported,
    /// Not reached, or the credentials refused: nothing was submitted.
    Untried(String),
    /// Reached, and no job id came back (what Slurm said).
    Refused(String),
}

pub struct SlurmRest {
    /// What the user wrote (for messages).
    pub url: String,
    base: String,
    user: Option<String>,
    token: Option<Token>,
    client: reqwest::blocking::Client,
    /// The API version in use, and Slurm's release where the server says.
    pub version: String,
    pub release: Option<String>,
    last: LastRead,
    /// What is read whole: this slurmrestd failed a read of it since a time (`read_since`).
    whole_only: Vec<&'static str>,
    /// `QUEUE_SPACING`, or 0 where every read reads the queue (`gantry bench slurm` times
    /// whole refreshes).
    queue_spacing: u32,
    /// Bytes of the answers read since `inventory` began (what the reader gives back after).
    read_bytes: std::sync::atomic::AtomicUsize,
}

impl SlurmRest {
    /// Connects to `url`, authenticating as `user` with `token` (a JWT from `scontrol token`)
    /// where given (the Unix socket's local auth needs neither), and picks the newest API
    /// version both speak.
    pub fn connect(
        url: &str,
        user: Option<String>,
        token: Option<Token>,
    ) -> Result<SlurmRest, String> {
        crate::tls::install_provider();
        let mut builder = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(5));
        let base = if let Some(path) = url.strip_prefix("unix:") {
            builder = builder.unix_socket(std::path::PathBuf::from(path));
            "http://slurmrestd".to_string()
        } else if url.starts_with("http://") || url.starts_with("https://") {
            url.trim_end_matches('/').to_string()
        } else {
            return Err(format!(
                "slurmrestd = \"{url}\": expected http://HOST:PORT or unix:/PATH/TO/SOCKET"
            ));
        };
        let client = builder
            .build()
            .map_err(|e| format!("slurmrestd {url}: {e}"))?;
        let mut s = SlurmRest {
            url: url.to_string(),
            base,
            user,
            token,
            client,
            version: String::new(),
            release: None,
            last: LastRead::default(),
            whole_only: Vec::new(),
            queue_spacing: QUEUE_SPACING,
            read_bytes: Default::default(),
        };
        s.version = s.detect()?;
        Ok(s)
    }

    /// The newest version in `VERSIONS` the server's OpenAPI description lists (or, where it
    /// serves none, answers a ping in).
    fn detect(&self) -> Result<String, String> {
        let served: Vec<String> = match self.get_json("/openapi/v3") {
            Ok(doc) => doc
                .get("paths")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(p, _)| p.strip_prefix("/slurm/")?.split('/').next())
                .map(str::to_string)
                .collect(),
            Err(e) if e.contains("cannot reach") || e.contains("refused the credentials") => {
                return Err(e)
            }
            Err(_) => Vec::new(),
        };
        if let Some(v) = VERSIONS.iter().find(|v| served.iter().any(|s| s == *v)) {
            return Ok(v.to_string());
        }
        for v in VERSIONS {
            if self.get_json(&format!("/slurm/{v}/ping")).is_ok() {
                return Ok(v.to_string());
            }
        }
        let mut served = served;
        served.sort();
        served.dedup();
        Err(format!(
            "slurmrestd {} serves {} — gantry reads {}: run slurmrestd with `-s openapi/v0.0.38` (Slurm 22.05) or a newer plugin",
            self.url,
            if served.is_empty() {
                "no Slurm API it describes".to_string()
            } else {
                served.join(", ")
            },
            VERSIONS.join(", ")
        ))
    }

    /// `req` as the pool's user, where a token says who that is (the Unix socket's local auth
    /// needs neither). The token is read at each request: a renewed `token_file` is taken.
    fn as_the_user(
        &self,
        req: reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::RequestBuilder, String> {
        Ok(match (&self.user, &self.token) {
            (Some(user), Some(token)) => req
                .header("X-SLURM-USER-NAME", user)
                .header("X-SLURM-USER-TOKEN", token.read()?),
            _ => req,
        })
    }

    /// Why slurmrestd refused the credentials (HTTP `status`), with what fixes it.
    fn refused(&self, status: reqwest::StatusCode) -> String {
        let why = match &self.token {
            None => "no token was sent: set SLURM_JWT (`export $(scontrol token username=USER)`) or the pool's token_file — or use slurmrestd's Unix socket (unix:/PATH), where Slurm's local auth needs none".to_string(),
            Some(t) => match t.read() {
                Err(e) => e,
                Ok(token) => token::fault(
                    &token,
                    &t.source(),
                    self.user.as_deref(),
                    chrono::Utc::now().timestamp(),
                )
                .unwrap_or_else(|| {
                    format!(
                        "the token in {} is {}'s and unexpired, so slurmctld does not take its signature (made on another cluster, or before its jwt key changed?): make one with `scontrol token username={}` on this cluster",
                        t.source(),
                        self.user.as_deref().unwrap_or("USER"),
                        self.user.as_deref().unwrap_or("USER")
                    )
                }),
            },
        };
        format!(
            "slurmrestd {} refused the credentials (HTTP {status}): {why}",
            self.url
        )
    }

    /// `GET path`, sent: the answer, its body not read yet (a refusal of the credentials is
    /// an error here).
    fn send(&self, path: &str) -> Result<reqwest::blocking::Response, String> {
        let resp = self
            .as_the_user(self.client.get(format!("{}{path}", self.base)))?
            .send()
            .map_err(|e| {
                format!(
                    "cannot reach slurmrestd at {}: {} (is it running, and is this its address?)",
                    self.url,
                    crate::errors::root_cause(&e)
                )
            })?;
        let status = resp.status();
        if status.as_u16() == 401 || status.as_u16() == 403 {
            return Err(self.refused(status));
        }
        Ok(resp)
    }

    fn too_long(&self, path: &str) -> String {
        format!(
            "slurmrestd {}: GET {path} answered more than {} MiB: gantry reads no more",
            self.url,
            MAX_BODY >> 20
        )
    }

    /// `GET path`: the status and the body.
    fn get(&self, path: &str) -> Result<(reqwest::StatusCode, Vec<u8>), String> {
        let resp = self.send(path)?;
        let status = resp.status();
        let mut body =
            Vec::with_capacity(resp.content_length().unwrap_or(0).min(MAX_BODY) as usize);
        resp.take(MAX_BODY + 1)
            .read_to_end(&mut body)
            .map_err(|e| format!("slurmrestd {}: reading {path}: {e}", self.url))?;
        self.read_bytes
            .fetch_add(body.len(), std::sync::atomic::Ordering::Relaxed);
        if body.len() as u64 > MAX_BODY {
            return Err(self.too_long(path));
        }
        Ok((status, body))
    }

    /// `GET path` as JSON; Slurm's own errors in the answer are an error too.
    fn get_json(&self, path: &str) -> Result<Value, String> {
        let (status, body) = self.get(path)?;
        let v: Value = serde_json::from_slice(&body)
            .map_err(|_| self.not_json(&format!("GET {path}"), status, &body))?;
        let errors = v
            .get("errors")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.check(&format!("GET {path}"), status, &errors)?;
        Ok(v)
    }

    /// `GET path` read as an `Answer` (the fields gantry uses, the rest skipped); `None`
    /// where slurmrestd says nothing changed since the `update_time` asked about.
    ///
    /// Parsed as it arrives, never held whole: slurmrestd 22.05 answers a jobs read with
    /// every job it still remembers whenever anything changed (`MinJobAge`: thousands on a
    /// busy cluster, 3–4 KB each). Read into one buffer first, that answer was tens of MB that
    /// the allocator kept resident after it was freed, and the daemon grew with the
    /// cluster's history (issue 68).
    fn get_answer(&self, path: &str) -> Result<Option<Answer>, String> {
        let resp = self.send(path)?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(None);
        }
        let mut body = Counted::new(resp.take(MAX_BODY + 1));
        let read = serde_json::from_reader::<_, Answer>(std::io::BufReader::with_capacity(
            64 << 10,
            &mut body,
        ));
        self.read_bytes
            .fetch_add(body.bytes as usize, std::sync::atomic::Ordering::Relaxed);
        if body.bytes > MAX_BODY {
            return Err(self.too_long(path));
        }
        let a = read.map_err(|e| match e.classify() {
            serde_json::error::Category::Data => format!(
                "slurmrestd {}: GET {path}: an answer gantry cannot read ({e}): is this Slurm's REST API?",
                self.url
            ),
            serde_json::error::Category::Io => {
                format!("slurmrestd {}: reading {path}: {e}", self.url)
            }
            _ => self.not_json(&format!("GET {path}"), status, &body.head),
        })?;
        self.check(&format!("GET {path}"), status, &a.errors)?;
        Ok(Some(a))
    }

    fn not_json(&self, asked: &str, status: reqwest::StatusCode, body: &[u8]) -> String {
        format!(
            "slurmrestd {}: {asked} answered HTTP {status}, not JSON: {}",
            self.url,
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        )
    }

    /// An error for a failed status or Slurm's own errors in the answer.
    fn check(
        &self,
        path: &str,
        status: reqwest::StatusCode,
        errors: &[Value],
    ) -> Result<(), String> {
        let errors: Vec<String> = errors
            .iter()
            .filter_map(|e| {
                let text = e
                    .get("description")
                    .or_else(|| e.get("error"))
                    .and_then(Value::as_str)?;
                (!text.is_empty()).then(|| text.to_string())
            })
            .collect();
        if status.is_success() && errors.is_empty() {
            return Ok(());
        }
        // slurmrestd 22.05 passes the token through; slurmctld refusing it comes back as a
        // 500 with no more said than this.
        let hint = if self.token.is_some()
            && status.as_u16() == 500
            && errors.iter().any(|e| e == "Unspecified error")
        {
            format!(
                " — slurmctld refuses an invalid or expired token this way: {}",
                self.refused(status)
            )
        } else {
            String::new()
        };
        Err(format!(
            "slurmrestd {}: {path}: HTTP {status}: {}{hint}",
            self.url,
            if errors.is_empty() {
                "no reason given".to_string()
            } else {
                errors.join("; ")
            }
        ))
    }

    /// Submits a batch job (`batch::rest_job`'s body) as the pool's user; Slurm's job id.
    /// Only v0.0.38's job description is known here (later versions took another schema).
    pub fn submit(&self, job: &Value) -> Result<u64, SubmitFailed> {
        if self.version != SUBMITS {
            return Err(SubmitFailed::Unsupported);
        }
        let path = format!("/slurm/{}/job/submit", self.version);
        let resp = self
            .as_the_user(self.client.post(format!("{}{path}", self.base)).json(job))
            .map_err(SubmitFailed::Untried)?
            .send()
            .map_err(|e| {
                let why = format!(
                    "cannot reach slurmrestd at {}: {}",
                    self.url,
                    crate::errors::root_cause(&e)
                );
                // Refused or not reached: nothing was sent, so nothing was submitted.
                if e.is_connect() {
                    SubmitFailed::Untried(why)
                } else {
                    SubmitFailed::Refused(why)
                }
            })?;
        let status = resp.status();
        if status.as_u16() == 401 || status.as_u16() == 403 {
            return Err(SubmitFailed::Untried(self.refused(status)));
        }
        let body = resp
            .bytes()
            .map_err(|e| SubmitFailed::Refused(format!("slurmrestd {}: {e}", self.url)))?;
        let what = format!("POST {path}");
        let v: Value = serde_json::from_slice(&body)
            .map_err(|_| SubmitFailed::Refused(self.not_json(&what, status, &body)))?;
        // A job id is a submission, whatever else is said beside it.
        if let Some(id) = v.get("job_id").and_then(Value::as_u64).filter(|&id| id > 0) {
            if status.is_success() {
                return Ok(id);
            }
        }
        let errors = v.get("errors").and_then(Value::as_array).cloned();
        self.check(&what, status, &errors.unwrap_or_default())
            .and(Err(format!(
                "slurmrestd {}: {what}: no job id in the answer",
                self.url
            )))
            .map_err(SubmitFailed::Refused)
    }

    /// `GET /slurm/VERSION/what`: what changed since `since` (`None` where nothing did), or
    /// all of it. slurmrestd 22.05 (v0.0.38) answers a read of its nodes since a time with
    /// HTTP 500 "Unspecified error" on about half the reads while jobs start and end (its jobs
    /// and partitions answered 304 or 200). Taken as an error, every node looked down until
    /// the next read and nothing started there meanwhile. So a read since a time that fails
    /// is made again whole, and where that answers, `what` is read whole from then on.
    fn read_since(
        &mut self,
        what: &'static str,
        since: Option<i64>,
    ) -> Result<Option<Answer>, String> {
        let whole = format!("/slurm/{}/{what}", self.version);
        let Some(t) = since.filter(|_| !self.whole_only.contains(&what)) else {
            return self.get_answer(&whole);
        };
        match self.get_answer(&format!("{whole}?update_time={t}")) {
            Err(_) => {
                let answer = self.get_answer(&whole)?;
                self.whole_only.push(what);
                Ok(answer)
            }
            answer => answer,
        }
    }

    /// The bytes the last `inventory` read (0 where everything answered 304).
    pub fn read_bytes(&self) -> usize {
        self.read_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every read reads the queue, whatever it costs (for timing whole refreshes).
    pub fn read_the_queue_each_time(&mut self) {
        self.queue_spacing = 0;
    }

    /// When the queue in the last `inventory` was asked for (this process's clock): a job
    /// submitted after cannot be in it.
    pub fn queue_read_at(&self) -> Option<Instant> {
        self.last.jobs_began
    }

    /// Partitions, nodes and jobs, now: what changed since the last read asked, the rest as
    /// it was (a whole read at first, and every `FULL_READ_EVERY`; the queue as
    /// `QUEUE_SPACING` allows).
    pub fn inventory(&mut self) -> Result<Inventory, String> {
        self.inventory_without(&mut HashSet::new())
    }

    /// `inventory`, less the ended jobs in `taken` (those whose end the caller has already
    /// taken): neither kept nor answered, while Slurm goes on remembering them. An id Slurm
    /// no longer answers with leaves `taken`.
    ///
    /// slurmctld answers with every ended job for `MinJobAge` (300 s by default): on a pool
    /// running a thousand short parts a minute, the ends of the last five minutes' parts,
    /// kept here and copied to the worker at every refresh long after it had settled them —
    /// the daemon's memory rose with them for the first rounds of a run (issue 68).
    pub fn inventory_without(&mut self, taken: &mut HashSet<u64>) -> Result<Inventory, String> {
        self.read_bytes
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let asked_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let since = self.last.since();
        if let Some(nodes) = self.read_since("nodes", since)? {
            self.release = nodes
                .meta
                .pointer("/Slurm/release")
                .or_else(|| nodes.meta.pointer("/slurm/release"))
                .and_then(Value::as_str)
                .map(str::to_string);
            self.last.nodes = nodes
                .nodes
                .iter()
                .map(inventory::node)
                .collect::<Result<_, _>>()?;
        }
        if let Some(p) = self.read_since("partitions", since)? {
            self.last.partitions = p.partitions.iter().map(inventory::partition).collect();
        }
        // Read the queue now, whatever its spacing, where a node holds fewer GPUs than the
        // cluster's own running jobs held there at the last read: some of them ended, and
        // until the queue says which, their GPUs look held. A spacing of ten reads after a
        // long answer (a busy cluster's history) left freed GPUs unused for up to 10 s
        // (issue 68: the first start of a paired round at 9.9 s against Slurm's 0.4 s).
        let freed = self.last.foreign_gpus_freed();
        if freed || self.last.queue_due(since.is_none(), self.queue_spacing) {
            let began = Instant::now();
            // Changes since the queue's own last read: a read of the nodes since may have
            // come after it.
            let jobs_since = since.and(self.last.jobs_asked_at.map(|t| t - SINCE_MARGIN_S));
            if let Some(j) = self.read_since("jobs", jobs_since)? {
                self.last.jobs = j.jobs;
                if !taken.is_empty() {
                    let answered: HashSet<u64> = self.last.jobs.iter().map(|j| j.id).collect();
                    taken.retain(|id| answered.contains(id));
                }
            }
            self.last.jobs_asked_at = Some(asked_at);
            self.last.jobs_began = Some(began);
            self.last.jobs_took = began.elapsed();
        }
        if !taken.is_empty() {
            self.last
                .jobs
                .retain(|j| !(j.ended() && taken.contains(&j.id)));
        }
        self.last.asked_at = Some(asked_at);
        if since.is_none() {
            self.last.full_at = Some(Instant::now());
        }
        Ok(Inventory {
            api: self.version.clone(),
            slurm: self.release.clone(),
            partitions: self.last.partitions.clone(),
            nodes: self.last.nodes.clone(),
            jobs: self.last.jobs.clone(),
        })
    }
}

/// A body read through: how many bytes came, and the first of them (what an answer that is
/// not JSON is shown by).
struct Counted<R> {
    inner: R,
    bytes: u64,
    head: Vec<u8>,
}

impl<R> Counted<R> {
    const HEAD: usize = 200;

    fn new(inner: R) -> Self {
        Counted {
            inner,
            bytes: 0,
            head: Vec::new(),
        }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let room = Self::HEAD.saturating_sub(self.head.len()).min(n);
        self.head.extend_from_slice(&buf[..room]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on 127.0.0.1 that answers every request with `status` and `body`.
    fn serving(status: &'static str, body: Vec<u8>) -> SlurmRest {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut head = std::io::BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while head.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(&body);
            }
        });
        crate::tls::install_provider();
        SlurmRest {
            url: url.clone(),
            base: url,
            user: None,
            token: None,
            client: reqwest::blocking::Client::new(),
            version: "v0.0.38".to_string(),
            release: None,
            last: LastRead::default(),
            whole_only: Vec::new(),
            queue_spacing: QUEUE_SPACING,
            read_bytes: Default::default(),
        }
    }

    /// An answer is parsed as it arrives (issue 68), and one that is not what gantry reads
    /// still says what it was: not JSON (with its first bytes), or JSON of another shape.
    #[test]
    fn answers_are_read_as_they_stream_and_a_wrong_one_says_what_it_was() {
        let job = |id: u32, state: &str| {
            format!(
                r#"{{"job_id":{id},"name":"gantry-{id}","user_name":"nobody","job_state":"{state}","comment":"gantry:{id}","padding":"{}"}}"#,
                "x".repeat(3000)
            )
        };
        let jobs: Vec<String> = (1..=2_000)
            .map(|i| job(i, if i % 2 == 0 { "RUNNING" } else { "COMPLETED" }))
            .collect();
        let body = format!(r#"{{"meta":{{}},"errors":[],"jobs":[{}]}}"#, jobs.join(","));
        let len = body.len();
        let rest = serving("200 OK", body.into_bytes());
        let a = rest.get_answer("/slurm/v0.0.38/jobs").unwrap().unwrap();
        // Every running job is kept; of the ended ones, only gantry's (none here by comment).
        assert!(a.jobs.len() >= 1_000, "{}", a.jobs.len());
        assert_eq!(rest.read_bytes(), len);

        let rest = serving(
            "502 Bad Gateway",
            b"<html><body>proxy error: upstream slurmrestd is down</body></html>".to_vec(),
        );
        let e = rest.get_answer("/slurm/v0.0.38/jobs").unwrap_err();
        assert!(
            e.contains("answered HTTP 502 Bad Gateway, not JSON: <html><body>proxy error"),
            "{e}"
        );

        let rest = serving("200 OK", br#"{"jobs": 5}"#.to_vec());
        let e = rest.get_answer("/slurm/v0.0.38/jobs").unwrap_err();
        assert!(e.contains("an answer gantry cannot read"), "{e}");
        assert!(e.contains("is this Slurm's REST API?"), "{e}");
    }

    /// The ended parts whose end the worker has taken are no longer kept nor answered while
    /// Slurm remembers them (issue 68); one taken but still running is, until it ends; an id
    /// Slurm no longer answers with is let go.
    #[test]
    fn ended_jobs_whose_end_was_taken_are_no_longer_kept() {
        let job = |id: u32, state: &str| {
            format!(
                r#"{{"job_id":{id},"name":"gantry-{id}","user_name":"nobody","job_state":"{state}","comment":"gantry:{id}:tok:0"}}"#
            )
        };
        let body = format!(
            r#"{{"meta":{{}},"errors":[],"nodes":[],"partitions":[],"jobs":[{},{},{},{}]}}"#,
            job(1, "COMPLETED"),
            job(2, "FAILED"),
            job(3, "COMPLETED"),
            job(4, "RUNNING")
        );
        let mut rest = serving("200 OK", body.into_bytes());
        rest.read_the_queue_each_time();
        let ids = |inv: &Inventory| inv.jobs.iter().map(|j| j.id).collect::<Vec<_>>();
        let mut taken = HashSet::new();
        assert_eq!(
            ids(&rest.inventory_without(&mut taken).unwrap()),
            [1, 2, 3, 4]
        );
        taken.extend([1, 4, 99]);
        let inv = rest.inventory_without(&mut taken).unwrap();
        assert_eq!(ids(&inv), [2, 3, 4]);
        assert_eq!(rest.last.jobs.len(), 3, "not kept either");
        let mut left: Vec<u64> = taken.into_iter().collect();
        left.sort_unstable();
        assert_eq!(left, [1, 4], "99 is not answered: let go");
    }

    #[test]
    fn a_queue_slow_to_read_is_read_less_often_and_always_in_a_whole_read() {
        let mut last = LastRead::default();
        assert!(last.queue_due(false, QUEUE_SPACING), "never read: read it");
        // A read of 300 ms just began: the next no sooner than 3 s after it.
        last.jobs_began = Some(Instant::now());
        last.jobs_took = Duration::from_millis(300);
        assert!(!last.queue_due(false, QUEUE_SPACING));
        assert!(
            last.queue_due(true, QUEUE_SPACING),
            "a whole read reads the queue too"
        );
        last.jobs_began = Instant::now().checked_sub(Duration::from_millis(3100));
        assert!(last.queue_due(false, QUEUE_SPACING));
        // A small queue (a few ms a read) is read each refresh.
        last.jobs_began = Instant::now().checked_sub(super::super::runner::REFRESH);
        last.jobs_took = Duration::from_millis(5);
        assert!(last.queue_due(false, QUEUE_SPACING));
    }

    /// The cluster's own jobs held 6 GPUs of node a at the queue's last read; the nodes now
    /// say 4 are used: some ended, and the queue is read now, whatever its spacing. gantry's
    /// own parts, and a node whose GPUs are all still held, do not count.
    #[test]
    fn gpus_the_clusters_own_jobs_let_go_are_a_reason_to_read_the_queue_now() {
        use super::super::gres::Gpus;
        use super::super::inventory::{Job, Node};
        let gpus = |count| {
            vec![Gpus {
                model: Some("a100".into()),
                count,
                indices: Vec::new(),
            }]
        };
        let job = |node: &str, n, comment: &str| Job {
            state: "running".into(),
            alloc: vec![(node.to_string(), gpus(n))],
            comment: comment.into(),
            ..Job::default()
        };
        let node = |name: &str, used| Node {
            name: name.into(),
            gpus_used: gpus(used),
            ..Node::default()
        };
        let mut last = LastRead {
            jobs: vec![
                job("a", 4, ""),
                job("a", 2, ""),
                job("b", 8, "gantry:1:t:0"),
            ],
            nodes: vec![node("a", 6), node("b", 0)],
            ..LastRead::default()
        };
        assert!(
            !last.foreign_gpus_freed(),
            "gantry's own part on b ended: its exit file says so"
        );
        last.nodes[0] = node("a", 4);
        assert!(last.foreign_gpus_freed());
    }
}
