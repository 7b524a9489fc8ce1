//! The durable journal: SQLite in WAL mode with `synchronous = FULL`, versioned migrations, and
//! one writer thread that commits before it acknowledges. Concurrent submitters are served by
//! group commit: the writer takes every request waiting in its queue, writes them in one
//! transaction, commits once, then answers each — so an acknowledged job is on disk, and a crash
//! loses only unacknowledged ones, never half of one.

mod clouds;
mod records;
pub use records::TeamSpend;
mod reports;
mod runs;
mod schema;
pub use reports::ReportRecord;
mod services;
pub use clouds::{cloud_pools_at, CloudPoolRecord, TimerRecord};
pub use runs::{HistoryQuery, Queued};
use schema::MIGRATIONS;
pub use services::{ReplicaRecord, ServiceRecord};

use crate::api::JobState;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

pub use crate::api::JobId;

/// A job id as a person or a URL writes it: a positive integer.
pub fn parse_job_id(text: &str) -> Result<JobId, String> {
    text.parse::<JobId>()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| {
            format!(
                "job id `{}`: expected a positive integer",
                text.escape_debug()
            )
        })
}

/// How long a submission's Idempotency-Key is remembered (wall-clock seconds).
pub const IDEMPOTENCY_KEPT_S: f64 = 24.0 * 3600.0;

/// A job running as a process group on the local host, as the journal keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalRunRecord {
    pub job: JobId,
    pub pgid: u32,
    /// The placement as JSON (`None` in journals from before migration 6).
    pub placement: Option<String>,
    pub started_at: Option<f64>,
    /// The run's `GANTRY_RUN_TOKEN` (`None` in journals from before migration 7).
    pub token: Option<String>,
}

/// A job running on a remote backend, as the journal keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteRunRecord {
    pub job: JobId,
    pub token: String,
    /// The placement as JSON.
    pub placement: String,
    pub started_at: f64,
    /// The placement's nodes by name, rank order (`None` in runs journaled before names were).
    pub nodes: Option<Vec<String>>,
}

/// A run that starts billing: the job's share of its nodes' price.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Charge {
    pub job: JobId,
    pub team: String,
    pub project: Option<String>,
    /// on-demand, spot or reserved (of the first node's pool).
    pub capacity: String,
    pub gpus: f64,
    pub dollars_per_hour: f64,
    /// Its nodes' names, rank order.
    pub nodes: Vec<String>,
}

pub use crate::api::RunRecord;

/// One billed run, clipped to a report's window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChargeRecord {
    pub job: JobId,
    pub team: String,
    pub project: Option<String>,
    pub capacity: String,
    pub gpus: f64,
    pub dollars_per_hour: f64,
    /// Clipped to the window.
    pub from: f64,
    pub to: f64,
}

impl ChargeRecord {
    pub fn dollars(&self) -> f64 {
        self.dollars_per_hour * (self.to - self.from) / 3600.0
    }
    pub fn gpu_hours(&self) -> f64 {
        self.gpus * (self.to - self.from) / 3600.0
    }
}

/// An API token as stored: its SHA-256 (hex), never the token itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenRecord {
    pub hash: String,
    pub role: String,
    pub team: Option<String>,
    pub label: String,
    pub created_at: f64,
    /// When it stops being accepted (wall-clock Unix seconds); never when `None`.
    pub expires_at: Option<f64>,
    /// When an operator revoked it (wall-clock Unix seconds).
    pub revoked_at: Option<f64>,
    /// The Unix account its jobs run as where gantry starts processes on the daemon's host
    /// (`gantry token create --user`); `None`: it names no one, and a root daemon runs nothing
    /// on this host for it. Never the label, which is a note.
    pub user: Option<String>,
}

impl TokenRecord {
    /// How people name a token: the first 12 hex digits of its hash (never the token).
    pub fn id(&self) -> &str {
        self.hash.get(..12).unwrap_or(&self.hash)
    }
}

/// One journal event (the wire's type: the journal keeps what clients read).
pub use crate::api::EventRecord;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("journal {path}: written by a newer gantry (schema {found}, this build knows {known}); upgrade gantry")]
    TooNew {
        path: String,
        found: usize,
        known: usize,
    },
    #[error("job {0}: no such job")]
    NoJob(JobId),
    #[error("job {id}: cannot go from {from} to {to}")]
    BadTransition {
        id: JobId,
        from: JobState,
        to: JobState,
    },
    #[error("journal row {id}: {what}")]
    Corrupt { id: JobId, what: String },
    #[error("the journal writer has stopped")]
    Stopped,
    #[error("journal {path} is an empty file (0 bytes), not a gantry journal: it may have been truncated. Restore it from a backup, or remove it to start with no jobs")]
    Empty { path: String },
}

/// What a submission records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NewJob {
    pub name: Option<String>,
    pub team: String,
    pub priority: String,
    /// The job spec as JSON (what `spec::parse` understood).
    pub spec: String,
    pub at: f64,
    /// The submission's idempotency key (caller-scoped) and the digest of what it sent,
    /// remembered with the job in the same transaction.
    pub idempotency: Option<(String, String)>,
    /// Who submitted it.
    pub user: Option<String>,
    /// It names an experiment the daemon reports to: what the tracker owes it is kept with it.
    pub reported: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRecord {
    pub id: JobId,
    pub name: Option<String>,
    pub team: String,
    pub priority: String,
    pub spec: String,
    pub state: JobState,
    pub submitted_at: f64,
    pub updated_at: f64,
    pub cost: f64,
    /// Who submitted it (`None` before migration 14, or through the library).
    pub user: Option<String>,
}

/// Direct access to the database; the writer thread owns one, recovery opens another.
pub struct Store {
    conn: Connection,
    path: String,
    /// The charges closed since the budgets last took them (`take_closed`), so the month's
    /// spend grows by each run that ends instead of being summed again from every run of the
    /// month at each end. `None` until a first `take_closed` (a store nobody takes them from —
    /// the engine alone in `bench memory`, a replay — keeps none), and again once too many
    /// waited untaken (read them again in full).
    closed: Option<Vec<ClosedCharge>>,
}

/// A run's charge as it closed: whose, and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedCharge {
    pub team: String,
    pub project: Option<String>,
    pub started_at: f64,
    pub ended_at: f64,
    pub dollars_per_hour: f64,
    pub gpus: f64,
}

/// Closed charges kept for `take_closed` before the store stops keeping them (a caller that
/// never takes them costs this much memory, then nothing).
const CLOSED_KEPT: usize = 100_000;

impl Store {
    pub fn open(path: &Path) -> Result<Store, JournalError> {
        let name = path.display().to_string();
        let sql = |source| JournalError::Sqlite {
            path: name.clone(),
            source,
        };
        // SQLite takes an empty file for a new database; an empty journal is a truncated one
        // (a full disk, a bad copy), and starting afresh over it would hide that every job is
        // gone.
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(JournalError::Empty { path: name });
        }
        let conn = Connection::open(path).map_err(sql)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        // The journal holds job specs, whose environment may carry secrets: this user only.
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.as_os_str().to_os_string();
            p.push(suffix);
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
        // Every statement the daemon repeats stays prepared (rusqlite keeps 16 by default,
        // fewer than the journal's): parsing one again cost a submission a tenth of its time.
        conn.set_prepared_statement_cache_capacity(64);
        let mut store = Store {
            conn,
            path: name,
            closed: None,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Holds the database for this connection alone until it closes (SQLite's exclusive
    /// locking mode): the engine's store, which is the only writer while a daemon runs (its
    /// lock file keeps out a second one). Each transaction otherwise took and gave back
    /// SQLite's file locks and read the WAL's shared index again — `fcntl` and
    /// `btreeBeginTrans` were 8% of the actor thread's CPU under `gantry bench api`. Another
    /// process (`sqlite3` on a running daemon's journal) is told the database is locked; it
    /// reads it once the daemon stops. The lock is released on close, and by the kernel when
    /// the process dies (`kill -9`), so the next daemon opens it.
    pub fn hold(&self) -> Result<(), JournalError> {
        self.conn
            .pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(self.sql())?;
        // Taken now, not at the first write: a store that cannot hold it says so at open.
        self.conn
            .execute_batch("BEGIN IMMEDIATE; COMMIT;")
            .map_err(self.sql())
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        |source| JournalError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn migrate(&mut self) -> Result<(), JournalError> {
        let version = self.schema_version()?;
        if version > MIGRATIONS.len() {
            return Err(JournalError::TooNew {
                path: self.path.clone(),
                found: version,
                known: MIGRATIONS.len(),
            });
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(version) {
            let path = self.path.clone();
            let sql = |source| JournalError::Sqlite {
                path: path.clone(),
                source,
            };
            let tx = self.conn.transaction().map_err(sql)?;
            tx.execute_batch(m).map_err(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(sql)?;
            tx.commit().map_err(sql)?;
        }
        Ok(())
    }

    /// Opens a batch: the writes until `end_batch` commit together, with one sync to disk
    /// instead of one each (a thousand Slurm nodes coming up write a line each). The writes
    /// that are all-or-none of their own stay so inside it (savepoints).
    pub fn begin_batch(&mut self) -> Result<(), JournalError> {
        // IMMEDIATE: the write lock now (waiting as for any write), so no write in the batch
        // finds another connection's commit in its way.
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.sql())
    }

    /// Commits the batch `begin_batch` opened.
    pub fn end_batch(&mut self) -> Result<(), JournalError> {
        self.conn.execute_batch("COMMIT").map_err(self.sql())
    }

    pub fn schema_version(&self) -> Result<usize, JournalError> {
        let v: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.sql())?;
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    }

    /// Writes jobs in one transaction; all or none.
    pub fn submit_all(&mut self, jobs: &[NewJob]) -> Result<Vec<JobId>, JournalError> {
        let path = self.path.clone();
        let sql = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.savepoint().map_err(sql)?;
        let mut ids = Vec::with_capacity(jobs.len());
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO jobs (name, team, priority, spec, state, submitted_at, updated_at, user) VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?6)",
                )
                .map_err(sql)?;
            let mut event = tx
                .prepare_cached(
                    "INSERT INTO events (at, job, kind, detail) VALUES (?1, ?2, 'submitted', ?3)",
                )
                .map_err(sql)?;
            let mut remember = tx
                .prepare_cached(
                    "INSERT INTO idempotency (key, digest, job, at) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?;
            let mut owe = tx
                .prepare_cached("INSERT INTO experiment_reports (job) VALUES (?1)")
                .map_err(sql)?;
            for j in jobs {
                insert
                    .execute(params![j.name, j.team, j.priority, j.spec, j.at, j.user])
                    .map_err(sql)?;
                let id = tx.last_insert_rowid();
                if j.reported {
                    owe.execute([id]).map_err(sql)?;
                }
                if let Some((key, digest)) = &j.idempotency {
                    remember
                        .execute(params![key, digest, id, crate::daemon::auth::unix_now()])
                        .map_err(sql)?;
                }
                event
                    .execute(params![
                        j.at,
                        id,
                        format!("team {} priority {}", j.team, j.priority)
                    ])
                    .map_err(sql)?;
                ids.push(id);
            }
        }
        if jobs.iter().any(|j| j.idempotency.is_some()) {
            tx.prepare_cached("DELETE FROM idempotency WHERE at < ?1")
                .and_then(|mut s| s.execute([crate::daemon::auth::unix_now() - IDEMPOTENCY_KEPT_S]))
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(ids)
    }

    /// The job a (caller-scoped) idempotency key made within the last day, and the digest
    /// of what that submission sent.
    pub fn idempotent(&self, key: &str) -> Result<Option<(JobId, String)>, JournalError> {
        let since = crate::daemon::auth::unix_now() - IDEMPOTENCY_KEPT_S;
        match self
            .conn
            .prepare_cached("SELECT job, digest FROM idempotency WHERE key = ?1 AND at >= ?2")
            .and_then(|mut s| s.query_row(params![key, since], |r| Ok((r.get(0)?, r.get(1)?))))
        {
            Ok(found) => Ok(Some(found)),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(self.sql()(e)),
        }
    }

    /// Moves a job to `to` if the state machine allows it, with an event.
    pub fn transition(
        &mut self,
        id: JobId,
        to: JobState,
        at: f64,
        why: &str,
    ) -> Result<(), JournalError> {
        self.transition_all(&[(id, to, why.to_string())], at)
    }

    /// Several moves in one transaction (one commit): all of them, or none if any is illegal.
    pub fn transition_all(
        &mut self,
        moves: &[(JobId, JobState, String)],
        at: f64,
    ) -> Result<(), JournalError> {
        self.transition_charged(moves, at, &[])
    }

    /// Moves, and the runs they start, in one transaction. A move out of running/preempting
    /// closes the job's open charge at `at` and adds it to the job's cost, so the bill and the
    /// state can never disagree after a crash.
    pub fn transition_charged(
        &mut self,
        moves: &[(JobId, JobState, String)],
        at: f64,
        opens: &[Charge],
    ) -> Result<(), JournalError> {
        let path = self.path.clone();
        let sql = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        let mut closed = Vec::new();
        let tx = self.conn.savepoint().map_err(sql)?;
        {
            let mut get = tx
                .prepare_cached("SELECT state FROM jobs WHERE id = ?1")
                .map_err(sql)?;
            let mut set = tx
                .prepare_cached("UPDATE jobs SET state = ?1, updated_at = ?2 WHERE id = ?3")
                .map_err(sql)?;
            let mut event = tx
                .prepare_cached(
                    "INSERT INTO events (at, job, kind, detail) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(sql)?;
            let mut bill = tx
                .prepare_cached(
                    "UPDATE jobs SET cost = cost + COALESCE((SELECT SUM(MAX(?1 - started_at, 0) * dollars_per_hour / 3600.0) FROM charges WHERE job = ?2 AND ended_at IS NULL), 0) WHERE id = ?2",
                )
                .map_err(sql)?;
            let mut close = tx
                .prepare_cached("UPDATE charges SET ended_at = MAX(?1, started_at) WHERE job = ?2 AND ended_at IS NULL RETURNING team, project, started_at, ended_at, dollars_per_hour, gpus")
                .map_err(sql)?;
            // How the open run ends, move by move (a preemption, then its requeue).
            let mut ending = tx
                .prepare_cached("UPDATE charges SET ended = COALESCE(ended || '; ', '') || ?1 WHERE job = ?2 AND ended_at IS NULL")
                .map_err(sql)?;
            let mut open = tx
                .prepare_cached("INSERT INTO charges (job, team, project, capacity, gpus, dollars_per_hour, started_at, nodes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
                .map_err(sql)?;
            for (id, to, why) in moves {
                let (id, to) = (*id, *to);
                let from: Option<String> =
                    get.query_row([id], |r| r.get(0)).optional().map_err(sql)?;
                let from: JobState = from
                    .ok_or(JournalError::NoJob(id))?
                    .parse()
                    .map_err(|what| JournalError::Corrupt { id, what })?;
                if !from.can_become(to) {
                    return Err(JournalError::BadTransition { id, from, to });
                }
                set.execute(params![to.name(), at, id]).map_err(sql)?;
                event
                    .execute(params![at, id, to.name(), format!("{from} → {to}: {why}")])
                    .map_err(sql)?;
                if to != JobState::Running {
                    ending
                        .execute(params![format!("{to}: {why}"), id])
                        .map_err(sql)?;
                }
                if !matches!(to, JobState::Running | JobState::Preempting) {
                    bill.execute(params![at, id]).map_err(sql)?;
                    let rows = close
                        .query_map(params![at, id], |r| {
                            Ok(ClosedCharge {
                                team: r.get(0)?,
                                project: r.get(1)?,
                                started_at: r.get(2)?,
                                ended_at: r.get(3)?,
                                dollars_per_hour: r.get(4)?,
                                gpus: r.get(5)?,
                            })
                        })
                        .map_err(sql)?;
                    for c in rows {
                        closed.push(c.map_err(sql)?);
                    }
                }
            }
            for c in opens {
                open.execute(params![
                    c.job,
                    c.team,
                    c.project,
                    c.capacity,
                    c.gpus,
                    c.dollars_per_hour,
                    at,
                    c.nodes.join(",")
                ])
                .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        // Kept once committed: a refused transaction closed nothing.
        if let Some(kept) = &mut self.closed {
            if kept.len() + closed.len() > CLOSED_KEPT {
                self.closed = None;
            } else {
                kept.extend(closed);
            }
        }
        Ok(())
    }

    /// The charges closed since the last call, oldest first, and from now on each one closed
    /// until the next; `None` at the first call, or when more closed than the store keeps
    /// between calls (read the month's spend in full, `closed_spend`).
    pub fn take_closed(&mut self) -> Option<Vec<ClosedCharge>> {
        self.closed.replace(Vec::new())
    }

    /// Changes a job's priority class, with an event.
    pub fn set_priority(&mut self, id: JobId, priority: &str, at: f64) -> Result<(), JournalError> {
        let path = self.path.clone();
        let sql = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.savepoint().map_err(sql)?;
        let old: Option<String> = tx
            .query_row("SELECT priority FROM jobs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sql)?;
        let old = old.ok_or(JournalError::NoJob(id))?;
        tx.execute(
            "UPDATE jobs SET priority = ?1, updated_at = ?2 WHERE id = ?3",
            params![priority, at, id],
        )
        .map_err(sql)?;
        tx.execute(
            "INSERT INTO events (at, job, kind, detail) VALUES (?1, ?2, 'priority', ?3)",
            params![at, id, format!("{old} → {priority}")],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(())
    }

    /// Every job, oldest first (tools and tests; the daemon reads `load_live` and `job`).
    pub fn load(&self) -> Result<Vec<JobRecord>, JournalError> {
        self.select_jobs("ORDER BY id", [])
    }

    /// What a daemon keeps in memory: every job that is not finished, and the `recent`
    /// finished ones with the highest ids (the rest stay here, read one at a time by `job`),
    /// oldest first.
    pub fn load_live(&self, recent: usize) -> Result<Vec<JobRecord>, JournalError> {
        let mut out = self.select_jobs(
            "WHERE state NOT IN ('completed', 'failed', 'cancelled') ORDER BY id",
            [],
        )?;
        let mut done = self.select_jobs(
            "WHERE state IN ('completed', 'failed', 'cancelled') ORDER BY id DESC LIMIT ?1",
            [i64::try_from(recent).unwrap_or(i64::MAX)],
        )?;
        out.append(&mut done);
        out.sort_unstable_by_key(|r| r.id);
        Ok(out)
    }

    /// One job, finished long ago or not.
    pub fn job(&self, id: JobId) -> Result<Option<JobRecord>, JournalError> {
        Ok(self.select_jobs("WHERE id = ?1", [id])?.pop())
    }

    /// How many jobs the journal holds.
    pub fn job_count(&self) -> Result<i64, JournalError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
            .map_err(self.sql())
    }

    fn select_jobs<P: rusqlite::Params>(
        &self,
        tail: &str,
        params: P,
    ) -> Result<Vec<JobRecord>, JournalError> {
        self.select_jobs_with("spec", tail, params)
    }

    /// As `select_jobs`, with `spec` the column expression for the spec: `''` where a list
    /// needs none (a history page of jobs with 128 KiB specs read them all, for nothing).
    pub(super) fn select_jobs_with<P: rusqlite::Params>(
        &self,
        spec: &str,
        tail: &str,
        params: P,
    ) -> Result<Vec<JobRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare(&format!("SELECT id, name, team, priority, {spec}, state, submitted_at, updated_at, cost, user FROM jobs {tail}"))
            .map_err(self.sql())?;
        let rows = q
            .query_map(params, |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get::<_, String>(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get::<_, Option<String>>(9)?,
                ))
            })
            .map_err(self.sql())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, name, team, priority, spec, state, submitted_at, updated_at, cost, user) =
                row.map_err(self.sql())?;
            let state = state
                .parse()
                .map_err(|what| JournalError::Corrupt { id, what })?;
            out.push(JobRecord {
                id,
                name,
                team,
                priority,
                spec,
                state,
                submitted_at,
                updated_at,
                cost,
                user,
            });
        }
        Ok(out)
    }
}

type Reply = mpsc::Sender<Result<JobId, String>>;

/// The writer thread and the handle submitters use. Cloneable senders; one writer.
pub struct Journal {
    tx: Option<mpsc::Sender<(NewJob, Reply)>>,
    writer: Option<JoinHandle<()>>,
    pub path: PathBuf,
}

/// Per-submitter handle.
#[derive(Clone)]
pub struct Submitter {
    tx: mpsc::Sender<(NewJob, Reply)>,
}

impl Submitter {
    /// Returns once the job is committed to disk.
    pub fn submit(&self, job: NewJob) -> Result<JobId, JournalError> {
        let (reply, answer) = mpsc::channel();
        self.tx
            .send((job, reply))
            .map_err(|_| JournalError::Stopped)?;
        match answer.recv() {
            Ok(Ok(id)) => Ok(id),
            Ok(Err(e)) => Err(JournalError::Corrupt { id: 0, what: e }),
            Err(_) => Err(JournalError::Stopped),
        }
    }
}

impl Journal {
    /// Opens (creating or migrating) the database and starts the writer.
    pub fn start(path: &Path) -> Result<Journal, JournalError> {
        let mut store = Store::open(path)?;
        let (tx, rx) = mpsc::channel::<(NewJob, Reply)>();
        let writer = std::thread::Builder::new()
            .name("gantry-journal".to_string())
            .spawn(move || {
                // Group commit: wait for one request, then take all that queued meanwhile.
                while let Ok(first) = rx.recv() {
                    let mut batch = vec![first];
                    while batch.len() < 4096 {
                        match rx.try_recv() {
                            Ok(more) => batch.push(more),
                            Err(_) => break,
                        }
                    }
                    let jobs: Vec<NewJob> = batch.iter().map(|(j, _)| j.clone()).collect();
                    match store.submit_all(&jobs) {
                        Ok(ids) => {
                            for ((_, reply), id) in batch.into_iter().zip(ids) {
                                let _ = reply.send(Ok(id));
                            }
                        }
                        Err(e) => {
                            for (_, reply) in batch {
                                let _ = reply.send(Err(e.to_string()));
                            }
                        }
                    }
                }
            })
            .map_err(|e| JournalError::Corrupt {
                id: 0,
                what: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Journal {
            tx: Some(tx),
            writer: Some(writer),
            path: path.to_path_buf(),
        })
    }

    pub fn submitter(&self) -> Submitter {
        Submitter {
            tx: self.tx.clone().expect("journal is running"),
        }
    }

    /// Stops taking requests, finishes the queued ones, and joins the writer.
    pub fn stop(mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests;
