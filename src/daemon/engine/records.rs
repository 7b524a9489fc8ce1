//! The journal operations the state does through the engine, by name: the engine owns the
//! journal (`Store`) and is its one door — the state keeps its own records (events, tokens,
//! services, remote runs, cloud pools, timers) and reads the ledger and the bill through these,
//! never the store itself.

use super::Engine;
use crate::daemon::journal::TeamSpend;
use crate::daemon::journal::{
    ChargeRecord, ClosedCharge, CloudPoolRecord, EventRecord, HistoryQuery, JobId, JobRecord,
    JournalError, Queued, RemoteRunRecord, ReplicaRecord, ReportRecord, RunRecord, ServiceRecord,
    TimerRecord, TokenRecord,
};

impl Engine {
    // The event log.

    /// Records an event that is not a job transition (scaling, reclaim, restarts).
    pub fn add_event(
        &mut self,
        at: f64,
        job: Option<JobId>,
        kind: &str,
        detail: &str,
    ) -> Result<(), JournalError> {
        self.store.add_event(at, job, kind, detail)
    }

    /// The newest `limit` events (of one job, if given), oldest first.
    pub fn events(
        &self,
        job: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, JournalError> {
        self.store.events(job, limit)
    }

    /// The text of every event of `kind` at or after `since`, oldest first.
    pub fn event_details(&self, kind: &str, since: f64) -> Result<Vec<String>, JournalError> {
        self.store.event_details(kind, since)
    }

    // Finished jobs and their runs (the ledger).

    /// The jobs `q` asks for, newest change first, without their specs.
    pub fn history(&self, q: &HistoryQuery) -> Result<Vec<JobRecord>, JournalError> {
        self.store.history(q)
    }

    /// A job's runs, oldest first.
    pub fn runs(&self, job: JobId) -> Result<Vec<RunRecord>, JournalError> {
        self.store.runs(job)
    }

    /// The jobs submitted in `[since, until)`, with their first start and runs.
    pub fn queued(&self, since: f64, until: f64) -> Result<Vec<Queued>, JournalError> {
        self.store.queued(since, until)
    }

    // The bill.

    /// Billed runs that overlap `[since, until)`, clipped to it; open runs bill up to `now`.
    pub fn charges(
        &self,
        since: f64,
        until: f64,
        now: f64,
    ) -> Result<Vec<ChargeRecord>, JournalError> {
        self.store.charges(since, until, now)
    }

    /// Every job, in submission order: what a restarted daemon starts from.
    /// Per team and project: dollars and GPU-hours of finished runs inside `[since, ∞)`, and
    /// the whole dollars of those runs (their parts before `since` too).
    pub fn closed_spend(&self, since: f64) -> Result<Vec<TeamSpend>, JournalError> {
        self.store.closed_spend(since)
    }

    /// Per team and project, the whole spend of the runs that ended by `until` (with the last
    /// column of `closed_spend(until)`: every finished run once, whole).
    pub fn spend_before(
        &self,
        until: f64,
    ) -> Result<Vec<(String, Option<String>, f64)>, JournalError> {
        self.store.spend_before(until)
    }

    /// The charges closed since the last call, oldest first, and from now on each one closed
    /// until the next; `None` at the first call, or when more closed than the store keeps
    /// between calls (read the month's spend in full, `closed_spend`).
    pub fn take_closed(&mut self) -> Option<Vec<ClosedCharge>> {
        self.store.take_closed()
    }

    // API tokens.

    pub fn add_token(&mut self, t: &TokenRecord) -> Result<(), JournalError> {
        self.store.add_token(t)
    }

    pub fn tokens(&self) -> Result<Vec<TokenRecord>, JournalError> {
        self.store.tokens()
    }

    /// Marks the token whose hash is `hash` revoked at `at`.
    pub fn revoke_token(&mut self, hash: &str, at: f64) -> Result<(), JournalError> {
        self.store.revoke_token(hash, at)
    }

    // Runs on remote hosts, found again after a restart.

    /// A job's processes were handed to a remote backend.
    pub fn add_remote_run(&mut self, run: &RemoteRunRecord) -> Result<(), JournalError> {
        self.store.add_remote_run(run)
    }

    pub fn remove_remote_run(&mut self, job: JobId) -> Result<(), JournalError> {
        self.store.remove_remote_run(job)
    }

    // Services and their replicas.

    /// Writes a service's current version (a new one replaces the old).
    pub fn save_service(&mut self, s: &ServiceRecord) -> Result<(), JournalError> {
        self.store.save_service(s)
    }

    /// Forgets a service and which jobs were its replicas (the jobs stay in the journal).
    pub fn delete_service(&mut self, name: &str) -> Result<(), JournalError> {
        self.store.delete_service(name)
    }

    pub fn services(&self) -> Result<Vec<ServiceRecord>, JournalError> {
        self.store.services()
    }

    pub fn add_replica(&mut self, service: &str, r: &ReplicaRecord) -> Result<(), JournalError> {
        self.store.add_replica(service, r)
    }

    /// A replica's job has ended and is no longer the service's.
    pub fn drop_replica(&mut self, job: JobId) -> Result<(), JournalError> {
        self.store.drop_replica(job)
    }

    /// Every service's replicas: (service, replica).
    pub fn replicas(&self) -> Result<Vec<(String, ReplicaRecord)>, JournalError> {
        self.store.replicas()
    }

    // Cloud pools' settings, kept while what they bought lives.

    /// Records a cloud pool of the fleet in force (its settings replace those kept).
    pub fn save_cloud_pool(
        &mut self,
        key: &str,
        config: &str,
        at: f64,
    ) -> Result<(), JournalError> {
        self.store.save_cloud_pool(key, config, at)
    }

    /// Forgets a cloud pool whose cloud lists none of its instances any more.
    pub fn forget_cloud_pool(&mut self, key: &str) -> Result<(), JournalError> {
        self.store.forget_cloud_pool(key)
    }

    pub fn cloud_pools(&self) -> Result<Vec<CloudPoolRecord>, JournalError> {
        self.store.cloud_pools()
    }

    // What the experiment tracker owes jobs.

    pub fn owed_reports(&self, limit: usize) -> Result<Vec<ReportRecord>, JournalError> {
        self.store.owed_reports(limit)
    }

    pub fn report(&self, job: JobId) -> Result<Option<ReportRecord>, JournalError> {
        self.store.report(job)
    }

    pub fn report_sent(&mut self, r: &ReportRecord) -> Result<(), JournalError> {
        self.store.report_sent(r)
    }

    // Timers that outlive a restart, and the clock.

    pub fn set_timer(&mut self, t: &TimerRecord) -> Result<(), JournalError> {
        self.store.set_timer(t)
    }

    pub fn clear_timer(&mut self, key: &str) -> Result<(), JournalError> {
        self.store.clear_timer(key)
    }

    pub fn timers(&self) -> Result<Vec<TimerRecord>, JournalError> {
        self.store.timers()
    }

    /// Records how far the daemon's clock has come, so that a restart resumes there and bills
    /// runs that were open up to it (not just up to the last state change).
    pub fn save_clock(&mut self, at: f64) -> Result<(), JournalError> {
        self.store.save_clock(at)
    }

    // Many changes in one commit.

    /// Opens a batch: the writes until `end_batch` commit together, with one sync to disk
    /// instead of one each (a thousand Slurm nodes coming up write a line each). The writes
    /// that are all-or-none of their own stay so inside it (savepoints).
    pub fn begin_batch(&mut self) -> Result<(), JournalError> {
        self.store.begin_batch()
    }

    /// Commits the batch `begin_batch` opened.
    pub fn end_batch(&mut self) -> Result<(), JournalError> {
        self.store.end_batch()
    }
}
