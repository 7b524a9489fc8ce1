//! Console state, keys and drawing. Pure over a `Snapshot`: tests render it on a TestBackend.

mod complete;
mod dialogs;
mod draw;
mod order;
mod views;

pub use order::columns;

use super::filter::Filter;
use crate::client::{JobRow, Snapshot};
use ratatui::style::{Color, Style};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Overview,
    Jobs,
    Fleet,
    Teams,
    Events,
}

impl View {
    /// Every view, in tab order.
    pub const ALL: [View; 5] = [
        View::Overview,
        View::Jobs,
        View::Fleet,
        View::Teams,
        View::Events,
    ];

    /// The tab's name without its key ("Overview").
    pub fn short(self) -> &'static str {
        &self.title()[2..]
    }

    fn title(self) -> &'static str {
        match self {
            View::Overview => "1 Overview",
            View::Jobs => "2 Jobs",
            View::Fleet => "3 Fleet",
            View::Teams => "4 Teams",
            View::Events => "5 Events",
        }
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
    Act(crate::client::JobRequest),
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
    ActMany(Vec<crate::client::JobRequest>),
    /// Fetch one job's detail to show it.
    Detail(i64),
    /// Ask the daemon where the form's spec would land.
    Preview(String),
    /// Submit the form's spec.
    Submit(String),
    /// Fetch one pool's nodes and GPUs to show them.
    Pool(usize),
    /// Fetch one node's GPUs over a range for the node view.
    Node {
        name: String,
        range: crate::daemon::state::history::Range,
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
        request: crate::client::JobRequest,
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
        action: crate::client::JobAction,
        ids: Vec<i64>,
        typed: String,
    },
}

impl Ask {
    /// What confirming does.
    fn outcome(&self) -> Outcome {
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
                    .map(|&id| crate::client::JobRequest {
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
    /// Where the Jobs table's first row was drawn and which row it was (for mouse clicks).
    jobs_geometry: std::cell::Cell<(u16, usize)>,
    /// The selected pool in the Fleet view (index into the snapshot's pools).
    pub pool_selected: usize,
    /// The pool shown node by node and GPU by GPU, and its index (refreshed as data change).
    pub pool_detail: Option<(usize, crate::client::PoolDetail)>,
    /// The node selected in the pool detail (its place in the pool's list).
    pub pool_node: usize,
    /// A node GPU by GPU over time, opened from the pool detail.
    pub node: Option<super::node::NodePane>,
    /// The submit form, while open.
    pub form: Option<super::form::Form>,
    /// The form as it was closed without submitting (reopening resumes it, cursor and all).
    pub draft: Option<super::form::Form>,
    /// The job shown in detail (over the Jobs view), once fetched.
    pub detail: Option<crate::client::JobView>,
    /// The log view (over the job's detail).
    pub logs: Option<super::logs::LogPane>,
    /// What the daemon lets this console's caller do; refused actions show why.
    pub access: crate::client::Access,
    /// Each view's order (by `View::ALL` index); the Jobs view's `None` is the queue order.
    pub sorts: [Option<crate::console::table::Sort>; 5],
    /// The Jobs view's order as last computed, and for what.
    row_order: std::cell::RefCell<Option<(order::OrderKey, order::Computed)>>,
    /// Running jobs in the last snapshot counted, and which snapshot that was.
    running: std::cell::Cell<Option<(order::SnapKey, usize)>>,
    /// Jobs marked with space for a bulk action.
    pub marked: std::collections::BTreeSet<i64>,
    /// Filters of the Jobs, Fleet and Events views.
    pub job_filter: Option<Filter>,
    pub pool_filter: Option<Filter>,
    pub event_filter: Option<Filter>,
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
    /// The last action's result, for the key bar.
    pub flash: Option<String>,
    /// The selected job, kept by id across refreshes.
    pub selected: Option<i64>,
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
pub fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

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
            sorts: [None; 5],
            row_order: Default::default(),
            running: Default::default(),
            pool_selected: 0,
            pool_detail: None,
            pool_node: 0,
            node: None,
            mouse: false,
            jobs_geometry: std::cell::Cell::new((0, 0)),
            form: None,
            draft: None,
            detail: None,
            logs: None,
            access: crate::client::Access::operator(),
            marked: Default::default(),
            job_filter: None,
            pool_filter: None,
            event_filter: None,
            help: false,
            help_scroll: 0,
            page: std::cell::Cell::new(20),
            lost: None,
            readonly: false,
            confirm: None,
            flash: None,
            selected: None,
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

    /// Handles one key (crossterm's KeyCode as a char or a name) through the keymap.
    pub fn on_key(&mut self, key: &str, snap: &Snapshot) -> Outcome {
        use super::keymap::Action;
        let action = self.keymap.action(key);
        if let Some(Confirm {
            ask: Ask::Bulk { ids, typed, .. },
            ..
        }) = &mut self.confirm
        {
            // A bulk action is confirmed only by typing the count, then Enter.
            match key {
                "enter" if *typed == ids.len().to_string() => {
                    let go = self.confirm.take().map(|c| c.ask.outcome());
                    return go.unwrap_or(Outcome::Redraw);
                }
                "esc" | "enter" => self.confirm = None,
                "backspace" => {
                    typed.pop();
                }
                k if k.len() == 1 && k.chars().all(|c| c.is_ascii_digit()) && typed.len() < 9 => {
                    typed.push_str(k)
                }
                _ => return Outcome::Nothing,
            }
            return Outcome::Redraw;
        }
        if let Some(c) = &mut self.confirm {
            // The dialog owns the keyboard: Enter does what has focus (Cancel at first), y
            // confirms, Esc/n/q cancel, arrows and Tab move the focus.
            match key {
                "enter" => {
                    let go = c.on_confirm.then(|| c.ask.outcome());
                    self.confirm = None;
                    return go.unwrap_or(Outcome::Redraw);
                }
                "y" => {
                    let go = c.ask.outcome();
                    self.confirm = None;
                    return go;
                }
                "esc" | "n" | "q" => self.confirm = None,
                "tab" | "left" | "right" | "h" | "l" => c.on_confirm = !c.on_confirm,
                _ => return Outcome::Nothing,
            }
            return Outcome::Redraw;
        }
        if let Some(p) = &mut self.prompt {
            // The candidates `tab` listed go with the next key.
            self.flash = None;
            match key {
                "esc" => self.prompt = None,
                "enter" => {
                    let p = self.prompt.take().expect("a prompt is open");
                    return self.submit(p, snap);
                }
                "tab" if p.kind == PromptKind::Command => {
                    let (text, note) = complete::complete(&p.text, &self.contexts, snap);
                    p.text = text;
                    self.flash = note;
                }
                "backspace" => {
                    p.text.pop();
                }
                k if k.chars().count() == 1 && p.text.len() < 200 => p.text.push_str(k),
                _ => return Outcome::Nothing,
            }
            return Outcome::Redraw;
        }
        if let Some(form) = &mut self.form {
            use super::form::FormKey;
            return match form.key(key) {
                FormKey::Edited => Outcome::Redraw,
                FormKey::Ignored => Outcome::Nothing,
                FormKey::Preview => Outcome::Preview(form.text()),
                FormKey::Submit(spec) => Outcome::Submit(spec),
                FormKey::Close => {
                    self.draft = self.form.take();
                    Outcome::Redraw
                }
            };
        }
        let scroll = self.motion(action, 3);
        if let Some(p) = self.logs.as_mut() {
            return match p.key(key, scroll) {
                super::logs::LogKey::Close => {
                    self.logs = None;
                    Outcome::Redraw
                }
                super::logs::LogKey::Fetch => Outcome::Logs {
                    id: p.job,
                    node: p.node,
                },
                super::logs::LogKey::Redraw => Outcome::Redraw,
                super::logs::LogKey::Nothing => Outcome::Nothing,
            };
        }
        if let Some(d) = &self.detail {
            // The detail closes on esc, enter or q; l opens the job's logs.
            return match key {
                "esc" | "enter" | "q" => {
                    self.detail = None;
                    Outcome::Redraw
                }
                "l" => {
                    let id = d.id;
                    self.logs = Some(super::logs::LogPane::new(id));
                    Outcome::Logs { id, node: None }
                }
                _ => Outcome::Nothing,
            };
        }
        let step = self.motion(action, 1);
        if let Some(n) = self.node.as_mut() {
            // Over a pool: j/k a GPU, r the range, enter the GPU's job, esc back to the pool.
            return match n.key(key, step) {
                super::node::NodeKey::Close => {
                    self.node = None;
                    Outcome::Redraw
                }
                super::node::NodeKey::Fetch => Outcome::Node {
                    name: n.name.clone(),
                    range: n.range,
                },
                super::node::NodeKey::Open(id) => Outcome::Detail(id),
                super::node::NodeKey::Redraw => Outcome::Redraw,
                super::node::NodeKey::Nothing => Outcome::Nothing,
            };
        }
        if let Some((_, pool)) = &self.pool_detail {
            // j/k (or the keymap's motions) select a node; enter opens it; esc or q go back; a
            // view's key leaves the pool for that view.
            let switch = matches!(
                action,
                Some(Action::View(_) | Action::NextView | Action::PrevView)
            );
            let nodes = pool.nodes.len();
            if switch {
                self.pool_detail = None;
                self.pool_node = 0;
                return self.on_key(key, snap);
            }
            return match (key, self.motion(action, 1)) {
                ("esc" | "q", _) => {
                    self.pool_detail = None;
                    self.pool_node = 0;
                    Outcome::Redraw
                }
                ("enter", _) => match pool.nodes.get(self.pool_node) {
                    Some(n) => {
                        let pane = super::node::NodePane::new(&n.name);
                        let out = Outcome::Node {
                            name: n.name.clone(),
                            range: pane.range,
                        };
                        self.node = Some(pane);
                        out
                    }
                    None => Outcome::Nothing,
                },
                (_, Some(n)) if nodes > 0 => {
                    // A page moves as many nodes as a screen holds (a node and its GPUs are
                    // about nine lines).
                    let by = if n.abs() > 1 { n / 9 } else { n };
                    let at =
                        self.pool_node as i64 + i64::from(if by == 0 { n.signum() } else { by });
                    self.pool_node = at.clamp(0, nodes as i64 - 1) as usize;
                    Outcome::Redraw
                }
                _ => Outcome::Nothing,
            };
        }
        if self.help {
            // The help scrolls (it is longer than 24 lines); esc, q, ? and enter close it.
            if let Some(n) = scroll.filter(|_| !matches!(key, "esc" | "q" | "?" | "enter")) {
                self.help_scroll = self.help_scroll.saturating_add_signed(n as i16);
                return Outcome::Redraw;
            }
            self.help = false;
            self.help_scroll = 0;
            return Outcome::Redraw;
        }
        let at = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0);
        self.flash = None;
        // Esc steps back: it clears the view's filter, then the marks.
        if key == "esc" && action.is_none() {
            if self.filter_mut().take().is_some() {
                return Outcome::Redraw;
            }
            if !self.marked.is_empty() {
                self.marked.clear();
                return Outcome::Redraw;
            }
            return Outcome::Nothing;
        }
        match action {
            None => return self.sort_letter(key),
            // A new filter replaces the one in force (shown in the view's title) once applied.
            Some(Action::Filter) => {
                self.prompt = Some(Prompt {
                    kind: PromptKind::Filter,
                    text: String::new(),
                });
            }
            Some(Action::Command) => {
                self.prompt = Some(Prompt {
                    kind: PromptKind::Command,
                    text: String::new(),
                })
            }
            Some(Action::Reprioritize) if self.readonly => return Outcome::Nothing,
            Some(Action::Reprioritize) => {
                self.prompt = Some(Prompt {
                    kind: PromptKind::Command,
                    text: "prio ".into(),
                })
            }
            Some(Action::Job(_)) if self.readonly => return Outcome::Nothing,
            Some(Action::Mark) if self.readonly => return Outcome::Nothing,
            Some(Action::Mark) if self.view == View::Jobs => {
                if let Some(id) = self.selected_job(snap).map(|j| j.id) {
                    if !self.marked.remove(&id) {
                        self.marked.insert(id);
                    }
                }
                self.move_selection(snap, 1);
            }
            Some(Action::Mark) => return Outcome::Nothing,
            Some(Action::Open) if self.view == View::Fleet => {
                return if self.visible_pools(snap).contains(&self.pool_selected) {
                    Outcome::Pool(self.pool_selected)
                } else {
                    Outcome::Nothing
                };
            }
            Some(Action::Open) if self.view == View::Jobs => {
                return self
                    .selected_job(snap)
                    .map_or(Outcome::Nothing, |j| Outcome::Detail(j.id));
            }
            Some(Action::Open) => return Outcome::Nothing,
            Some(Action::Mouse) => {
                self.mouse = !self.mouse;
                self.flash = Some(format!(
                    "mouse {}",
                    if self.mouse {
                        "on: click selects a job, the wheel scrolls (shift-drag selects text)"
                    } else {
                        "off: the terminal selects text"
                    }
                ));
            }
            Some(Action::Sort) => return self.sort_reverse(),
            Some(Action::SortNext) => return self.sort_step(1),
            Some(Action::SortPrev) => return self.sort_step(-1),
            Some(Action::Submit) if self.readonly => return Outcome::Nothing,
            Some(Action::Submit) => self.open_form(None),
            Some(Action::Job(what)) if !self.marked.is_empty() && self.view == View::Jobs => {
                // Only marked jobs still listed count; one the caller may not change stops it.
                let marked: Vec<&JobRow> = snap
                    .jobs
                    .iter()
                    .filter(|j| self.marked.contains(&j.id))
                    .collect();
                if let Some((j, why)) = marked
                    .iter()
                    .find_map(|j| self.access.forbids_job(&j.team).map(|w| (j, w)))
                {
                    self.flash = Some(format!("{}: job {}: {why}", what.name(), j.id));
                    return Outcome::Redraw;
                }
                let ids: Vec<i64> = marked.iter().map(|j| j.id).collect();
                self.confirm = Some(Confirm {
                    ask: Ask::Bulk {
                        action: what,
                        ids,
                        typed: String::new(),
                    },
                    on_confirm: false,
                });
            }
            Some(Action::Job(what)) => {
                let job = self.selected_job(snap);
                match (self.view, job) {
                    (View::Jobs, Some(j)) if self.access.forbids_job(&j.team).is_some() => {
                        let why = self.access.forbids_job(&j.team).unwrap_or_default();
                        self.flash = Some(format!("{}: {why}", what.name()));
                    }
                    (View::Jobs, Some(j)) => {
                        self.confirm = Some(Confirm {
                            ask: Ask::Job {
                                request: crate::client::JobRequest {
                                    id: j.id,
                                    action: what,
                                },
                                name: j.name.clone(),
                            },
                            on_confirm: false,
                        });
                    }
                    _ => {
                        self.flash = Some(format!(
                            "{}: select a job in the Jobs view first",
                            what.name()
                        ))
                    }
                }
            }
            Some(Action::Quit) => return Outcome::Quit,
            Some(Action::Help) => self.help = true,
            Some(Action::View(i)) => self.view = View::ALL[i.min(View::ALL.len() - 1)],
            Some(Action::NextView) => self.view = View::ALL[(at + 1) % View::ALL.len()],
            Some(Action::PrevView) => {
                self.view = View::ALL[(at + View::ALL.len() - 1) % View::ALL.len()]
            }
            Some(
                a @ (Action::Down
                | Action::Up
                | Action::PageDown
                | Action::PageUp
                | Action::HalfDown
                | Action::HalfUp),
            ) => {
                let n = self.motion(Some(a), 1).unwrap_or(0) as i64;
                match self.view {
                    View::Fleet => self.move_pool(snap, n),
                    _ => self.move_selection(snap, n),
                }
            }
            // g/G (home/end) in the Fleet view select the first/last pool as it is ordered.
            Some(Action::First) if self.view == View::Fleet => {
                if let Some(&i) = self.visible_pools(snap).first() {
                    self.pool_selected = i;
                }
            }
            Some(Action::Last) if self.view == View::Fleet => {
                if let Some(&i) = self.visible_pools(snap).last() {
                    self.pool_selected = i;
                }
            }
            Some(Action::First) => self.selected = self.rows(snap).get(0).map(|j| j.id),
            Some(Action::Last) => {
                let rows = self.rows(snap);
                self.selected = rows.get(rows.len().wrapping_sub(1)).map(|j| j.id)
            }
        }
        Outcome::Redraw
    }

    /// How many lines a motion moves (`line` for one step down or up; a page is the rows the
    /// last frame showed), negative upward; `None` for other actions.
    fn motion(&self, action: Option<super::keymap::Action>, line: i32) -> Option<i32> {
        use super::keymap::Action;
        let page = (self.page.get() as i32).max(1);
        Some(match action? {
            Action::Down => line,
            Action::Up => -line,
            Action::PageDown => page,
            Action::PageUp => -page,
            Action::HalfDown => (page / 2).max(1),
            Action::HalfUp => -(page / 2).max(1),
            _ => return None,
        })
    }

    /// A mouse event (only while mouse capture is on): the wheel moves the selection, a
    /// click on a row of the Jobs view selects it.
    pub fn on_mouse(&mut self, event: crossterm::event::MouseEvent, snap: &Snapshot) -> Outcome {
        use crossterm::event::{MouseButton, MouseEventKind};
        if !self.mouse
            || self.confirm.is_some()
            || self.form.is_some()
            || self.detail.is_some()
            || self.logs.is_some()
        {
            return Outcome::Nothing;
        }
        match event.kind {
            MouseEventKind::ScrollDown if self.view == View::Jobs => self.move_selection(snap, 1),
            MouseEventKind::ScrollUp if self.view == View::Jobs => self.move_selection(snap, -1),
            MouseEventKind::Down(MouseButton::Left) if self.view == View::Jobs => {
                let (top, first) = self.jobs_geometry.get();
                let Some(offset) = event.row.checked_sub(top) else {
                    return Outcome::Nothing;
                };
                let rows = self.rows(snap);
                match rows.get(first + usize::from(offset)) {
                    Some(j) => self.selected = Some(j.id),
                    None => return Outcome::Nothing,
                }
            }
            _ => return Outcome::Nothing,
        }
        Outcome::Redraw
    }

    /// The selected job among the Jobs view's rows (the first row when none is selected).
    fn selected_job<'a>(&self, snap: &'a Snapshot) -> Option<&'a JobRow> {
        let rows = self.rows(snap);
        self.selected
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
            .position(|&i| i == self.pool_selected)
            .unwrap_or(0) as i64;
        self.pool_selected = pools[(at + delta).clamp(0, pools.len() as i64 - 1) as usize];
    }

    /// How many jobs the Jobs view lists under its filter.
    pub fn rows_len(&self, snap: &Snapshot) -> usize {
        self.rows(snap).len()
    }

    /// The filter of the view in front (the Overview and Teams views filter jobs).
    fn filter_mut(&mut self) -> &mut Option<Filter> {
        match self.view {
            View::Fleet => &mut self.pool_filter,
            View::Events => &mut self.event_filter,
            _ => &mut self.job_filter,
        }
    }

    /// Applies a typed `/` filter or runs a `:` command.
    fn submit(&mut self, p: Prompt, snap: &Snapshot) -> Outcome {
        match p.kind {
            PromptKind::Filter => {
                if matches!(self.view, View::Overview | View::Teams) {
                    self.view = View::Jobs;
                }
                self.set_filter(p.text.trim());
                Outcome::Redraw
            }
            PromptKind::Command => self.command(p.text.trim(), snap),
        }
    }

    fn set_filter(&mut self, text: &str) {
        if text.is_empty() {
            *self.filter_mut() = None;
            return;
        }
        match Filter::parse(text) {
            Ok(f) => *self.filter_mut() = Some(f),
            Err(e) => self.flash = Some(e),
        }
    }

    /// `:` commands. Unknown ones say what exists.
    fn command(&mut self, line: &str, snap: &Snapshot) -> Outcome {
        let (verb, arg) = match line.split_once(char::is_whitespace) {
            Some((v, a)) => (v, a.trim()),
            None => (line, ""),
        };
        match (verb, arg) {
            ("q" | "quit", _) => return Outcome::Quit,
            ("help", _) => self.help = true,
            ("overview", _) => self.view = View::Overview,
            ("jobs", a) => {
                self.view = View::Jobs;
                self.set_filter(a);
            }
            ("fleet" | "gpus", a) => {
                self.view = View::Fleet;
                self.set_filter(a);
            }
            ("teams", _) => self.view = View::Teams,
            ("events", a) => {
                self.view = View::Events;
                self.set_filter(a);
            }
            ("team", "") => self.flash = Some(":team NAME: which team?".into()),
            ("team", name) => {
                self.view = View::Jobs;
                self.set_filter(&format!("team=^{}$", regex_lite::escape(name)));
                if !snap.teams.iter().any(|t| t.name == name) {
                    let known: Vec<&str> = snap.teams.iter().map(|t| t.name.as_str()).collect();
                    self.flash = Some(format!("no team `{name}`; teams: {}", known.join(", ")));
                }
            }
            ("job", id) => match id.trim_start_matches('#').parse::<i64>() {
                Ok(id) if snap.jobs.iter().any(|j| j.id == id) => {
                    self.view = View::Jobs;
                    self.job_filter = None;
                    self.selected = Some(id);
                }
                _ => self.flash = Some(format!("job `{id}`: not among the listed jobs")),
            },
            ("reclaim", _) => return Outcome::Reclaim { apply: None },
            ("submit", "") => self.open_form(None),
            ("submit", file) => match std::fs::read_to_string(file) {
                Ok(text) => self.open_form(Some(text)),
                Err(e) => self.flash = Some(format!(":submit {file}: {e}")),
            },
            ("prio", class) => self.ask_priority(class, snap),
            ("ctx", "") => {
                self.flash = Some(if self.contexts.is_empty() {
                    "no contexts: list daemons in console.toml ([[contexts]] name, connect, token_file; `gantry info --print-console`)".into()
                } else {
                    let list: Vec<String> = self
                        .contexts
                        .iter()
                        .map(|(n, at)| {
                            let here = self.source.ends_with(at.as_str());
                            format!("{}{n} ({at})", if here { "*" } else { "" })
                        })
                        .collect();
                    format!("contexts: {}; :ctx NAME switches", list.join(", "))
                })
            }
            ("ctx", name) => {
                if self.contexts.iter().any(|(n, _)| n == name) {
                    return Outcome::Switch(name.to_string());
                }
                let names: Vec<&str> = self.contexts.iter().map(|(n, _)| n.as_str()).collect();
                self.flash = Some(format!(
                    ":ctx {name}: no such context; contexts: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
            }
            ("", _) => return Outcome::Redraw,
            (other, _) => {
                self.flash = Some(format!(
                    "unknown command `:{other}`; try {} (tab completes)",
                    complete::COMMANDS
                        .iter()
                        .map(|(c, arg)| format!(
                            ":{c}{}{arg}",
                            if arg.is_empty() { "" } else { " " }
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
        Outcome::Redraw
    }

    /// Opens the submit form on `text`, else the draft, else the template.
    fn open_form(&mut self, text: Option<String>) {
        if self.readonly {
            self.flash = Some("read-only: submitting is off".into());
            return;
        }
        if self.access.role == crate::daemon::auth::Role::Viewer {
            self.flash = Some("your viewer token may not submit jobs".into());
            return;
        }
        self.form = match text {
            Some(t) => Some(super::form::Form::new(&t)),
            None => self
                .draft
                .take()
                .or_else(|| Some(super::form::Form::new(super::form::TEMPLATE))),
        };
    }

    /// The daemon accepted the form's job: close the form and show the job.
    pub fn submitted(&mut self, id: i64) {
        self.form = None;
        self.draft = None;
        self.view = View::Jobs;
        self.job_filter = None;
        self.selected = Some(id);
        self.flash = Some(format!("job {id} submitted"));
    }

    /// `:prio CLASS` on the selected job: asks first, Cancel the default.
    fn ask_priority(&mut self, class: &str, snap: &Snapshot) {
        if self.readonly {
            self.flash = Some("read-only: reprioritizing is off".into());
            return;
        }
        let classes: Vec<&str> = snap
            .queue_by_class
            .iter()
            .map(|(c, _)| c.as_str())
            .collect();
        if !classes.contains(&class) {
            self.flash = Some(format!(
                ":prio CLASS: `{class}` is not a class; classes: {}",
                classes.join(", ")
            ));
            return;
        }
        let job = self.selected_job(snap);
        match (self.view, job) {
            (View::Jobs, Some(j)) if j.class == class => {
                self.flash = Some(format!("job {} is already {class}", j.id));
            }
            (View::Jobs, Some(j)) if self.access.forbids_job(&j.team).is_some() => {
                let why = self.access.forbids_job(&j.team).unwrap_or_default();
                self.flash = Some(format!("prio: {why}"));
            }
            (View::Jobs, Some(j)) => {
                self.confirm = Some(Confirm {
                    ask: Ask::Prio {
                        id: j.id,
                        name: j.name.clone(),
                        from: j.class.clone(),
                        to: class.to_string(),
                    },
                    on_confirm: false,
                })
            }
            _ => self.flash = Some(":prio: select a job in the Jobs view first".into()),
        }
    }

    /// The daemon's reclaim plan came back: ask before applying it (or, read-only, show it).
    pub fn review_reclaim(&mut self, plan: crate::scheduler::reclaim::ReclaimPlan) {
        if plan.items.is_empty() {
            self.flash =
                Some("nothing to reclaim: no job's GPUs have been idle through the window".into());
        } else if let Some(why) = self
            .readonly
            .then(|| "read-only: not applied".to_string())
            .or_else(|| self.access.forbids_reclaim())
        {
            self.flash = Some(format!(
                "reclaimable: {} job(s), {} GPU(s), ${:.2}/h ({why})",
                plan.items.len(),
                crate::client::gpus_text(plan.gpus_freed),
                plan.dollars_per_hour_saved
            ));
        } else {
            self.confirm = Some(Confirm {
                ask: Ask::Reclaim(plan),
                on_confirm: false,
            });
        }
    }

    fn move_selection(&mut self, snap: &Snapshot, delta: i64) {
        let rows = self.rows(snap);
        if rows.len() == 0 {
            return;
        }
        let at = self.selected.and_then(|id| rows.position(id)).unwrap_or(0) as i64;
        let next = (at + delta).clamp(0, rows.len() as i64 - 1) as usize;
        self.selected = rows.get(next).map(|j| j.id);
    }
}
