//! Console state, keys and drawing. Pure over a `Snapshot`: tests render it on a TestBackend.

mod commands;
mod complete;
mod detail;
mod dialogs;
mod draw;
mod keys;
mod order;
mod views;

pub use order::columns;

use super::filter::Filter;
use crate::api::{JobRow, Snapshot};
use ratatui::style::{Color, Style};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

pub use views::View;

/// One `T` per view, read and written by the view (`sorts[View::Jobs]`): a new view has its
/// own without any index to keep in step.
#[derive(Clone, Debug, Default)]
pub struct PerView<T>([T; View::ALL.len()]);

impl<T> std::ops::Index<View> for PerView<T> {
    type Output = T;
    fn index(&self, v: View) -> &T {
        &self.0[v.index()]
    }
}

impl<T> std::ops::IndexMut<View> for PerView<T> {
    fn index_mut(&mut self, v: View) -> &mut T {
        &mut self.0[v.index()]
    }
}

/// What a key did. The loop sends changes and queries through the client.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Redraw,
    Nothing,
    Quit,
    /// Close this daemon's view and open the context of this name (`:ctx NAME`).
    Switch(String),
    /// The user confirmed a change to a job.
    Act(crate::api::JobRequest),
    /// A confirmation opened: ask the daemon what the change would do (its preview).
    WhatIf(crate::api::JobRequest),
    /// The marked jobs' confirmation opened: what the change to all of them would do.
    WhatIfMany {
        action: crate::api::JobAction,
        ids: Vec<i64>,
    },
    /// The reprioritization's confirmation opened: what moving the job would do.
    WhatIfPrio {
        id: i64,
        class: String,
    },
    /// The user confirmed a change whose preview was shown (a job's action, a
    /// reprioritization, the marked jobs' action): done only if the daemon's preview is still
    /// what was shown; else the dialog opens again with the new one.
    AsShown {
        ask: Ask,
        shown: Box<crate::api::WhatIf>,
    },
    /// The user confirmed moving a job to another class.
    Prio {
        id: i64,
        class: String,
    },
    /// Fetch the reclaim plan (to review it), or apply it once confirmed.
    Reclaim {
        /// The id of the plan the user confirmed.
        apply: Option<String>,
    },
    /// The user typed the count: change every marked job.
    ActMany(Vec<crate::api::JobRequest>),
    /// Fetch one job's detail to show it.
    Detail(i64),
    /// Suspend the screen for a shell in this running job.
    Shell(i64),
    /// Ask the daemon where the form's spec would land.
    Preview(String),
    /// Submit the form's spec.
    Submit(String),
    /// Fetch one pool's nodes and GPUs to show them.
    Pool(usize),
    /// Fetch one node's GPUs over a range for the node view.
    Node {
        name: String,
        range: crate::api::history::Range,
    },
    /// Fetch a job's logs for the log view: every node's, or one node's.
    Logs {
        id: i64,
        node: Option<usize>,
    },
}

impl Outcome {
    /// Whether it asks the daemon to change something.
    pub fn changes(&self) -> bool {
        matches!(
            self,
            Outcome::Act(_)
                | Outcome::AsShown { .. }
                | Outcome::Prio { .. }
                | Outcome::Reclaim { apply: Some(_) }
                | Outcome::ActMany(_)
                | Outcome::Submit(_)
        )
    }
}

/// What a confirmation dialog asks.
#[derive(Clone, Debug, PartialEq)]
pub enum Ask {
    Job {
        request: crate::api::JobRequest,
        name: String,
    },
    Prio {
        id: i64,
        name: String,
        from: String,
        to: String,
    },
    /// Reclaim these idle jobs' GPUs.
    Reclaim(crate::scheduler::reclaim::ReclaimPlan),
    /// One action on every marked job: confirmed only by typing how many.
    Bulk {
        action: crate::api::JobAction,
        ids: Vec<i64>,
        typed: String,
    },
}

impl Ask {
    /// What confirming does, given the preview on screen (`shown`: the daemon's answer, kept
    /// under the job it was asked for, if it came): a change whose preview was shown is
    /// applied only as shown.
    pub(crate) fn confirmed(
        self,
        shown: Option<&(i64, Result<crate::api::WhatIf, String>)>,
    ) -> Outcome {
        match shown {
            Some((id, Ok(w))) if self.previewed() == Some(*id) => Outcome::AsShown {
                ask: self,
                shown: Box::new(w.clone()),
            },
            _ => self.outcome(),
        }
    }

    /// The job a preview of this change is kept under (the first of several); none for a
    /// reclaim, which has its own plan.
    pub fn previewed(&self) -> Option<i64> {
        match self {
            Ask::Job { request, .. } => Some(request.id),
            Ask::Prio { id, .. } => Some(*id),
            Ask::Bulk { ids, .. } => ids.first().copied(),
            Ask::Reclaim(_) => None,
        }
    }

    /// The same question asked again from the start (a bulk action's count typed anew).
    pub fn again(self) -> Ask {
        match self {
            Ask::Bulk { action, ids, .. } => Ask::Bulk {
                action,
                ids,
                typed: String::new(),
            },
            other => other,
        }
    }

    /// What confirming does.
    pub fn outcome(&self) -> Outcome {
        match self {
            Ask::Job { request, .. } => Outcome::Act(*request),
            Ask::Prio { id, to, .. } => Outcome::Prio {
                id: *id,
                class: to.clone(),
            },
            Ask::Reclaim(plan) => Outcome::Reclaim {
                apply: Some(plan.id.clone()),
            },
            Ask::Bulk { action, ids, .. } => Outcome::ActMany(
                ids.iter()
                    .map(|&id| crate::api::JobRequest {
                        id,
                        action: *action,
                    })
                    .collect(),
            ),
        }
    }
}

/// A change waiting for the user's yes, with Cancel focused until they move off it.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirm {
    pub ask: Ask,
    /// The confirm button has focus (Cancel has it at first).
    pub on_confirm: bool,
}

/// Which prompt the key bar holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    /// `/`: filter the view's rows.
    Filter,
    /// `:`: a command.
    Command,
}

/// A line being typed in the key bar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub kind: PromptKind,
    pub text: String,
}

pub struct App {
    pub view: View,
    /// The `/` or `:` line being typed.
    pub prompt: Option<Prompt>,
    /// Mouse capture is on (off by default: terminals select text without it).
    pub mouse: bool,
    /// What the Jobs, Fleet and Events views keep between frames (each view's own).
    pub jobs: views::JobsState,
    pub fleet: views::FleetState,
    pub events: views::EventsState,
    /// The pool shown node by node and GPU by GPU, and its index (refreshed as data change).
    pub pool_detail: Option<(usize, crate::api::PoolDetail)>,
    /// The node selected in the pool detail (its place in the pool's list).
    pub pool_node: usize,
    /// A node GPU by GPU over time, opened from the pool detail.
    pub node: Option<super::node::NodePane>,
    /// The submit form, while open.
    pub form: Option<super::form::Form>,
    /// The form as it was closed without submitting (reopening resumes it, cursor and all).
    pub draft: Option<super::form::Form>,
    /// The job shown in detail (over the Jobs view), once fetched.
    pub detail: Option<crate::api::JobView>,
    /// Lines the job detail is scrolled, and the most it can be (as last drawn).
    pub detail_scroll: u16,
    detail_max: std::cell::Cell<u16>,
    /// The log view (over the job's detail).
    pub logs: Option<super::logs::LogPane>,
    /// What the daemon lets this console's caller do; refused actions show why.
    pub access: crate::api::Access,
    /// Each view's columns shown in the last frame, a bit each (by `View::ALL` index): `<` and
    /// `>` order only by columns on screen. 0: not drawn yet (all count).
    shown_cols: PerView<std::cell::Cell<u64>>,
    /// Each view's order (by `View::ALL` index); the Jobs view's `None` is the queue order.
    pub sorts: PerView<Option<crate::console::table::Sort>>,
    /// The Jobs view's order as last computed, and for what.
    row_order: std::cell::RefCell<Option<(order::OrderKey, order::Computed)>>,
    /// Running jobs in the last snapshot counted, and which snapshot that was.
    running: std::cell::Cell<Option<(order::SnapKey, usize)>>,
    pub help: bool,
    /// Lines the help is scrolled.
    pub help_scroll: u16,
    /// Rows the view in front showed in the last frame (a page for PageDown, half for ctrl-d).
    pub page: std::cell::Cell<usize>,
    /// The daemon is out of reach: since when and why (the data shown are as they were then).
    pub lost: Option<String>,
    /// Dangerous actions removed from keys and help; an RO badge in the header.
    pub readonly: bool,
    pub confirm: Option<Confirm>,
    /// The open confirmation's preview (the job it is of, and what the daemon said), shown in
    /// the dialog once it answers.
    pub what_if: Option<(i64, Result<crate::api::WhatIf, String>)>,
    /// The last action's result, for the key bar.
    pub flash: Option<String>,
    pub color: bool,
    pub theme: super::theme::Theme,
    pub keymap: super::keymap::Keymap,
    /// What the console shows, for the header: `demo` (the embedded daemon) or `daemon
    /// ENDPOINT`; empty in tests.
    pub source: String,
    /// The daemons `:ctx` switches between (console.toml's `[[contexts]]`): (name, where).
    pub contexts: Vec<(String, String)>,
}

/// Job names come from users: never let control characters reach the terminal.
pub use crate::untrusted::escape;

/// Dollars, short: $0.44, $12.30, $950, $12.3k, $1.25M — cents under $100, where a
/// notebook's hour and a whole dollar differ.
pub fn money(usd: f64) -> String {
    let a = usd.abs();
    if a >= 1e6 {
        format!("${:.2}M", usd / 1e6)
    } else if a >= 1e4 {
        format!("${:.1}k", usd / 1e3)
    } else if a >= 100.0 {
        format!("${usd:.0}")
    } else {
        format!("${usd:.2}")
    }
}

/// A share as a percentage: two decimals under 1% (a month's first dollars of a large budget
/// would read 0%), none from 10%.
pub fn pct(fraction: f64) -> String {
    let p = 100.0 * fraction;
    if p > 0.0 && p < 0.01 {
        "<0.01%".to_string()
    } else if p > 0.0 && p < 1.0 {
        format!("{p:.2}%")
    } else if p < 10.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

/// A duration as `5m` or `2h05m` (job ages, idle times), for the console and the CLI.
pub fn hm(s: f64) -> String {
    let m = (s.max(0.0) / 60.0) as u64;
    if m >= 60 {
        format!("{}h{:02}m", m / 60, m % 60)
    } else {
        format!("{m}m")
    }
}

impl App {
    /// The dark theme in true colour (or no colour at all) and the default keymap.
    pub fn new(color: bool) -> App {
        let depth = if color {
            super::theme::Depth::TrueColor
        } else {
            super::theme::Depth::None
        };
        let nowhere = std::path::Path::new("/nonexistent");
        let theme = super::theme::Theme::load("dark", nowhere, depth)
            .expect("the shipped dark theme parses");
        let keymap =
            super::keymap::Keymap::load("default", nowhere).expect("the shipped keymap parses");
        App::with(theme, keymap, color)
    }

    pub fn with(theme: super::theme::Theme, keymap: super::keymap::Keymap, color: bool) -> App {
        App {
            view: View::Overview,
            prompt: None,
            sorts: PerView::default(),
            row_order: Default::default(),
            running: Default::default(),
            jobs: Default::default(),
            fleet: Default::default(),
            events: Default::default(),
            pool_detail: None,
            pool_node: 0,
            node: None,
            mouse: false,
            form: None,
            draft: None,
            detail: None,
            detail_scroll: 0,
            shown_cols: Default::default(),
            detail_max: std::cell::Cell::new(0),
            logs: None,
            access: crate::api::Access::operator(),
            help: false,
            help_scroll: 0,
            page: std::cell::Cell::new(20),
            lost: None,
            readonly: false,
            confirm: None,
            what_if: None,
            flash: None,
            color,
            theme,
            keymap,
            source: String::new(),
            contexts: Vec::new(),
        }
    }

    /// The first key bound to an action, for the key bar.
    fn key_for(&self, action: super::keymap::Action) -> String {
        self.keymap
            .bindings
            .iter()
            .find(|b| b.action == action)
            .map_or("-".to_string(), |b| b.key.clone())
    }

    fn style(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    /// The selected job among the Jobs view's rows (the first row when none is selected).
    fn selected_job<'a>(&self, snap: &'a Snapshot) -> Option<&'a JobRow> {
        let rows = self.rows(snap);
        self.jobs
            .selected
            .and_then(|id| rows.position(id))
            .and_then(|i| rows.get(i))
            .or(rows.get(0))
    }

    fn move_pool(&mut self, snap: &Snapshot, delta: i64) {
        let pools = self.visible_pools(snap);
        if pools.is_empty() {
            return;
        }
        let at = pools
            .iter()
            .position(|&i| i == self.fleet.selected)
            .unwrap_or(0) as i64;
        self.fleet.selected = pools[(at + delta).clamp(0, pools.len() as i64 - 1) as usize];
    }

    /// How many jobs the Jobs view lists under its filter.
    pub fn rows_len(&self, snap: &Snapshot) -> usize {
        self.rows(snap).len()
    }

    /// The filter of the view in front.
    fn filter_mut(&mut self) -> &mut Option<Filter> {
        self.view.tab().filter(self)
    }

    fn move_selection(&mut self, snap: &Snapshot, delta: i64) {
        let rows = self.rows(snap);
        if rows.len() == 0 {
            return;
        }
        let at = self
            .jobs
            .selected
            .and_then(|id| rows.position(id))
            .unwrap_or(0) as i64;
        let next = (at + delta).clamp(0, rows.len() as i64 - 1) as usize;
        self.jobs.selected = rows.get(next).map(|j| j.id);
    }
}
