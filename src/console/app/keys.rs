//! Keys and the mouse: what each does, depending on what is open — a confirmation, the `/` or
//! `:` prompt, the submit form, a job's logs or detail, a node, a pool, the help — else the
//! view's own keys.

use super::*;

impl App {
    /// Handles one key (crossterm's KeyCode as a char or a name) through the keymap.
    pub fn on_key(&mut self, key: &str, snap: &Snapshot) -> Outcome {
        use crate::console::keymap::Action;
        let action = self.keymap.action(key);
        if let Some(Confirm {
            ask: Ask::Bulk { ids, typed, .. },
            ..
        }) = &mut self.confirm
        {
            // A bulk action is confirmed only by typing the count, then Enter.
            match key {
                "enter" if *typed == ids.len().to_string() => {
                    let shown = self.what_if.as_ref();
                    let go = self.confirm.take().map(|c| c.ask.confirmed(shown));
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
                "enter" | "y" => {
                    let go = (key == "y" || c.on_confirm).then(|| c.ask.clone());
                    self.confirm = None;
                    return match go {
                        Some(ask) => ask.confirmed(self.what_if.as_ref()),
                        None => Outcome::Redraw,
                    };
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
            use crate::console::form::FormKey;
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
                crate::console::logs::LogKey::Close => {
                    self.logs = None;
                    Outcome::Redraw
                }
                crate::console::logs::LogKey::Fetch => Outcome::Logs {
                    id: p.job,
                    node: p.node,
                },
                crate::console::logs::LogKey::Redraw => Outcome::Redraw,
                crate::console::logs::LogKey::Nothing => Outcome::Nothing,
            };
        }
        if let Some(d) = &self.detail {
            // The detail closes on esc, enter or q; l opens the job's logs; j/k, the page
            // keys, g and G scroll it.
            let max = i32::from(self.detail_max.get());
            let scroll = i32::from(self.detail_scroll.min(self.detail_max.get()));
            let to = match (key, self.motion(action, 1)) {
                ("g" | "home", _) => Some(0),
                ("G" | "end", _) => Some(max),
                (_, Some(step)) => Some((scroll + step).clamp(0, max)),
                _ => None,
            };
            if let Some(to) = to {
                self.detail_scroll = to as u16;
                return Outcome::Redraw;
            }
            return match key {
                "esc" | "enter" | "q" => {
                    self.detail = None;
                    Outcome::Redraw
                }
                "l" => {
                    let id = d.id;
                    self.logs = Some(crate::console::logs::LogPane::new(id));
                    Outcome::Logs { id, node: None }
                }
                _ if action == Some(Action::Shell) && !self.readonly => Outcome::Shell(d.id),
                _ => Outcome::Nothing,
            };
        }
        let step = self.motion(action, 1);
        if let Some(n) = self.node.as_mut() {
            // Over a pool: j/k a GPU, r the range, enter the GPU's job, esc back to the pool.
            return match n.key(key, step) {
                crate::console::node::NodeKey::Close => {
                    self.node = None;
                    Outcome::Redraw
                }
                crate::console::node::NodeKey::Fetch => Outcome::Node {
                    name: n.name.clone(),
                    range: n.range,
                },
                crate::console::node::NodeKey::Open(id) => Outcome::Detail(id),
                crate::console::node::NodeKey::Redraw => Outcome::Redraw,
                crate::console::node::NodeKey::Nothing => Outcome::Nothing,
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
                        let pane = crate::console::node::NodePane::new(&n.name);
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
        let at = self.view.index();
        self.flash = None;
        // Esc steps back: it clears the view's filter, then the marks.
        if key == "esc" && action.is_none() {
            if self.filter_mut().take().is_some() {
                return Outcome::Redraw;
            }
            if !self.jobs.marked.is_empty() {
                self.jobs.marked.clear();
                return Outcome::Redraw;
            }
            return Outcome::Nothing;
        }
        // What would change something is not offered to a read-only console at all; then the
        // view's own keys (open, move, mark, act on a job), then what every view does.
        if let Some(a) = action {
            let changes = matches!(
                a,
                Action::Job(_)
                    | Action::Mark
                    | Action::Shell
                    | Action::Submit
                    | Action::Reprioritize
            );
            if self.readonly && changes {
                return Outcome::Nothing;
            }
            if let Some(out) = self.view.tab().key(self, a, snap) {
                return out;
            }
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
            Some(Action::Reprioritize) => {
                self.prompt = Some(Prompt {
                    kind: PromptKind::Command,
                    text: "prio ".into(),
                })
            }
            Some(Action::Mark) => return Outcome::Nothing,
            Some(Action::Open) => return Outcome::Nothing,
            Some(Action::Shell) => return Outcome::Nothing,
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
            Some(Action::Submit) => self.open_form(None, snap),
            Some(Action::Job(what)) => {
                self.flash = Some(format!(
                    "{}: select a job in the Jobs view first",
                    what.name()
                ))
            }
            Some(Action::Quit) => return Outcome::Quit,
            Some(Action::Help) => self.help = true,
            Some(Action::View(v)) => self.view = v,
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
                self.move_selection(snap, n);
            }
            Some(Action::First) => self.jobs.selected = self.rows(snap).get(0).map(|j| j.id),
            Some(Action::Last) => {
                let rows = self.rows(snap);
                self.jobs.selected = rows.get(rows.len().wrapping_sub(1)).map(|j| j.id)
            }
        }
        Outcome::Redraw
    }

    /// How many lines a motion moves (`line` for one step down or up; a page is the rows the
    /// last frame showed), negative upward; `None` for other actions.
    pub(super) fn motion(
        &self,
        action: Option<crate::console::keymap::Action>,
        line: i32,
    ) -> Option<i32> {
        use crate::console::keymap::Action;
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
        if !self.mouse
            || self.confirm.is_some()
            || self.form.is_some()
            || self.detail.is_some()
            || self.logs.is_some()
        {
            return Outcome::Nothing;
        }
        self.view.tab().mouse(self, event, snap)
    }
}
