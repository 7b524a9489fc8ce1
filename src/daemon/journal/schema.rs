//! The journal's schema, as the migrations that build it: `Store::migrate` applies those a
//! database lacks, and refuses a database newer than this build.

/// Migrations, in order; the database records how many it has applied.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: jobs and events
    "CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT,
        team TEXT NOT NULL,
        priority TEXT NOT NULL,
        spec TEXT NOT NULL,
        state TEXT NOT NULL,
        submitted_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        job INTEGER,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL
    );",
    // 2: accrued cost per job
    "ALTER TABLE jobs ADD COLUMN cost REAL NOT NULL DEFAULT 0;",
    // 3: API tokens (only their SHA-256 is kept)
    "CREATE TABLE tokens (
        hash TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        team TEXT,
        label TEXT NOT NULL,
        created_at REAL NOT NULL
    );",
    // 4: what each run cost: one row per run of a job on its placement, open while it runs
    "CREATE TABLE charges (
        job INTEGER NOT NULL,
        team TEXT NOT NULL,
        project TEXT,
        capacity TEXT NOT NULL,
        gpus REAL NOT NULL,
        dollars_per_hour REAL NOT NULL,
        started_at REAL NOT NULL,
        ended_at REAL
    );
    CREATE INDEX charges_job ON charges(job, ended_at);
    CREATE INDEX charges_end ON charges(ended_at);
    CREATE TABLE clock (id INTEGER PRIMARY KEY CHECK (id = 1), at REAL NOT NULL);",
    // 5: processes of jobs running on the local host (their process groups, for a restart)
    "CREATE TABLE local_runs (job INTEGER PRIMARY KEY, pgid INTEGER NOT NULL);",
    // 6: what a restarted daemon needs to re-adopt a local job: where it runs and since when
    "ALTER TABLE local_runs ADD COLUMN placement TEXT;
    ALTER TABLE local_runs ADD COLUMN started_at REAL;",
    // 7: the run's own token, which proves after a restart that a process group is the run's
    "ALTER TABLE local_runs ADD COLUMN token TEXT;",
    // 8: tokens that expire or are revoked (wall-clock Unix seconds)
    "ALTER TABLE tokens ADD COLUMN expires_at REAL;
    ALTER TABLE tokens ADD COLUMN revoked_at REAL;",
    // 9: a submission's Idempotency-Key (scoped to its caller), the digest of what it sent,
    // and the job it made: a retry after a lost reply gets that job, not a second one
    "CREATE TABLE idempotency (
        key TEXT PRIMARY KEY,
        digest TEXT NOT NULL,
        job INTEGER NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX idempotency_at ON idempotency(at);",
    // 10: jobs running on a remote backend (SSH hosts): the run's token and where it runs,
    // so a restarted daemon expects them there and re-adopts them when the host answers
    "CREATE TABLE remote_runs (
        job INTEGER PRIMARY KEY,
        token TEXT NOT NULL,
        placement TEXT NOT NULL,
        started_at REAL NOT NULL
    );",
    // 11: the names of a run's nodes, rank order: node ids change when hosts are added to or
    // removed from the fleet file, names do not
    "ALTER TABLE remote_runs ADD COLUMN nodes TEXT;",
    // 12: where each start of the daemon pinned its clock to the wall clock (Unix seconds),
    // so its times can be said as calendar dates (budget months, reports, RFC 3339)
    "CREATE TABLE calendar (clock REAL PRIMARY KEY, unix REAL NOT NULL);",
    // 13: each run's history (a charge is one run): the names of its nodes, rank order, and
    // how it ended — the moves out of running, with their reasons (`sacct`'s record)
    "ALTER TABLE charges ADD COLUMN nodes TEXT;
     ALTER TABLE charges ADD COLUMN ended TEXT;",
    // 14: who submitted each job (the Unix user on the socket, a token's label over TCP)
    "ALTER TABLE jobs ADD COLUMN user TEXT;
     CREATE INDEX jobs_user ON jobs(user);",
    // 15: services (`gantry serve up`): the file each version runs, its endpoint, and the
    // jobs that are its replicas (each with the port it serves on)
    "CREATE TABLE services (
        name TEXT PRIMARY KEY,
        file TEXT NOT NULL,
        spec BLOB NOT NULL,
        team TEXT NOT NULL,
        user TEXT,
        priority TEXT,
        endpoint TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE service_replicas (
        job INTEGER PRIMARY KEY,
        service TEXT NOT NULL,
        replica INTEGER NOT NULL,
        port INTEGER NOT NULL,
        version INTEGER NOT NULL,
        ondemand INTEGER NOT NULL DEFAULT 0
    );",
    // 16: the Unix account a token's jobs run as (`gantry token create --user`): until now a
    // token's label stood for its user, so a token labelled `root` was taken for root
    "ALTER TABLE tokens ADD COLUMN user TEXT;",
    // 17: a service's endpoint may ask for a bearer token (`serve up --auth`): its SHA-256
    "ALTER TABLE services ADD COLUMN auth TEXT;",
    // 18: the cloud pools this journal's daemons have bought from (their settings, as the
    // fleet file had them): a pool that leaves the file, or that a daemon started with another
    // file lacks, still has its instances found and given back, and listed by `cloud ls`; and
    // the timers an operator's promise depends on (a node's empty-since, a pool passed over),
    // on the wall clock, so that a restarting daemon never starts them again
    "CREATE TABLE cloud_pools (
        key TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        since REAL NOT NULL
    );
    CREATE TABLE timers (
        key TEXT PRIMARY KEY,
        unix REAL NOT NULL,
        count INTEGER NOT NULL DEFAULT 0,
        why TEXT NOT NULL DEFAULT ''
    );",
    // 19: what the experiment tracker owes each job that names an experiment: its MLflow run
    // (where one was made after submit), the job state last sent, and whether its end was
    // sent. Written with the job in the same commit, so a tracker that is down, or a daemon
    // that restarts, loses nothing it owes.
    "CREATE TABLE experiment_reports (
        job INTEGER PRIMARY KEY,
        run TEXT,
        experiment_id TEXT,
        sent TEXT NOT NULL DEFAULT '',
        done INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX experiment_reports_owed ON experiment_reports(done, job);",
];
