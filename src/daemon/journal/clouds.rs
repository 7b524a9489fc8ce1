//! The cloud pools a journal's daemons have bought from: each pool's settings as the fleet
//! file had them, by its identity (`config::reload::key`). Instances are the journal's, not the
//! fleet file's: a pool that leaves the file is still known here until its cloud lists none of
//! its instances, so a daemon started with another file gives them back, and `gantry cloud ls`
//! lists them. And the timers an operator's promise depends on (`timers`).

use super::*;

/// A cloud pool the journal knows: `key` (`provider/region/zone/name`), and its fleet-file
/// settings as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudPoolRecord {
    pub key: String,
    pub config: String,
    /// When this journal first knew it (the daemon's clock).
    pub since: f64,
}

impl Store {
    /// Records a cloud pool of the fleet in force (its settings replace those kept).
    pub fn save_cloud_pool(
        &mut self,
        key: &str,
        config: &str,
        at: f64,
    ) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT INTO cloud_pools (key, config, since) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET config = excluded.config",
                params![key, config, at],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Forgets a cloud pool whose cloud lists none of its instances any more.
    pub fn forget_cloud_pool(&mut self, key: &str) -> Result<(), JournalError> {
        self.conn
            .execute("DELETE FROM cloud_pools WHERE key = ?1", params![key])
            .map_err(self.sql())?;
        Ok(())
    }

    pub fn cloud_pools(&self) -> Result<Vec<CloudPoolRecord>, JournalError> {
        read_cloud_pools(&self.conn).map_err(self.sql())
    }
}

/// A timer kept across restarts: `empty/<node>` (since when a bought node is empty) or
/// `passed/<pool key>` (until when a pool is passed over, how many machines in a row never
/// answered, and why), in Unix seconds: the downtime counts.
#[derive(Clone, Debug, PartialEq)]
pub struct TimerRecord {
    pub key: String,
    pub unix: f64,
    pub count: u32,
    pub why: String,
}

impl Store {
    pub fn set_timer(&mut self, t: &TimerRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO timers (key, unix, count, why) VALUES (?1, ?2, ?3, ?4)",
                params![t.key, t.unix, t.count, t.why],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    pub fn clear_timer(&mut self, key: &str) -> Result<(), JournalError> {
        self.conn
            .execute("DELETE FROM timers WHERE key = ?1", params![key])
            .map_err(self.sql())?;
        Ok(())
    }

    pub fn timers(&self) -> Result<Vec<TimerRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT key, unix, count, why FROM timers ORDER BY key")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(TimerRecord {
                    key: r.get(0)?,
                    unix: r.get(1)?,
                    count: r.get(2)?,
                    why: r.get(3)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }
}

fn read_cloud_pools(conn: &Connection) -> rusqlite::Result<Vec<CloudPoolRecord>> {
    let mut q = conn.prepare("SELECT key, config, since FROM cloud_pools ORDER BY key")?;
    let rows = q.query_map([], |r| {
        Ok(CloudPoolRecord {
            key: r.get(0)?,
            config: r.get(1)?,
            since: r.get(2)?,
        })
    })?;
    rows.collect()
}

/// The cloud pools the journal at `path` knows, read without a daemon (`gantry cloud ls`
/// with none running): opened read-only, never migrated or locked. A journal older than the
/// table knows none.
pub fn cloud_pools_at(path: &Path) -> Result<Vec<CloudPoolRecord>, String> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match read_cloud_pools(&conn) {
        Ok(rows) => Ok(rows),
        Err(e) if e.to_string().contains("no such table") => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}
