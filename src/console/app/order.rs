//! Each view's columns and the order of its rows: `<`/`>` choose the column, `o` reverses,
//! shift and a column's letter choose it directly (again: the other way). The Jobs view's
//! default is the queue: waiting jobs by position first, then what runs, then what ended.

use super::*;
use crate::api::services::ServiceRow;
use crate::api::{PoolRow, TeamRow};
use crate::console::table::{Col, Sort};
use std::cmp::Ordering;
use std::sync::Arc;

/// The Jobs view's columns (the order of `job_cmp`'s match).
pub const JOB_COLS: [Col; 14] = [
    Col::fixed("id", 'I', 5, 0),
    Col::text("name", 'N', 10, 18, 0),
    Col::text("team", 'T', 6, 12, 6),
    Col::fixed("class", 'C', 10, 3),
    Col::fixed("state", 'S', 9, 0),
    Col::fixed("GPUs", 'U', 7, 0),
    Col::fixed("age", 'A', 6, 4).right(),
    Col::fixed("pos", 'O', 4, 8).right(),
    // When a waiting job starts if the queue stays as it is (`~14:20`, `>3h`, `never: held`).
    Col::fixed("ETA", 'Z', 12, 7),
    Col::fixed("$/h", 'D', 7, 7).right(),
    Col::fixed("cost", 'M', 8, 5).right(),
    // Times it was started again after its own failures (`job_recovery`), as k9s's RESTARTS.
    Col::fixed("restarts", 'E', 8, 9).right(),
    // The MLflow experiment its run is reported to: the first to go when space is short
    // (the filter `/experiment=` and the job's detail have it too).
    Col::text("experiment", 'X', 8, 16, 10),
    Col::text("where / why pending", 'W', 20, 64, 0),
];

/// The Jobs view's experiment column (hidden where no job reports to one).
pub const EXPERIMENT_COL: usize = 12;
const _: () = assert!(JOB_COLS[EXPERIMENT_COL].key == 'X');

/// The Jobs view's ETA column (hidden where no job has an estimate).
pub const ETA_COL: usize = 8;
const _: () = assert!(JOB_COLS[ETA_COL].key == 'Z');

/// The Fleet view's columns.
pub const POOL_COLS: [Col; 8] = [
    Col::text("pool", 'O', 14, 24, 0),
    Col::fixed("GPU", 'U', 10, 0),
    Col::fixed("capacity", 'C', 9, 3),
    Col::fixed("nodes", 'N', 6, 0),
    Col::fixed("busy", 'B', 7, 0).right(),
    // A bar: shrinks to 10 cells before the capacity column is dropped, grows to 16.
    Col {
        title: "load",
        key: 'L',
        min: 8,
        want: 10,
        drop: 2,
        flex: true,
        right: false,
    },
    Col::fixed("$/node-h", 'D', 8, 1).right(),
    // A bought pool's doings (nodes coming, passed over, idle ones going): the first to go
    // when the terminal is narrow (the pool's detail says it per node).
    Col::text("cloud", 'E', 16, 60, 9),
];

/// The Teams view's columns.
pub const TEAM_COLS: [Col; 12] = [
    Col::text("team", 'T', 8, 16, 0),
    Col::fixed("cohort", 'C', 9, 7),
    Col::fixed("weight", 'W', 6, 8).right(),
    Col::text("quota", 'Q', 6, 12, 0),
    Col::fixed("GPUs", 'U', 6, 0).right(),
    Col::fixed("borrowed", 'B', 8, 4).right(),
    Col::fixed("lent", 'L', 6, 5).right(),
    Col::fixed("use/weight", 'F', 13, 6).right(),
    Col::fixed("run", 'N', 4, 0).right(),
    Col::fixed("pend", 'E', 5, 0).right(),
    Col::fixed("burn", 'X', 8, 3).right(),
    Col::text("spent this month / budget", 'M', 14, 28, 0),
];

/// The Services view's columns.
pub const SERVICE_COLS: [Col; 11] = [
    Col::text("service", 'S', 8, 20, 0),
    Col::fixed("team", 'T', 8, 8),
    Col::fixed("ver", 'V', 4, 9).right(),
    Col::text("endpoint", 'E', 15, 22, 7),
    Col::fixed("ready", 'Y', 6, 0).right(),
    Col::fixed("QPS", 'Q', 7, 0).right(),
    Col::fixed("p50 ms", 'F', 7, 5).right(),
    Col::fixed("p99 ms", 'N', 7, 3).right(),
    Col::fixed("GPUs", 'U', 5, 4).right(),
    Col::fixed("$/h", 'D', 9, 6).right(),
    Col::text("status · last scaling", 'L', 16, 30, 0),
];

/// The columns of a view's table (none for the Overview and Events).
pub fn columns(view: View) -> &'static [Col] {
    view.tab().columns()
}

/// GPUs a job row asks for, as a number ("2×8" is 16, "0.50" a half, a MIG slice a fraction).
pub(super) fn row_gpus(j: &JobRow) -> f64 {
    if let Some((n, g)) = j.gpus.split_once('×') {
        return n.parse::<f64>().unwrap_or(0.0) * g.parse::<f64>().unwrap_or(0.0);
    }
    j.gpus.parse().unwrap_or_else(|_| {
        j.gpus
            .split_once("g.")
            .and_then(|(c, _)| c.parse::<f64>().ok())
            .map_or(0.0, |c| c / 7.0)
    })
}

/// Where a state stands in the queue order: waiting first (what an on-call reads first),
/// then running, then ended.
fn queue_rank(state: &str) -> u8 {
    match state {
        "pending" => 0,
        "held" => 1,
        "running" | "preempting" => 2,
        _ => 3,
    }
}

/// A row's start estimate as a sort key: soonest first, then those later than what was
/// looked at, then those that will not start, then rows without one.
fn eta_key(j: &JobRow) -> f64 {
    match j.eta.as_deref() {
        Some(e) if e.never.is_some() => 1e300,
        Some(e) => e.at_s.or(e.later_than_s.map(|t| t + 1e12)).unwrap_or(1e299),
        None => f64::INFINITY,
    }
}

fn job_cmp(col: usize, a: &JobRow, b: &JobRow, now: f64) -> Ordering {
    match col {
        0 => a.id.cmp(&b.id),
        1 => a.name.cmp(&b.name),
        2 => a.team.cmp(&b.team),
        3 => a.class.cmp(&b.class),
        4 => queue_rank(&a.state).cmp(&queue_rank(&b.state)),
        5 => row_gpus(a).total_cmp(&row_gpus(b)),
        6 => a.age(now).total_cmp(&b.age(now)),
        7 => a
            .position
            .unwrap_or(usize::MAX)
            .cmp(&b.position.unwrap_or(usize::MAX)),
        8 => eta_key(a).total_cmp(&eta_key(b)),
        9 => a.dollars_per_hour.total_cmp(&b.dollars_per_hour),
        10 => a.cost_at(now).total_cmp(&b.cost_at(now)),
        11 => a.restarts.cmp(&b.restarts),
        12 => a.experiment.cmp(&b.experiment),
        _ => a.detail.cmp(&b.detail),
    }
}

fn pool_cmp(col: usize, a: &PoolRow, b: &PoolRow) -> Ordering {
    let busy = |p: &PoolRow| p.gpus_busy as f64 / p.gpus.max(1) as f64;
    match col {
        0 => a.path.cmp(&b.path),
        1 => a.model.cmp(&b.model),
        2 => a.capacity.cmp(&b.capacity),
        3 => a.nodes.cmp(&b.nodes),
        4 => a.gpus_busy.cmp(&b.gpus_busy),
        5 => busy(a).total_cmp(&busy(b)),
        6 => a.dollars_per_hour.total_cmp(&b.dollars_per_hour),
        _ => a.notes.cmp(&b.notes),
    }
}

fn team_cmp(col: usize, a: &TeamRow, b: &TeamRow) -> Ordering {
    match col {
        0 => a.name.cmp(&b.name),
        1 => a.cohort.cmp(&b.cohort),
        2 => a.weight.total_cmp(&b.weight),
        3 => a.guaranteed.cmp(&b.guaranteed),
        4 => a.used_gpus.total_cmp(&b.used_gpus),
        5 => a.borrowed_gpus.total_cmp(&b.borrowed_gpus),
        6 => a.lent_gpus.total_cmp(&b.lent_gpus),
        7 => a.fair_share_rank.cmp(&b.fair_share_rank),
        8 => a.running.cmp(&b.running),
        9 => a.pending.cmp(&b.pending),
        10 => a.burn_per_hour.total_cmp(&b.burn_per_hour),
        _ => a
            .budget_used
            .unwrap_or(-1.0)
            .total_cmp(&b.budget_used.unwrap_or(-1.0))
            .then(a.spend_month_usd.total_cmp(&b.spend_month_usd)),
    }
}

fn service_cmp(col: usize, a: &ServiceRow, b: &ServiceRow) -> Ordering {
    let ms = |v: Option<f64>| v.unwrap_or(-1.0);
    match col {
        0 => a.name.cmp(&b.name),
        1 => a.team.cmp(&b.team),
        2 => a.version.cmp(&b.version),
        3 => a.endpoint.cmp(&b.endpoint),
        4 => (a.ready, a.wanted).cmp(&(b.ready, b.wanted)),
        5 => a.qps.total_cmp(&b.qps),
        6 => ms(a.latency_p50_ms).total_cmp(&ms(b.latency_p50_ms)),
        7 => ms(a.latency_p99_ms).total_cmp(&ms(b.latency_p99_ms)),
        8 => a.gpus.total_cmp(&b.gpus),
        9 => a.dollars_per_hour.total_cmp(&b.dollars_per_hour),
        _ => a.status.cmp(&b.status),
    }
}

fn directed(o: Ordering, s: Sort) -> Ordering {
    if s.desc {
        o.reverse()
    } else {
        o
    }
}

/// The Jobs view's rows: the snapshot in queue order, or those a filter or a column order
/// keeps, in that order. The order is computed once per snapshot, order and filter (a
/// 100,000-job sort costs milliseconds; a key press or a frame must not pay it).
pub(super) enum Rows<'a> {
    /// The daemon's list as it came: already in queue order (pending and held first).
    Queue { all: &'a [Arc<JobRow>] },
    /// Indices into the snapshot's jobs.
    Kept {
        all: &'a [Arc<JobRow>],
        order: std::rc::Rc<Vec<u32>>,
    },
}

impl<'a> Rows<'a> {
    pub(super) fn len(&self) -> usize {
        match self {
            Rows::Queue { all } => all.len(),
            Rows::Kept { order, .. } => order.len(),
        }
    }
    pub(super) fn get(&self, i: usize) -> Option<&'a JobRow> {
        match self {
            Rows::Queue { all } => all.get(i).map(|j| &**j),
            Rows::Kept { all, order } => order
                .get(i)
                .and_then(|&k| all.get(k as usize))
                .map(|j| &**j),
        }
    }
    pub(super) fn position(&self, id: i64) -> Option<usize> {
        (0..self.len()).find(|&i| self.get(i).is_some_and(|j| j.id == id))
    }
}

/// What a computed order was computed for: the snapshot's job list (its buffer, length and
/// version), the column order and the filter.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct OrderKey {
    jobs_at: usize,
    jobs: usize,
    version: u64,
    sort: Option<Sort>,
    filter: Option<String>,
}

/// Which snapshot's job list (its buffer, length and version) a count was made of.
pub(super) type SnapKey = (usize, usize, u64);

/// The Jobs view's last computed order.
#[derive(Clone, Debug)]
pub(super) enum Computed {
    Queue,
    Kept(std::rc::Rc<Vec<u32>>),
}

impl App {
    /// The Jobs view's rows under its filter and order.
    pub(super) fn rows<'a>(&self, snap: &'a Snapshot) -> Rows<'a> {
        let key = OrderKey {
            jobs_at: snap.jobs.as_ptr() as usize,
            jobs: snap.jobs.len(),
            version: snap.version,
            sort: self.sorts[View::Jobs],
            filter: self.jobs.filter.as_ref().map(|f| f.text.clone()),
        };
        let mut cache = self.row_order.borrow_mut();
        let computed = match cache.as_ref() {
            Some((k, c)) if *k == key => c.clone(),
            _ => {
                let c = self.compute_rows(snap);
                *cache = Some((key, c.clone()));
                c
            }
        };
        match computed {
            Computed::Queue => Rows::Queue { all: &snap.jobs },
            Computed::Kept(order) => Rows::Kept {
                all: &snap.jobs,
                order,
            },
        }
    }

    /// How many jobs run: counted once per snapshot (100,000 rows are 20 MB to walk, too much
    /// for every frame of the Overview).
    pub(super) fn running_jobs(&self, snap: &Snapshot) -> usize {
        let key = (snap.jobs.as_ptr() as usize, snap.jobs.len(), snap.version);
        match self.running.get() {
            Some((k, n)) if k == key => n,
            _ => {
                let n = snap.jobs.iter().filter(|j| j.state == "running").count();
                self.running.set(Some((key, n)));
                n
            }
        }
    }

    fn compute_rows(&self, snap: &Snapshot) -> Computed {
        let sort = self.sorts[View::Jobs];
        // The daemon sends pending, held, running, ended, each in queue order (a daemon
        // before that sent running first: sorted here, stably, into the same order).
        let daemon_order = snap
            .jobs
            .windows(2)
            .all(|w| queue_rank(&w[0].state) <= queue_rank(&w[1].state));
        if self.jobs.filter.is_none() && sort.is_none() && daemon_order {
            return Computed::Queue;
        }
        let mut kept: Vec<u32> = (0..snap.jobs.len() as u32)
            .filter(|&k| {
                self.jobs
                    .filter
                    .as_ref()
                    .is_none_or(|f| f.matches_job(&snap.jobs[k as usize]))
            })
            .collect();
        let now = snap.now;
        let job = |k: &u32| &snap.jobs[*k as usize];
        match sort {
            Some(s) => kept.sort_by(|a, b| {
                let (a, b) = (job(a), job(b));
                directed(job_cmp(s.col, a, b, now), s).then_with(|| a.id.cmp(&b.id))
            }),
            None => kept.sort_by_key(|k| queue_rank(&job(k).state)),
        }
        Computed::Kept(std::rc::Rc::new(kept))
    }

    /// Pools the Fleet view lists under its filter and order (indices into the snapshot's).
    pub(super) fn visible_pools(&self, snap: &Snapshot) -> Vec<usize> {
        let mut shown: Vec<usize> = (0..snap.pools.len())
            .filter(|&i| {
                let p = &snap.pools[i];
                self.fleet.filter.as_ref().is_none_or(|f| {
                    f.matches_text(&format!("{} {} {}", p.path, p.model, p.capacity))
                })
            })
            .collect();
        if let Some(s) = self.sorts[View::Fleet] {
            shown.sort_by(|&a, &b| directed(pool_cmp(s.col, &snap.pools[a], &snap.pools[b]), s));
        }
        shown
    }

    /// The Teams view's rows in its order.
    pub(super) fn team_rows<'a>(&self, snap: &'a Snapshot) -> Vec<&'a TeamRow> {
        let mut rows: Vec<&TeamRow> = snap.teams.iter().collect();
        if let Some(s) = self.sorts[View::Teams] {
            rows.sort_by(|a, b| directed(team_cmp(s.col, a, b), s));
        }
        rows
    }

    pub(super) fn service_rows<'a>(&self, snap: &'a Snapshot) -> Vec<&'a ServiceRow> {
        let mut rows: Vec<&ServiceRow> = snap.services.iter().collect();
        if let Some(s) = self.sorts[View::Services] {
            rows.sort_by(|a, b| directed(service_cmp(s.col, a, b), s));
        }
        rows
    }

    /// The Events view lists the oldest first (after `o`).
    pub(super) fn events_oldest_first(&self) -> bool {
        self.sorts[View::Events].is_some_and(|s| !s.desc)
    }

    /// `<` (step -1), `>` (+1): order the view by the column before or after the current one.
    pub(super) fn sort_step(&mut self, step: isize) -> Outcome {
        let cols = columns(self.view);
        if cols.is_empty() {
            return Outcome::Nothing;
        }
        let n = cols.len() as isize;
        // Only a column on screen (a narrow terminal drops some): ordering by one the reader
        // cannot see reads as a shuffle.
        let shown = match self.shown_cols[self.view].get() {
            0 => u64::MAX,
            m => m,
        };
        let mut col = match self.sorts[self.view] {
            Some(s) => (s.col as isize + step).rem_euclid(n) as usize,
            None if step > 0 => 0,
            None => cols.len() - 1,
        };
        for _ in 0..cols.len() {
            if shown & 1 << col != 0 {
                break;
            }
            col = (col as isize + step.signum()).rem_euclid(n) as usize;
        }
        self.sort_by(col, cols[col].right);
        Outcome::Redraw
    }

    /// Shift and a column's letter: order by it; pressed again, the other way.
    pub(super) fn sort_letter(&mut self, key: &str) -> Outcome {
        let mut chars = key.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return Outcome::Nothing;
        };
        let Some(col) = columns(self.view).iter().position(|k| k.key == c) else {
            return Outcome::Nothing;
        };
        let desc = match self.sorts[self.view] {
            Some(s) if s.col == col => !s.desc,
            _ => columns(self.view)[col].right,
        };
        self.sort_by(col, desc);
        Outcome::Redraw
    }

    /// `o`: the other way (the Jobs view's queue order and the Events view's newest-first
    /// included).
    pub(super) fn sort_reverse(&mut self) -> Outcome {
        let tab = self.view.tab();
        match self.sorts[self.view] {
            Some(_) if tab.turns_back() => self.sorts[self.view] = None,
            Some(s) => self.sort_by(s.col, !s.desc),
            None => match tab.turned() {
                Some(s) => self.sorts[self.view] = Some(s),
                None => return Outcome::Nothing,
            },
        }
        self.flash = Some(self.order_name());
        Outcome::Redraw
    }

    fn sort_by(&mut self, col: usize, desc: bool) {
        self.sorts[self.view] = Some(Sort { col, desc });
        self.flash = Some(self.order_name());
    }

    /// What the key bar says after a change of order.
    fn order_name(&self) -> String {
        let sort = self.sorts[self.view];
        if let Some(name) = self.view.tab().order_name(sort) {
            return name;
        }
        let view = self.view;
        match sort {
            None => format!("{}: queue order", view.short().to_lowercase()),
            Some(s) => format!(
                "{}: by {} {}  (< > column · o reverses · shift+letter)",
                view.short().to_lowercase(),
                columns(view)[s.col].title.trim(),
                if s.desc { "▼" } else { "▲" }
            ),
        }
    }
}

#[cfg(test)]
mod letters {
    use super::*;

    /// A sort letter the keymap also binds is never reached (the binding acts first), and the
    /// help would promise what the key does not do (`R` said "sort by restarts" and released).
    #[test]
    fn no_sort_letter_is_a_key_the_shipped_keymaps_bind() {
        let dir = gantry_testkit::scratch::scratch("letters");
        for map in ["default", "vim"] {
            let keys = crate::console::keymap::Keymap::load(map, &dir).unwrap();
            for (view, cols) in [
                ("jobs", &JOB_COLS[..]),
                ("fleet", &POOL_COLS[..]),
                ("teams", &TEAM_COLS[..]),
                ("services", &SERVICE_COLS[..]),
            ] {
                for c in cols {
                    assert_eq!(
                        keys.action(&c.key.to_string()),
                        None,
                        "{map}: {view}'s `{}` sorts on {}, which is bound",
                        c.title,
                        c.key
                    );
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
