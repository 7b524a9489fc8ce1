//! The actor's answers to single requests (everything but submissions, which it admits in
//! batches, and the run loop's own: wake, reload, stop), and the tokens it issues and revokes.

use super::{Actor, Request};
use crate::daemon::auth::{hash_token, new_token, unix_now, Caller, Grant, Role, TokenInfo};
use crate::daemon::journal::{JobId, TokenRecord};
use crate::daemon::refusal::{Kind, Refusal};

impl Actor {
    pub(super) fn handle(&mut self, req: Request) {
        match req {
            Request::Submit { .. } | Request::Shutdown | Request::Reload { .. } | Request::Wake => {
            }
            Request::Act {
                id,
                action,
                caller,
                reply,
            } => {
                let r = self.check_job(id, &caller).and_then(|()| {
                    self.state
                        .act(id, action, &caller.name)
                        .map_err(Refusal::from)
                });
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::WhatIf {
                ids,
                action,
                class,
                caller,
                reply,
            } => {
                let checked: Result<(), Refusal> =
                    ids.iter().try_for_each(|&id| self.check_job(id, &caller));
                let r = checked.and_then(|()| {
                    self.state
                        .what_if_work(
                            &ids,
                            action,
                            class.as_deref(),
                            caller.role == Role::Operator,
                        )
                        .map_err(Refusal::from)
                });
                let _ = reply.send(r);
            }
            Request::Priority {
                id,
                class,
                caller,
                reply,
            } => {
                let r = self.check_job(id, &caller).and_then(|()| {
                    self.state
                        .set_priority(id, &class, &caller.name, caller.role == Role::Operator)
                        .map_err(Refusal::from)
                });
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::Job { id, reply } => {
                let _ = reply.send(self.state.job_detail(id).map_err(Refusal::from));
            }
            Request::Logs { id, reply } => {
                let _ = reply.send(self.state.job_logs(id).map_err(Refusal::from));
            }
            Request::Enter {
                caller,
                id,
                rank,
                tty,
                argv,
                reply,
            } => {
                let _ = reply.send(self.state.enter(&caller, id, rank, tty, &argv));
            }
            Request::WorkdirsInUse { reply } => {
                let used = self
                    .state
                    .engine()
                    .jobs()
                    .filter(|j| !j.state.is_final())
                    .filter_map(|j| j.spec.workdir.clone())
                    .collect();
                let _ = reply.send(Ok(used));
            }
            Request::Reclaim {
                apply,
                caller,
                reply,
            } => {
                let r = match apply {
                    None => Ok(self.state.show_reclaim()),
                    Some(_) if caller.role != Role::Operator => Err(Refusal::forbidden(format!(
                        "applying a reclaim needs the operator role; this caller is a {}",
                        caller.role
                    ))),
                    Some(id) => {
                        self.changed();
                        self.state
                            .apply_reclaim(&caller.name, &id)
                            .map_err(Refusal::from)
                    }
                };
                let _ = reply.send(r);
            }
            Request::Token {
                role,
                team,
                label,
                user,
                expires_in,
                reply,
            } => {
                let _ = reply.send(self.create_token(role, team, label, user, expires_in));
            }
            Request::CloudPools { reply } => {
                let _ = reply.send(self.state.known_cloud_pools().map_err(Refusal::from));
            }
            Request::Tokens { reply } => {
                let now = unix_now();
                let _ = reply.send(
                    self.state
                        .tokens()
                        .map(|ts| {
                            ts.iter()
                                .map(|t| crate::daemon::auth::token_info(t, now))
                                .collect()
                        })
                        .map_err(Refusal::from),
                );
            }
            Request::Revoke { id, caller, reply } => {
                let _ = reply.send(self.revoke_token(&id, &caller));
            }
            Request::Events { job, limit, reply } => {
                let _ = reply.send(self.state.events(job, limit).map_err(Refusal::from));
            }
            Request::Node { name, range, reply } => {
                let _ = reply.send(self.state.node_detail(&name, range).ok_or_else(|| {
                    Refusal::new(
                        Kind::NotFound,
                        "not-found",
                        format!(
                            "node `{}`: no such node (gantry fleet --pool NAME lists a pool's)",
                            name.escape_debug()
                        ),
                    )
                }));
            }
            Request::ServiceUp { up, caller, reply } => {
                let r = self.state.service_up(up, &caller);
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::ServiceDown {
                name,
                caller,
                reply,
            } => {
                let r = self.state.service_down(&name, &caller);
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::Experiment { job, line } => {
                self.state.experiment_said(job, line);
                self.changed();
            }
            Request::ExperimentsOwed { limit, reply } => {
                let _ = reply.send(self.state.experiments_owed(limit).map_err(Refusal::from));
            }
            Request::ExperimentSent { report } => self.state.experiment_sent(&report),
            Request::ExperimentServer { down, line } => {
                self.state.experiment_server(down, line);
                self.changed();
            }
            Request::ServiceMeasured { measured } => {
                // A replica started or retired needs a cycle; new figures only a publication.
                if self.state.service_measured(measured) {
                    self.changed();
                } else {
                    self.republish = true;
                }
            }
            Request::Pool { index, reply } => {
                let _ = reply.send(self.state.pool_detail(index).ok_or_else(|| {
                    Refusal::new(
                        Kind::NotFound,
                        "not-found",
                        format!("pool {index}: no such pool (GET /v1/fleet lists them in order)"),
                    )
                }));
            }
            Request::Preview { submission, reply } => {
                let r = self.state.preview_with_work(&submission);
                let _ = reply.send(r.map_err(Refusal::from));
            }
            Request::Report {
                since,
                until,
                by,
                reply,
            } => {
                let _ = reply.send(self.state.report(since, until, by).map_err(Refusal::from));
            }
            Request::History { query, reply } => {
                let _ = reply.send(self.state.history(&query).map_err(Refusal::from));
            }
        }
    }

    /// The job exists and this caller may change it.
    fn check_job(&self, id: JobId, caller: &Caller) -> Result<(), Refusal> {
        let team = self.state.job_team(id).ok_or_else(|| {
            Refusal::new(
                Kind::NotFound,
                "not-found",
                format!("job {id}: no such job"),
            )
        })?;
        if caller.may_change(&team) {
            Ok(())
        } else {
            Err(Refusal::forbidden(format!(
                "job {id} belongs to team `{team}`; a {}{} cannot change it",
                caller.role,
                caller
                    .team
                    .as_deref()
                    .map_or(String::new(), |t| format!(" of team `{t}`"))
            )))
        }
    }

    fn create_token(
        &mut self,
        role: Role,
        team: Option<String>,
        label: String,
        user: Option<String>,
        expires_in: Option<f64>,
    ) -> Result<String, Refusal> {
        if role == Role::Researcher && team.is_none() {
            return Err(Refusal::bad_request(
                "a researcher token needs --team: it may change only that team's jobs",
            ));
        }
        if let Some(t) = &team {
            if !self.state.has_team(t) {
                return Err(Refusal::bad_request(format!(
                    "unknown team `{t}`; teams: {}",
                    self.state.team_names().join(", ")
                )));
            }
        }
        let token = new_token().map_err(|e| {
            Refusal::new(
                Kind::Internal,
                "internal",
                format!("cannot read random bytes from the kernel: {e}"),
            )
        })?;
        let record = TokenRecord {
            hash: hash_token(&token),
            role: role.name().to_string(),
            team: team.clone(),
            label: label.clone(),
            created_at: unix_now(),
            expires_at: expires_in.map(|s| unix_now() + s),
            revoked_at: None,
            user,
        };
        self.state.add_token(&record).map_err(Refusal::from)?;
        if let Ok(mut t) = self.tokens.write() {
            t.insert(
                record.hash.clone(),
                Grant {
                    caller: Caller::of_token(&record, role),
                    expires_at: record.expires_at,
                },
            );
        }
        Ok(token)
    }

    /// Revokes the one token whose id starts with `id`: refused from then on, by every
    /// listener, with no restart.
    fn revoke_token(&mut self, id: &str, caller: &Caller) -> Result<TokenInfo, Refusal> {
        if id.len() < 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refusal::bad_request(format!(
                "token id `{}`: expected at least 8 hex digits, the ID column of `gantry token list`",
                id.escape_debug()
            )));
        }
        let id = id.to_ascii_lowercase();
        let all = self.state.tokens().map_err(Refusal::from)?;
        let found: Vec<_> = all.iter().filter(|t| t.hash.starts_with(&id)).collect();
        let mut t = match found.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(Refusal::new(
                    Kind::NotFound,
                    "not-found",
                    format!("token {id}: no such token (gantry token list shows them)"),
                ))
            }
            _ => {
                return Err(Refusal::bad_request(format!(
                    "token id {id} names {} tokens; give more of it",
                    found.len()
                )))
            }
        };
        let at = unix_now();
        if t.revoked_at.is_none() {
            self.state
                .revoke_token(&t, at, &caller.name)
                .map_err(Refusal::from)?;
            if let Ok(mut map) = self.tokens.write() {
                map.remove(&t.hash);
            }
            t.revoked_at = Some(at);
        }
        Ok(crate::daemon::auth::token_info(&t, at))
    }
}
