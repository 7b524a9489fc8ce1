//! Services (`gantry serve up`) as the journal keeps them: each service's current version
//! (its file, team, class and endpoint) and which jobs are its replicas. A restarted daemon
//! reads them back and carries on serving.

use super::*;

/// A service's current version.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceRecord {
    pub name: String,
    pub file: String,
    /// The file as submitted, `service:` and all.
    pub spec: Vec<u8>,
    pub team: String,
    pub user: Option<String>,
    /// A class given at `serve up` over the file's.
    pub priority: Option<String>,
    /// Where the daemon serves it (`127.0.0.1:30001`).
    pub endpoint: String,
    pub version: u32,
    pub created_at: f64,
    /// The SHA-256 (hex) of the bearer token its endpoint asks for (`serve up --auth`);
    /// `None`: the endpoint asks for none.
    pub auth: Option<String>,
}

/// A job that is a replica of a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaRecord {
    pub job: JobId,
    /// The replica's number within its service (1, 2, …; never reused).
    pub replica: u32,
    /// The port it serves on.
    pub port: u16,
    /// The service version it runs.
    pub version: u32,
    /// One of a spot service's on-demand replicas.
    pub ondemand: bool,
}

impl Store {
    /// Writes a service's current version (a new one replaces the old).
    pub fn save_service(&mut self, s: &ServiceRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO services (name, file, spec, team, user, priority, endpoint, version, created_at, auth) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![s.name, s.file, s.spec, s.team, s.user, s.priority, s.endpoint, s.version, s.created_at, s.auth],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Forgets a service and which jobs were its replicas (the jobs stay in the journal).
    pub fn delete_service(&mut self, name: &str) -> Result<(), JournalError> {
        let tx = self
            .conn
            .transaction()
            .map_err(|source| JournalError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
        let path = self.path.clone();
        let sql = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        tx.execute("DELETE FROM services WHERE name = ?1", params![name])
            .map_err(sql)?;
        tx.execute(
            "DELETE FROM service_replicas WHERE service = ?1",
            params![name],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    pub fn services(&self) -> Result<Vec<ServiceRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT name, file, spec, team, user, priority, endpoint, version, created_at, auth FROM services ORDER BY name")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(ServiceRecord {
                    name: r.get(0)?,
                    file: r.get(1)?,
                    spec: r.get(2)?,
                    team: r.get(3)?,
                    user: r.get(4)?,
                    priority: r.get(5)?,
                    endpoint: r.get(6)?,
                    version: r.get(7)?,
                    created_at: r.get(8)?,
                    auth: r.get(9)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    pub fn add_replica(&mut self, service: &str, r: &ReplicaRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO service_replicas (job, service, replica, port, version, ondemand) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![r.job, service, r.replica, r.port, r.version, r.ondemand],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// A replica's job has ended and is no longer the service's.
    pub fn drop_replica(&mut self, job: JobId) -> Result<(), JournalError> {
        self.conn
            .execute("DELETE FROM service_replicas WHERE job = ?1", params![job])
            .map_err(self.sql())?;
        Ok(())
    }

    /// Every service's replicas: (service, replica).
    pub fn replicas(&self) -> Result<Vec<(String, ReplicaRecord)>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT service, job, replica, port, version, ondemand FROM service_replicas ORDER BY service, replica")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    ReplicaRecord {
                        job: r.get(1)?,
                        replica: r.get(2)?,
                        port: r.get(3)?,
                        version: r.get(4)?,
                        ondemand: r.get(5)?,
                    },
                ))
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }
}
