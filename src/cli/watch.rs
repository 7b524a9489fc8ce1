//! `-w/--watch` on listings, as `kubectl get -w`: the table once, then each row again when
//! what the table shows of it changes (a new row, a state, a cent of spend: not every tick of
//! a float), read from the daemon's event stream — no polling. In JSON or YAML, each such
//! row is one record.

use super::fleet::{pool_header, pool_line};
use super::remote::{team_header, team_line, JobTable, Target};
use super::{print_record, CliError, Output};
use gantry::api::{JobFilter, JobRow, PoolRow, Snapshot, SnapshotDelta, TeamRow};
use serde::Serialize;
use std::collections::HashMap;

/// The rows of a listing in a snapshot, by key.
trait Listing {
    type Row: Serialize + PartialEq + Clone;
    fn rows(&self, s: &Snapshot) -> Vec<(String, Self::Row)>;
    fn header(&mut self, first: &[(String, Self::Row)]);
    /// The row as the table prints it.
    fn line(&self, r: &Self::Row, s: &Snapshot) -> String;
}

struct Jobs {
    filter: JobFilter,
    /// Laid out for the first list (the table's header is printed for it).
    table: JobTable,
    wide: bool,
}

impl Listing for Jobs {
    type Row = JobRow;
    fn rows(&self, s: &Snapshot) -> Vec<(String, JobRow)> {
        s.jobs
            .iter()
            .filter(|j| self.filter.matches(j))
            .map(|j| (j.id.to_string(), (**j).clone()))
            .collect()
    }
    fn header(&mut self, first: &[(String, JobRow)]) {
        let rows: Vec<JobRow> = first.iter().map(|(_, r)| r.clone()).collect();
        self.table = JobTable::new(&rows, self.wide);
        self.table.header();
    }
    fn line(&self, r: &JobRow, s: &Snapshot) -> String {
        self.table.line(r, s.now)
    }
}

struct Teams;

impl Listing for Teams {
    type Row = TeamRow;
    fn rows(&self, s: &Snapshot) -> Vec<(String, TeamRow)> {
        s.teams
            .iter()
            .map(|t| (t.name.clone(), t.clone()))
            .collect()
    }
    fn header(&mut self, _: &[(String, TeamRow)]) {
        team_header();
    }
    fn line(&self, r: &TeamRow, _: &Snapshot) -> String {
        team_line(r)
    }
}

struct Pools;

impl Listing for Pools {
    type Row = PoolRow;
    fn rows(&self, s: &Snapshot) -> Vec<(String, PoolRow)> {
        s.pools
            .iter()
            .map(|p| (p.path.clone(), p.clone()))
            .collect()
    }
    fn header(&mut self, _: &[(String, PoolRow)]) {
        pool_header();
    }
    fn line(&self, r: &PoolRow, _: &Snapshot) -> String {
        pool_line(r)
    }
}

/// `gantry fleet -w`: the live fleet's pools.
pub fn pools(t: &Target, output: Output) -> Result<(), CliError> {
    watch(t, output, Pools)
}

/// `gantry jobs -w`.
pub fn jobs(t: &Target, filter: JobFilter, output: Output) -> Result<(), CliError> {
    let wide = output == Output::Wide;
    watch(
        t,
        output,
        Jobs {
            filter,
            table: JobTable::new(&[], wide),
            wide,
        },
    )
}

/// `gantry teams -w`.
pub fn teams(t: &Target, output: Output) -> Result<(), CliError> {
    watch(t, output, Teams)
}

fn watch<L: Listing>(t: &Target, output: Output, mut listing: L) -> Result<(), CliError> {
    let mut c = t.client()?;
    let mut snapshot: Option<Snapshot> = None;
    // Each row's line as last printed.
    let mut shown: HashMap<String, String> = HashMap::new();
    let mut failed: Option<CliError> = None;
    c.follow("/v1/events/stream", |event, data| {
        let s = match (event, snapshot.as_mut()) {
            ("snapshot", _) => match serde_json::from_str::<Snapshot>(data) {
                Ok(s) => snapshot.insert(s),
                Err(e) => {
                    failed = Some(CliError::usage(format!("the daemon's snapshot: {e}")));
                    return false;
                }
            },
            ("delta", Some(s)) => match serde_json::from_str::<SnapshotDelta>(data) {
                Ok(d) => {
                    s.apply(d);
                    s
                }
                Err(e) => {
                    failed = Some(CliError::usage(format!("the daemon's delta: {e}")));
                    return false;
                }
            },
            _ => return true,
        };
        let rows = listing.rows(s);
        if event == "snapshot" && !output.is_data() {
            listing.header(&rows);
        }
        for (key, row) in rows {
            let line = listing.line(&row, s);
            if shown.get(&key) == Some(&line) {
                continue;
            }
            if output.is_data() {
                if let Err(e) = print_record(output, &row) {
                    failed = Some(CliError::usage(e));
                    return false;
                }
            } else {
                println!("{line}");
            }
            shown.insert(key, line);
        }
        true
    })?;
    failed.map_or(Ok(()), Err)
}
