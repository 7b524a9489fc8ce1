//! Budgets and the bill: spend per team this budget month, alerts, what a spent budget does
//! (notify, block, demote), and reports by team, project or job. Its own fields: the teams'
//! budgets and what was spent; it reads the engine and journals through it.

use crate::api::{JobState, Report, ReportBy, ReportRow, TeamRow};
use crate::config::fleet::{BudgetAction, TeamConfig};
use crate::daemon::calendar::Calendar;
use crate::daemon::engine::{BudgetGate, Engine, EngineError};
use crate::daemon::journal::JobId;
use std::collections::BTreeMap;

/// Every team's spend this budget month and ever, and each (team, project)'s ever.
pub(super) struct Billing {
    teams: Vec<TeamConfig>,
    budgets: Vec<TeamBudget>,
    /// Spend ever per (team, project; "" for none), kept as the teams' is.
    project_spend: BTreeMap<(String, String), ProjectSpend>,
    /// The engine's release count when the closed spend was last read.
    read_at: Option<u64>,
}

/// One team's spend in the current budget month.
#[derive(Clone, Debug, Default)]
struct TeamBudget {
    month: i64,
    /// Finished runs this month (re-read from the journal when runs end).
    closed_usd: f64,
    closed_gpu_h: f64,
    /// With the running jobs' share up to now.
    usd: f64,
    gpu_h: f64,
    /// Alert thresholds already announced this month.
    alerted: usize,
    /// The action at 100% is in force.
    enforced: bool,
    /// The whole spend of runs that ended before this month began (read when a month
    /// begins) and of those that ended in it: with the running jobs' since they started, the
    /// team's spend ever (`/metrics`' counter).
    before_month_usd: f64,
    closed_whole_usd: f64,
    total_usd: f64,
}

/// A team's project's spend ever: runs that ended before this month, those that ended in it,
/// and with the running ones' since they started.
#[derive(Clone, Debug, Default)]
struct ProjectSpend {
    before_month_usd: f64,
    closed_whole_usd: f64,
    total_usd: f64,
}

/// What an accounting said: alerts (journaled already, for the event log) and the teams whose
/// budget just began to demote them.
#[derive(Default)]
pub(super) struct Accounted {
    pub said: Vec<String>,
    pub demote: Vec<usize>,
}

impl Billing {
    pub(super) fn new(teams: &[TeamConfig]) -> Billing {
        Billing {
            teams: teams.to_vec(),
            budgets: vec![TeamBudget::default(); teams.len()],
            project_spend: BTreeMap::new(),
            read_at: None,
        }
    }

    /// Dollars spent ever per team and project ("" for none): finished runs, and running
    /// ones so far.
    pub(super) fn project_spend(&self) -> Vec<(String, String, f64)> {
        self.project_spend
            .iter()
            .map(|((team, project), s)| (team.clone(), project.clone(), s.total_usd))
            .collect()
    }

    /// Each team's row of the snapshot, as far as its budget goes.
    pub(super) fn team_rows(&self) -> Vec<TeamRow> {
        self.teams
            .iter()
            .zip(&self.budgets)
            .map(|(t, b)| TeamRow {
                name: t.name.clone(),
                cohort: t.cohort.clone().unwrap_or_default(),
                weight: t.weight,
                guaranteed: t.guaranteed,
                borrow_limit: t.borrow_limit,
                budget_monthly_usd: t.budget_monthly_usd,
                budget_monthly_gpu_hours: t.budget_monthly_gpu_hours,
                spend_month_usd: b.usd,
                spend_total_usd: b.total_usd,
                gpu_hours_month: b.gpu_h,
                budget_used: budget_used(t, b.usd, b.gpu_h),
                budget_action: t.budget_action.to_string(),
                ..TeamRow::default()
            })
            .collect()
    }

    /// This month's spend per team, alerts at each threshold, and the action at 100%:
    /// `block` refuses the team's new submissions, `demote` moves its new and pending jobs to
    /// the lowest class. A new month lifts both.
    pub(super) fn account(
        &mut self,
        engine: &mut Engine,
        now: f64,
        calendar: &Calendar,
    ) -> Result<Accounted, EngineError> {
        let mut out = Accounted::default();
        let this = calendar.month(now);
        let (month, start) = (this.key, this.start);
        let releases = engine.releases();
        let rollover = self.budgets.iter().any(|b| b.month != month);
        let first = self.read_at.is_none();
        // The runs that ended since the last look, as the journal closed them: added to the
        // month's sums one by one. The sums are read from the journal in full only at open,
        // at a new month, or when more ended unlooked than the journal keeps.
        let taken = engine.take_closed();
        let full = rollover || first || taken.is_none();
        if full {
            let closed = engine.closed_spend(start)?;
            // Alerts this month already announced, by this daemon or before a restart: the
            // journal remembers, so a restart does not announce them again.
            let (announced, before) = if rollover || first {
                let store = &*engine;
                (
                    store.event_details("budget", start)?,
                    Some(store.spend_before(start)?),
                )
            } else {
                (Vec::new(), None)
            };
            for (i, b) in self.budgets.iter_mut().enumerate() {
                if b.month != month || first {
                    let cfg = &self.teams[i];
                    let alerted = cfg
                        .alerts()
                        .iter()
                        .take_while(|&&th| {
                            let said = alert_prefix(&cfg.name, th);
                            announced.iter().any(|d| d.starts_with(&said))
                        })
                        .count();
                    *b = TeamBudget {
                        month,
                        alerted,
                        ..TeamBudget::default()
                    };
                }
                let name = &self.teams[i].name;
                // Folded from +0.0: an empty f64 sum is -0.0, which tables print as "-0.00".
                if let Some(before) = &before {
                    b.before_month_usd = before
                        .iter()
                        .filter(|c| &c.0 == name)
                        .fold(0.0, |a, c| a + c.2);
                }
                let mine = || closed.iter().filter(|c| &c.0 == name);
                b.closed_usd = mine().fold(0.0, |a, c| a + c.2);
                b.closed_gpu_h = mine().fold(0.0, |a, c| a + c.3);
                b.closed_whole_usd = mine().fold(0.0, |a, c| a + c.4);
            }
            // The same per team and project, for `/metrics`' counters.
            if let Some(before) = &before {
                self.project_spend.clear();
                for (team, project, usd) in before {
                    self.project_spend
                        .entry(spend_key(team, project))
                        .or_default()
                        .before_month_usd = *usd;
                }
            }
            for p in self.project_spend.values_mut() {
                p.closed_whole_usd = 0.0;
            }
            for (team, project, _, _, whole) in &closed {
                self.project_spend
                    .entry(spend_key(team, project))
                    .or_default()
                    .closed_whole_usd = *whole;
            }
        } else {
            // What `closed_spend(start)` sums, for these runs alone.
            for c in taken.iter().flatten().filter(|c| c.ended_at > start) {
                let month_h = (c.ended_at - c.started_at.max(start)) / 3600.0;
                let whole = (c.ended_at - c.started_at) * c.dollars_per_hour / 3600.0;
                if let Some(b) = self
                    .teams
                    .iter()
                    .position(|t| t.name == c.team)
                    .and_then(|t| self.budgets.get_mut(t))
                {
                    b.closed_usd += month_h * c.dollars_per_hour;
                    b.closed_gpu_h += month_h * c.gpus;
                    b.closed_whole_usd += whole;
                }
                self.project_spend
                    .entry(spend_key(&c.team, &c.project))
                    .or_default()
                    .closed_whole_usd += whole;
            }
        }
        if full || self.read_at != Some(releases) {
            for t in 0..self.budgets.len() {
                engine.set_budget_gate(t, None);
            }
            self.read_at = Some(releases);
        }
        for b in &mut self.budgets {
            b.usd = b.closed_usd;
            b.gpu_h = b.closed_gpu_h;
            b.total_usd = b.before_month_usd + b.closed_whole_usd;
        }
        for p in self.project_spend.values_mut() {
            p.total_usd = p.before_month_usd + p.closed_whole_usd;
        }
        for j in engine.live_jobs() {
            let (Some(p), Some(t)) = (&j.placement, j.started_at) else {
                continue;
            };
            let hours = (now - t.max(start)).max(0.0) / 3600.0;
            let whole = p.price_per_hour * (now - t).max(0.0) / 3600.0;
            if let Some(b) = self.budgets.get_mut(j.team) {
                b.usd += p.price_per_hour * hours;
                b.gpu_h += j.request.total_gpu_milli() as f64 / 1000.0 * hours;
                b.total_usd += whole;
            }
            let key = (
                self.teams
                    .get(j.team)
                    .map(|t| t.name.clone())
                    .unwrap_or_default(),
                j.spec.project.clone().unwrap_or_default(),
            );
            self.project_spend.entry(key).or_default().total_usd += whole;
        }
        for t in 0..self.budgets.len() {
            let cfg = self.teams[t].clone();
            let Some(used) = budget_used(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h) else {
                continue;
            };
            let alerts = cfg.alerts();
            while self.budgets[t].alerted < alerts.len() && used >= alerts[self.budgets[t].alerted]
            {
                let th = alerts[self.budgets[t].alerted];
                self.budgets[t].alerted += 1;
                let what = format!(
                    "{} ({})",
                    alert_prefix(&cfg.name, th),
                    budget_text(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h)
                );
                engine.add_event(now, None, "budget", &what)?;
                out.said.push(what);
            }
            if used >= 1.0 && cfg.budget_action != BudgetAction::Notify {
                let first = !self.budgets[t].enforced;
                self.budgets[t].enforced = true;
                let gate = match cfg.budget_action {
                    BudgetAction::Block => BudgetGate::Block(format!(
                        "team `{}` has spent its monthly budget ({}); budget_action = block refuses new jobs until the month ends or the budget is raised in the fleet file",
                        cfg.name,
                        budget_text(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h)
                    )),
                    _ => BudgetGate::Demote,
                };
                engine.set_budget_gate(t, Some(gate));
                if first && cfg.budget_action == BudgetAction::Demote {
                    out.demote.push(t);
                }
            }
        }
        Ok(out)
    }
}

/// Moves a team's pending jobs to the lowest class, named `lowest` (its budget is spent):
/// how many.
pub(super) fn demote_pending(
    engine: &mut Engine,
    now: f64,
    team: usize,
    lowest: &str,
) -> Result<usize, EngineError> {
    let low = engine.lowest_class();
    let ids: Vec<JobId> = engine
        .jobs()
        .filter(|j| {
            j.team == team
                && j.class != low
                && matches!(j.state, JobState::Pending | JobState::Held)
        })
        .map(|j| j.id)
        .collect();
    for id in &ids {
        // Down to the lowest class: the budget's own doing, never refused.
        engine.set_priority(*id, lowest, now, true)?;
    }
    Ok(ids.len())
}

/// The bill for `[since, until)`, grouped `by` team, project, job, user or experiment.
pub(super) fn report(
    engine: &mut Engine,
    now: f64,
    calendar: &Calendar,
    simulated: bool,
    (since, until, by): (f64, f64, ReportBy),
) -> Result<Report, EngineError> {
    let charges = engine.charges(since, until.min(now), now)?;
    // Who submitted each job charged, or the experiment it reports to (by user or experiment
    // only: one read per job).
    let mut of_job: std::collections::HashMap<JobId, String> = Default::default();
    if matches!(by, ReportBy::User | ReportBy::Experiment) {
        for c in &charges {
            if let std::collections::hash_map::Entry::Vacant(e) = of_job.entry(c.job) {
                let record = engine.job_record(c.job)?;
                let key = match by {
                    ReportBy::User => record.and_then(|r| r.user),
                    _ => record
                        .and_then(|r| crate::spec::parse("journal", r.spec.as_bytes()).ok())
                        .and_then(|s| s.experiment),
                };
                e.insert(key.unwrap_or_else(|| match by {
                    ReportBy::User => "(unknown)".into(),
                    _ => "(none)".into(),
                }));
            }
        }
    }
    let mut rows: BTreeMap<String, ReportRow> = BTreeMap::new();
    for c in &charges {
        let key = match by {
            ReportBy::Team => c.team.clone(),
            ReportBy::Project => c.project.clone().unwrap_or_else(|| "(none)".into()),
            ReportBy::Job => c.job.to_string(),
            ReportBy::User | ReportBy::Experiment => {
                of_job.get(&c.job).cloned().unwrap_or_default()
            }
        };
        let row = rows.entry(key.clone()).or_insert_with(|| ReportRow {
            key,
            team: c.team.clone(),
            ..ReportRow::default()
        });
        if row.team != c.team {
            // A project shared by several teams.
            row.team = "*".to_string();
        }
        let usd = c.dollars();
        row.spend_usd += usd;
        row.gpu_hours += c.gpu_hours();
        match c.capacity.as_str() {
            "spot" => row.spot_usd += usd,
            "reserved" => row.reserved_usd += usd,
            _ => row.on_demand_usd += usd,
        }
        row.runs += 1;
    }
    let mut rows: Vec<ReportRow> = rows.into_values().collect();
    rows.sort_by(|a, b| b.spend_usd.total_cmp(&a.spend_usd).then(a.key.cmp(&b.key)));
    let queues = queue_rows(&engine.queued(since, until.min(now) + 1.0)?);
    Ok(Report {
        simulated,
        since,
        until: until.min(now),
        since_time: calendar.rfc3339(since),
        until_time: calendar.rfc3339(until.min(now)),
        by,
        total_usd: rows.iter().map(|r| r.spend_usd).sum(),
        total_gpu_hours: rows.iter().map(|r| r.gpu_hours).sum(),
        rows,
        queues,
    })
}

/// Each team's and class's waits and preemptions from the jobs submitted in a window.
fn queue_rows(jobs: &[crate::daemon::journal::Queued]) -> Vec<crate::api::QueueRow> {
    let mut by: BTreeMap<(String, String), (crate::api::QueueRow, Vec<f64>)> = BTreeMap::new();
    for j in jobs {
        let (row, waits) = by
            .entry((j.team.clone(), j.class.clone()))
            .or_insert_with(|| {
                (
                    crate::api::QueueRow {
                        team: j.team.clone(),
                        class: j.class.clone(),
                        ..crate::api::QueueRow::default()
                    },
                    Vec::new(),
                )
            });
        row.jobs += 1;
        row.runs += j.runs;
        row.preempted += j.preempted;
        if let Some(start) = j.first_start {
            row.started += 1;
            waits.push((start - j.submitted_at).max(0.0));
        }
    }
    by.into_values()
        .map(|(mut row, mut waits)| {
            waits.sort_by(f64::total_cmp);
            let at = |q: f64| {
                waits
                    .get(((waits.len() as f64 - 1.0) * q).round() as usize)
                    .copied()
                    .unwrap_or(0.0)
            };
            if !waits.is_empty() {
                row.wait_mean_s = waits.iter().sum::<f64>() / waits.len() as f64;
                row.wait_p50_s = at(0.5);
                row.wait_p90_s = at(0.9);
            }
            row.preemption_rate = f64::from(row.preempted) / f64::from(row.runs.max(1));
            row
        })
        .collect()
}

/// How much of its monthly budget a team has used (the larger of dollars and GPU-hours), or
/// `None` without a budget.
fn budget_used(t: &TeamConfig, usd: f64, gpu_h: f64) -> Option<f64> {
    let a = t.budget_monthly_usd.map(|b| usd / b.max(1e-9));
    let g = t.budget_monthly_gpu_hours.map(|b| gpu_h / b.max(1e-9));
    match (a, g) {
        (Some(a), Some(g)) => Some(a.max(g)),
        (a, g) => a.or(g),
    }
}

fn budget_text(t: &TeamConfig, usd: f64, gpu_h: f64) -> String {
    let mut parts = Vec::new();
    if let Some(b) = t.budget_monthly_usd {
        parts.push(format!("${usd:.0} of ${b:.0}"));
    }
    if let Some(b) = t.budget_monthly_gpu_hours {
        parts.push(format!("{gpu_h:.0} of {b:.0} GPU-h"));
    }
    parts.join(", ")
}

/// How a budget alert's event begins: one wording for announcing it and for finding it again.
fn alert_prefix(team: &str, threshold: f64) -> String {
    format!(
        "budget: team {team} at {:.0}% of its monthly budget",
        threshold * 100.0
    )
}

/// The key of a team's and project's spend for `/metrics` (no project: "").
fn spend_key(team: &str, project: &Option<String>) -> (String, String) {
    (team.to_string(), project.clone().unwrap_or_default())
}
