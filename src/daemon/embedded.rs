//! The in-process client: the embedded console reads the daemon actor's published snapshots
//! directly (no socket), through the same `Client` interface a remote console uses.

use crate::api::{Client, ClientError, Snapshot};
use crate::daemon::actor::{Handle, Published};
use crate::daemon::api::ApiError;
use crate::daemon::refusal::Refusal;
use std::sync::Arc;
use std::time::Duration;

pub struct LocalClient {
    handle: Handle,
    current: Arc<Published>,
}

impl LocalClient {
    pub fn new(handle: Handle) -> LocalClient {
        let current = handle.published.borrow().clone();
        LocalClient { handle, current }
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The daemon's cycle run forward with the change and without it (`eta::PREVIEW_BOX`).
    fn preview_change(
        &mut self,
        ids: &[i64],
        action: crate::api::JobAction,
        class: Option<String>,
    ) -> Result<crate::api::WhatIf, ClientError> {
        use crate::daemon::actor::Request;
        let caller = console_caller();
        let work = self
            .handle
            .call_blocking(|reply| Request::WhatIf {
                ids: ids.to_vec(),
                action,
                class,
                caller,
                reply,
            })
            .map_err(refused)?;
        // Refused as the API refuses it (`api::what_if`).
        work.run(crate::daemon::eta::PREVIEW_BOX)
            .map_err(|why| answered(ApiError::new(409, "conflict", why)))
    }
}

/// A spec typed in the console's submit form: the job of the user running the console.
fn form_submission(spec: &str) -> crate::daemon::engine::Submission {
    crate::daemon::engine::Submission {
        file: "form".to_string(),
        text: spec.as_bytes().to_vec(),
        user: console_caller().user,
        ..Default::default()
    }
}

/// The embedded console acts as the daemon's own user: an operator, named in events.
fn console_caller() -> crate::daemon::auth::Caller {
    crate::daemon::auth::Caller {
        name: "console".to_string(),
        // The embedded console's submissions are the user running it.
        user: crate::daemon::auth::this_user(),
        ..crate::daemon::auth::Caller::local_operator()
    }
}

/// The daemon's refusal, as the HTTP API would have carried it to a remote console.
fn refused(e: Refusal) -> ClientError {
    answered(ApiError::from(e))
}

/// The API's answer to a refusal, as a remote console would have read it.
fn answered(e: ApiError) -> ClientError {
    ClientError::Api {
        status: e.status,
        code: e.code.to_string(),
        error: e.error,
        field: e.field,
    }
}

impl Client for LocalClient {
    fn what_if(&mut self, req: crate::api::JobRequest) -> Result<crate::api::WhatIf, ClientError> {
        self.what_if_many(req.action, &[req.id])
    }
    fn what_if_many(
        &mut self,
        action: crate::api::JobAction,
        ids: &[i64],
    ) -> Result<crate::api::WhatIf, ClientError> {
        self.preview_change(ids, action, None)
    }
    fn what_if_priority(
        &mut self,
        id: i64,
        class: &str,
    ) -> Result<crate::api::WhatIf, ClientError> {
        // The action is not read where a class is given (as the API's priority route does).
        let hold = crate::api::JobAction::Hold;
        self.preview_change(&[id], hold, Some(class.to_string()))
    }
    fn act(&mut self, req: crate::api::JobRequest) -> Result<String, ClientError> {
        use crate::daemon::actor::Request;
        let caller = console_caller();
        self.handle
            .call_blocking(|reply| Request::Act {
                id: req.id,
                action: req.action,
                caller,
                reply,
            })
            .map(|()| format!("job {}: {} done", req.id, req.action.name()))
            .map_err(refused)
    }
    fn job(&mut self, id: i64) -> Result<crate::api::JobView, ClientError> {
        use crate::daemon::actor::Request;
        let mut detail = self
            .handle
            .call_blocking(|reply| Request::Job { id, reply })
            .map_err(refused)?;
        // Logs are read outside the actor, as the API reads them.
        if let Ok(found) = self
            .handle
            .call_blocking(|reply| Request::Logs { id, reply })
        {
            detail.log_tail = crate::daemon::api::logs::tail_lines(found, id, 20);
        }
        Ok(detail)
    }
    fn logs(
        &mut self,
        id: i64,
        node: Option<usize>,
        from: &crate::api::LogsFrom,
    ) -> Result<crate::api::LogsView, ClientError> {
        use crate::daemon::actor::Request;
        let found = self
            .handle
            .call_blocking(|reply| Request::Logs { id, reply })
            .map_err(refused)?;
        let node = node.map(|k| k.to_string());
        let (tail, after, partial) = match from {
            crate::api::LogsFrom::Tail(n) => (*n, None, true),
            crate::api::LogsFrom::After { cursors, partial } => {
                (0, Some(cursors.as_str()), *partial)
            }
        };
        let want = crate::daemon::api::logs::Want {
            node: node.as_deref(),
            tail,
            after,
            from_start: false,
            partial,
        };
        crate::daemon::api::logs::answer(found, id, &want).map_err(answered)
    }
    fn pool(&mut self, index: usize) -> Result<crate::api::PoolDetail, ClientError> {
        use crate::daemon::actor::Request;
        self.handle
            .call_blocking(|reply| Request::Pool { index, reply })
            .map_err(refused)
    }
    fn node(
        &mut self,
        name: &str,
        range: crate::daemon::state::history::Range,
    ) -> Result<crate::api::NodeDetail, ClientError> {
        use crate::daemon::actor::Request;
        let name = name.to_string();
        self.handle
            .call_blocking(|reply| Request::Node { name, range, reply })
            .map_err(refused)
    }
    fn submit(&mut self, spec: &str) -> Result<i64, ClientError> {
        use crate::daemon::actor::Request;
        let submission = form_submission(spec);
        self.handle
            .call_blocking(|reply| Request::Submit { submission, reply })
            .map_err(refused)
    }
    fn preview(&mut self, spec: &str) -> Result<crate::daemon::engine::Preview, ClientError> {
        use crate::daemon::actor::Request;
        let submission = form_submission(spec);
        let (p, work) = self
            .handle
            .call_blocking(|reply| Request::Preview { submission, reply })
            .map_err(refused)?;
        Ok(work.attach(p, crate::daemon::eta::PREVIEW_BOX))
    }
    fn set_priority(&mut self, id: i64, class: &str) -> Result<String, ClientError> {
        use crate::daemon::actor::Request;
        self.handle
            .call_blocking(|reply| Request::Priority {
                id,
                class: class.to_string(),
                caller: console_caller(),
                reply,
            })
            .map(|()| format!("job {id}: now {class}"))
            .map_err(refused)
    }
    fn reclaim(
        &mut self,
        apply: Option<&str>,
    ) -> Result<crate::scheduler::reclaim::ReclaimPlan, ClientError> {
        use crate::daemon::actor::Request;
        self.handle
            .call_blocking(|reply| Request::Reclaim {
                apply: apply.map(str::to_string),
                caller: console_caller(),
                reply,
            })
            .map_err(refused)
    }
    fn poll(&mut self) -> bool {
        if !self.handle.published.has_changed().unwrap_or(false) {
            return false;
        }
        self.current = self.handle.published.borrow_and_update().clone();
        true
    }
    fn snapshot(&self) -> &Snapshot {
        &self.current.snapshot
    }
    fn until_next(&self) -> Duration {
        Duration::from_millis(100)
    }
}
