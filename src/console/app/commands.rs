//! What the `/` and `:` prompts run, and the dialogs a command or key opens (the submit form,
//! a reprioritization, the reclaim sweep's review).

use super::*;

impl App {
    /// Applies a typed `/` filter or runs a `:` command.
    pub(super) fn submit(&mut self, p: Prompt, snap: &Snapshot) -> Outcome {
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

    pub(super) fn set_filter(&mut self, text: &str) {
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
    pub(super) fn command(&mut self, line: &str, snap: &Snapshot) -> Outcome {
        let (verb, arg) = match line.split_once(char::is_whitespace) {
            Some((v, a)) => (v, a.trim()),
            None => (line, ""),
        };
        // A view's name opens it (`:jobs team=ml` with its filter).
        if let Some(view) = View::named(verb) {
            self.view = view;
            if view.takes_filter() {
                self.set_filter(arg);
            }
            return Outcome::Redraw;
        }
        match (verb, arg) {
            ("q" | "quit", _) => return Outcome::Quit,
            ("help", _) => self.help = true,
            ("gpus", a) => {
                self.view = View::Fleet;
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
                    self.jobs.filter = None;
                    self.jobs.selected = Some(id);
                }
                _ => self.flash = Some(format!("job `{id}`: not among the listed jobs")),
            },
            ("reclaim", _) => return Outcome::Reclaim { apply: None },
            ("submit", "") => self.open_form(None, snap),
            ("submit", file) => match std::fs::read_to_string(file) {
                Ok(text) => self.open_form(Some(text), snap),
                Err(e) => self.flash = Some(format!(":submit {file}: {e}")),
            },
            ("prio", class) => return self.ask_priority(class, snap),
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
                    complete::commands()
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

    /// Opens the submit form on `text`, else the draft, else the template for the fleet in
    /// force.
    pub(super) fn open_form(&mut self, text: Option<String>, snap: &Snapshot) {
        if self.readonly {
            self.flash = Some("read-only: submitting is off".into());
            return;
        }
        if self.access.role == crate::api::Role::Viewer {
            self.flash = Some("your viewer token may not submit jobs".into());
            return;
        }
        self.form = match text {
            Some(t) => Some(crate::console::form::Form::new(&t)),
            None => self.draft.take().or_else(|| {
                let team = self.access.team.as_deref();
                Some(crate::console::form::Form::new(
                    &crate::console::form::template_for(snap, team),
                ))
            }),
        };
    }

    /// The daemon accepted the form's job: close the form and show the job.
    pub fn submitted(&mut self, id: i64) {
        self.form = None;
        self.draft = None;
        self.view = View::Jobs;
        self.jobs.filter = None;
        self.jobs.selected = Some(id);
        self.flash = Some(format!("job {id} submitted"));
    }

    /// `:prio CLASS` on the selected job: asks first, Cancel the default, and asks the daemon
    /// what the move would do as the dialog opens.
    pub(super) fn ask_priority(&mut self, class: &str, snap: &Snapshot) -> Outcome {
        if self.readonly {
            self.flash = Some("read-only: reprioritizing is off".into());
            return Outcome::Redraw;
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
            return Outcome::Redraw;
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
                });
                self.what_if = None;
                return Outcome::WhatIfPrio {
                    id: j.id,
                    class: class.to_string(),
                };
            }
            _ => self.flash = Some(":prio: select a job in the Jobs view first".into()),
        }
        Outcome::Redraw
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
                crate::api::gpus_text(plan.gpus_freed),
                plan.dollars_per_hour_saved
            ));
        } else {
            self.confirm = Some(Confirm {
                ask: Ask::Reclaim(plan),
                on_confirm: false,
            });
        }
    }
}
