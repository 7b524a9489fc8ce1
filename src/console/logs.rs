//! The console's log view: a job's stdout and stderr over the whole body, every node's (a
//! multi-node job's lines marked `[node K]`) or one node's; `[` and `]` step through the
//! nodes, `f` follows, j/k and the page keys scroll back, `/` searches (`n`/`N` the next and
//! previous match, highlighted), `w` wraps long lines, `s` saves what is shown to a file.
//! Following reads the same stream as `gantry logs -f`: what was written since the last
//! read's cursors, every line once; a job that writes more between two reads than the view
//! holds is skipped ahead to its tail, saying so. The view keeps the last `TAIL` lines of
//! each stream, so a job that writes fast costs the console bounded memory.

use crate::api::{LogsFrom, LogsView};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// How many lines of each stream the view asks for.
pub const TAIL: usize = 500;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogPane {
    pub job: i64,
    /// One node's logs (by rank), or every node's.
    pub node: Option<usize>,
    /// The nodes the job ran on, by rank (from the last answer for every node).
    pub nodes: Vec<String>,
    pub view: LogsView,
    /// Why the last fetch failed (the lines shown are from before it).
    pub error: Option<String>,
    pub follow: bool,
    /// Lines scrolled back from the end.
    pub back: u16,
    /// Long lines wrap at the pane's width (else they are cut).
    pub wrap: bool,
    /// The search being typed (`/`), if the prompt is open.
    pub typing: Option<String>,
    /// The last search; its matches are highlighted.
    pub search: Option<String>,
    /// What the last `s`, `n` or `N` did, for the pane's bottom line.
    pub note: Option<String>,
    /// Where a followed read continues (the last answer's cursors); `None`: read the tail.
    pub cursor: Option<String>,
    /// The job has ended: one last read takes a last line its newline never came for.
    pub ending: bool,
    /// Every node's lines in the order they arrived (rank, line), for the view of every node:
    /// a followed node's new lines come at the bottom, as `gantry logs -f` prints them, not
    /// inside its block above the next node's. A tail read starts it node by node.
    pub arrived: Vec<(usize, crate::api::logs::LogLine)>,
}

/// What a key in the log view asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKey {
    Close,
    /// Fetch again (another node, or following).
    Fetch,
    Redraw,
    Nothing,
}

impl LogPane {
    pub fn new(job: i64) -> LogPane {
        LogPane {
            job,
            follow: true,
            ..LogPane::default()
        }
    }

    /// Takes the answer to a read of the tail (on opening, on another node).
    pub fn update(&mut self, got: Result<LogsView, String>) {
        self.take(&LogsFrom::Tail(TAIL), got);
    }

    /// What the next read of a followed view asks: what was written since the last answer
    /// (or the tail, first and after a skip).
    pub fn next_read(&self) -> LogsFrom {
        match &self.cursor {
            Some(c) => LogsFrom::After {
                cursors: c.clone(),
                partial: self.ending,
            },
            None => LogsFrom::Tail(TAIL),
        }
    }

    /// Takes the answer to `read`: a tail replaces what is shown; lines since a cursor are
    /// added to it (the last `2 × TAIL` of each node kept).
    pub fn take(&mut self, read: &LogsFrom, got: Result<LogsView, String>) {
        let v = match got {
            Ok(v) => v,
            Err(why) => {
                self.error = Some(why);
                return;
            }
        };
        self.error = None;
        if self.node.is_none() {
            self.nodes = v.nodes.iter().map(|n| n.node.clone()).collect();
        }
        let cursors = v.cursors();
        let (partial, added) = match read {
            LogsFrom::Tail(_) => {
                let ended = v.is_final;
                self.arrived = v
                    .nodes
                    .iter()
                    .flat_map(|n| n.lines.iter().map(|l| (n.rank, l.clone())))
                    .collect();
                self.view = v;
                (true, ended)
            }
            LogsFrom::After { partial, .. } => {
                let mut most = 0;
                for n in v.nodes {
                    most = most.max(n.lines.len());
                    self.arrived
                        .extend(n.lines.iter().map(|l| (n.rank, l.clone())));
                    match self.view.nodes.iter_mut().find(|m| m.rank == n.rank) {
                        Some(m) => {
                            m.lines.extend(n.lines);
                            let over = m.lines.len().saturating_sub(2 * TAIL);
                            m.lines.drain(..over);
                            m.cursor = n.cursor;
                            m.error = n.error;
                        }
                        None => self.view.nodes.push(n),
                    }
                }
                let keep = 2 * TAIL * self.view.nodes.len().max(1);
                let over = self.arrived.len().saturating_sub(keep);
                self.arrived.drain(..over);
                self.view.is_final = v.is_final;
                // More than the view holds came since the last read: the next starts at the
                // tail rather than falling behind a job that writes faster than it is shown.
                if most >= TAIL {
                    self.note =
                        Some("skipped ahead: the job writes faster than the view follows".into());
                    self.cursor = None;
                    return;
                }
                (*partial, v.is_final)
            }
        };
        self.cursor = Some(cursors);
        if added {
            // Ended: a last read with the line its newline never came for, then no more.
            if partial {
                self.follow = false;
            } else {
                self.ending = true;
            }
        }
    }

    /// `scroll`: lines the keymap's motion asks (positive: toward the end), if the key is one.
    pub fn key(&mut self, key: &str, scroll: Option<i32>) -> LogKey {
        if let Some(t) = &mut self.typing {
            match key {
                "esc" => self.typing = None,
                "enter" => {
                    let t = self.typing.take().unwrap_or_default();
                    self.search = (!t.is_empty()).then_some(t);
                    self.follow = false;
                    self.jump(true, true);
                }
                "backspace" => {
                    t.pop();
                }
                k if k.chars().count() == 1 && t.len() < 200 => t.push_str(k),
                _ => return LogKey::Nothing,
            }
            return LogKey::Redraw;
        }
        self.note = None;
        match key {
            "esc" if self.search.is_some() => {
                self.search = None;
                LogKey::Redraw
            }
            "esc" | "q" => LogKey::Close,
            "/" => {
                self.typing = Some(String::new());
                LogKey::Redraw
            }
            "n" | "N" if self.search.is_some() => {
                self.follow = false;
                self.jump(key == "n", false);
                LogKey::Redraw
            }
            "w" => {
                self.wrap = !self.wrap;
                self.back = 0;
                LogKey::Redraw
            }
            "s" => {
                self.note = Some(self.save());
                LogKey::Redraw
            }
            "]" | "[" => {
                let n = self.nodes.len();
                if n < 2 {
                    return LogKey::Nothing;
                }
                // every node → 0 → 1 … → n-1 → every node (and back the other way).
                self.node = match (key, self.node) {
                    ("]", None) => Some(0),
                    ("]", Some(k)) if k + 1 < n => Some(k + 1),
                    ("]", Some(_)) => None,
                    (_, None) => Some(n - 1),
                    (_, Some(0)) => None,
                    (_, Some(k)) => Some(k - 1),
                };
                self.back = 0;
                LogKey::Fetch
            }
            "f" => {
                self.follow = !self.follow;
                if self.follow {
                    self.back = 0;
                    LogKey::Fetch
                } else {
                    LogKey::Redraw
                }
            }
            _ => match scroll {
                Some(n) if n > 0 => {
                    self.back = self.back.saturating_sub(n.unsigned_abs() as u16);
                    LogKey::Redraw
                }
                Some(n) => {
                    self.back = self.back.saturating_add(n.unsigned_abs() as u16);
                    LogKey::Redraw
                }
                None => LogKey::Nothing,
            },
        }
    }

    /// The text of every line shown, in order, with its stream (node marks included).
    fn texts(&self) -> Vec<(String, bool)> {
        self.texts_in(0, usize::MAX)
    }

    /// How many lines `texts` has.
    fn count(&self) -> usize {
        let errors = self.view.nodes.iter().filter(|n| n.error.is_some()).count();
        if self.every_node() {
            return errors + self.arrived.len();
        }
        self.view.nodes.iter().map(|n| n.lines.len()).sum::<usize>() + errors
    }

    /// Whether every node of a multi-node job is shown (lines marked `[node K]`, in the
    /// order they arrived).
    fn every_node(&self) -> bool {
        self.node.is_none() && self.view.nodes.len() > 1
    }

    /// Lines `skip..skip + take` of `texts`, formatting only those (a frame draws a screenful of
    /// the 500 lines of each stream it holds).
    fn texts_in(&self, skip: usize, take: usize) -> Vec<(String, bool)> {
        if self.every_node() {
            return self.every_node_texts(skip, take);
        }
        let mut out = Vec::new();
        let mut at = 0usize;
        let end = skip.saturating_add(take);
        for n in &self.view.nodes {
            if at >= end {
                break;
            }
            if let Some(why) = &n.error {
                if at >= skip {
                    out.push((
                        format!("node {} ({}): {}", n.rank, super::app::escape(&n.node), why),
                        true,
                    ));
                }
                at += 1;
            }
            let from = skip.saturating_sub(at).min(n.lines.len());
            let to = end.saturating_sub(at).min(n.lines.len());
            for l in &n.lines[from..to.max(from)] {
                out.push((
                    super::app::escape(&l.text),
                    l.stream == crate::api::logs::Stream::Err,
                ));
            }
            at += n.lines.len();
        }
        out
    }

    /// `texts_in` for every node: each node's error first, then the lines as they arrived.
    fn every_node_texts(&self, skip: usize, take: usize) -> Vec<(String, bool)> {
        let errors = self.view.nodes.iter().filter_map(|n| {
            let why = n.error.as_ref()?;
            Some((
                format!("node {} ({}): {}", n.rank, super::app::escape(&n.node), why),
                true,
            ))
        });
        let lines = self.arrived.iter().map(|(rank, l)| {
            (
                format!("[node {rank}] {}", super::app::escape(&l.text)),
                l.stream == crate::api::logs::Stream::Err,
            )
        });
        errors.chain(lines).skip(skip).take(take).collect()
    }

    /// Scrolls so that the next match above the line at the top of the screen (`older`), or
    /// below it, is the last line shown; `fresh`: a new search starts from the end.
    fn jump(&mut self, older: bool, fresh: bool) {
        let Some(q) = self.search.as_deref().map(str::to_lowercase) else {
            return;
        };
        let texts = self.texts();
        let n = texts.len();
        // The line now at the bottom of the screen, counted from the end.
        let here = if fresh { 0 } else { usize::from(self.back) };
        let hit = |i: usize| texts[i].0.to_lowercase().contains(&q);
        let found = if older || fresh {
            (0..n.saturating_sub(here + usize::from(!fresh)))
                .rev()
                .find(|&i| hit(i))
        } else {
            (n.saturating_sub(here)..n).find(|&i| hit(i))
        };
        match found {
            Some(i) => self.back = (n - 1 - i).min(usize::from(u16::MAX)) as u16,
            None => {
                self.note = Some(format!(
                    "`{}`: no more matches",
                    self.search.as_deref().unwrap_or("")
                ))
            }
        }
    }

    /// Writes the lines shown to `gantry-job-ID[-node-K].log` in the working directory.
    fn save(&self) -> String {
        let name = match self.node {
            Some(k) => format!("gantry-job-{}-node-{k}.log", self.job),
            None => format!("gantry-job-{}.log", self.job),
        };
        let mut text = String::new();
        for (l, _) in self.texts() {
            text.push_str(&l);
            text.push('\n');
        }
        match std::fs::write(&name, text) {
            Ok(()) => format!(
                "saved {} line(s) to {}",
                self.texts().len(),
                std::env::current_dir()
                    .map(|d| d.join(&name).display().to_string())
                    .unwrap_or(name)
            ),
            Err(e) => format!("could not save {name}: {e}"),
        }
    }

    pub fn render(&self, f: &mut Frame, area: Rect, muted: Style, error: Style) {
        let width = usize::from(area.width.saturating_sub(2)).max(1);
        let q = self.search.as_deref().map(str::to_lowercase);
        let inner = area.height.saturating_sub(2);
        // Unwrapped, only the screenful shown is formatted; wrapped, every line is (how many
        // screen lines each takes decides the scroll).
        let total = self.count() + usize::from(self.error.is_some());
        let texts = if self.wrap {
            self.texts()
        } else {
            let first = total
                .saturating_sub(usize::from(inner))
                .saturating_sub(usize::from(self.back));
            self.texts_in(first, usize::from(inner))
        };
        let mut lines: Vec<Line> = Vec::new();
        for (text, is_err) in texts {
            let mut style = if is_err { error } else { Style::default() };
            if q.as_deref()
                .is_some_and(|q| text.to_lowercase().contains(q))
            {
                style = style.add_modifier(Modifier::REVERSED);
            }
            if self.wrap {
                for piece in wrap(&text, width) {
                    lines.push(Line::from(Span::styled(piece, style)));
                }
            } else {
                // Cut at the pane's edge, saying so (`w` wraps them whole).
                let shown = super::table::cut(&text, width).into_owned();
                lines.push(Line::from(Span::styled(shown, style)));
            }
        }
        if total == 0 {
            lines.push(Line::from(Span::styled("no output yet", muted)));
        }
        if let Some(why) = &self.error {
            lines.push(Line::from(Span::styled(
                format!("(fetch failed: {why})"),
                error,
            )));
        }
        let top = if self.wrap {
            let max = (lines.len() as u16).saturating_sub(inner);
            max.saturating_sub(self.back)
        } else {
            0
        };
        let which = match self.node {
            None if self.nodes.len() > 1 => format!("all {} nodes", self.nodes.len()),
            None => self.nodes.first().cloned().unwrap_or_default(),
            Some(k) => format!(
                "node {k} of {} ({})",
                self.nodes.len(),
                self.nodes.get(k).map_or("", String::as_str)
            ),
        };
        let title = format!(
            " logs of job {} · {} · {}{} ",
            self.job,
            super::app::escape(&which),
            if self.follow { "following" } else { "paused" },
            if self.nodes.len() > 1 {
                " · [ ] node"
            } else {
                ""
            },
        );
        f.render_widget(
            Paragraph::new(lines).scroll((top, 0)).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(Span::styled(
                        title,
                        Style::default().add_modifier(Modifier::BOLD),
                    ))
                    .title_bottom(self.bottom_line()),
            ),
            area,
        );
    }

    /// The pane's bottom line: the search being typed, what the last key did, or the keys.
    fn bottom_line(&self) -> String {
        if let Some(t) = &self.typing {
            return format!(" /{}█  enter search · esc cancel ", super::app::escape(t));
        }
        if let Some(n) = &self.note {
            return format!(" {n} ");
        }
        // `f` says what it will do: the view opens following, so its first press pauses.
        format!(
            " f {} · / search{} · w wrap{} · s save · j/k scroll · esc back ",
            if self.follow { "pause" } else { "follow" },
            if self.search.is_some() { " (n/N)" } else { "" },
            if self.wrap { " (on)" } else { "" }
        )
    }
}

/// `text` in pieces at most `width` terminal columns wide.
fn wrap(text: &str, width: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthChar;
    let mut out = vec![String::new()];
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width && used > 0 {
            out.push(String::new());
            used = 0;
        }
        out.last_mut().expect("one piece at least").push(c);
        used += w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::logs::{LogLine, Stream};
    use crate::api::{LogsView, NodeLogsView};

    fn pane(lines: &[&str]) -> LogPane {
        let mut p = LogPane::new(7);
        p.view = LogsView {
            nodes: vec![NodeLogsView {
                rank: 0,
                node: "n0".into(),
                lines: lines
                    .iter()
                    .map(|t| LogLine {
                        stream: Stream::Out,
                        text: t.to_string(),
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        p
    }

    #[test]
    fn slash_finds_matches_from_the_end_and_n_steps_back() {
        let mut p = pane(&[
            "loss 3.1", "step 2", "loss 2.0", "step 4", "loss 1.2", "done",
        ]);
        for k in ["/", "L", "o", "s", "s", "enter"] {
            p.key(k, None);
        }
        assert_eq!(p.search.as_deref(), Some("Loss"));
        assert!(!p.follow, "a search stops following");
        assert_eq!(
            p.back, 1,
            "the newest match (loss 1.2) is the last line shown"
        );
        p.key("n", None);
        assert_eq!(p.back, 3, "n: the one before (loss 2.0)");
        p.key("n", None);
        assert_eq!(p.back, 5);
        p.key("n", None);
        assert_eq!(p.back, 5, "no more matches above");
        assert!(p.note.as_deref().unwrap_or("").contains("no more matches"));
        p.key("N", None);
        assert_eq!(p.back, 3, "N: the next one down");
        assert_eq!(
            p.key("esc", None),
            LogKey::Redraw,
            "esc clears the search first"
        );
        assert_eq!(p.key("esc", None), LogKey::Close);
    }

    /// A followed 2-node job: each node's new lines come at the bottom, in the order they
    /// were read (as `gantry logs -f` prints them), not inside node 0's block above node 1's.
    #[test]
    fn every_nodes_new_lines_come_at_the_bottom() {
        let two = |a: &[&str], b: &[&str]| {
            let mut v = pane(a).view;
            let mut n1 = pane(b).view.nodes.remove(0);
            n1.rank = 1;
            n1.node = "n1".into();
            v.nodes.push(n1);
            Ok(v)
        };
        let mut p = LogPane::new(7);
        p.take(&LogsFrom::Tail(TAIL), two(&["a1"], &["b1"]));
        p.take(
            &LogsFrom::After {
                cursors: String::new(),
                partial: false,
            },
            two(&["a2"], &[]),
        );
        p.take(
            &LogsFrom::After {
                cursors: String::new(),
                partial: false,
            },
            two(&[], &["b2"]),
        );
        let texts: Vec<String> = p.texts().into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            texts,
            ["[node 0] a1", "[node 1] b1", "[node 0] a2", "[node 1] b2"]
        );
        // The screen's last two lines are the newest, whichever node wrote them.
        let last: Vec<String> = p.texts_in(2, 2).into_iter().map(|(t, _)| t).collect();
        assert_eq!(last, ["[node 0] a2", "[node 1] b2"]);
        // One node's view is that node's lines alone, unmarked.
        p.node = Some(0);
        p.view.nodes.truncate(1);
        let texts: Vec<String> = p.texts().into_iter().map(|(t, _)| t).collect();
        assert_eq!(texts, ["a1", "a2"]);
    }

    #[test]
    fn long_lines_wrap_by_display_width() {
        assert_eq!(wrap("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(wrap("训练任务", 5), ["训练", "任务"]);
        assert_eq!(wrap("", 4), [""]);
    }

    fn answer(lines: &[&str], cursor: &str, is_final: bool) -> Result<LogsView, String> {
        let mut v = pane(lines).view;
        v.nodes[0].cursor = cursor.into();
        v.is_final = is_final;
        Ok(v)
    }

    fn shown(p: &LogPane) -> Vec<String> {
        p.view.nodes[0]
            .lines
            .iter()
            .map(|l| l.text.clone())
            .collect()
    }

    /// Following reads what was written since the last read, as `gantry logs -f` does: every
    /// line once, in order; the ended job's last line (no newline) in one last partial read.
    #[test]
    fn following_adds_each_line_once_from_the_cursor_and_ends_with_the_last_line() {
        let mut p = LogPane::new(7);
        p.update(answer(&["a", "b"], "2,0", false));
        let next = p.next_read();
        assert_eq!(
            next,
            LogsFrom::After {
                cursors: "2,0".into(),
                partial: false
            }
        );
        p.take(&next, answer(&["c"], "3,0", false));
        p.take(&p.next_read(), answer(&[], "3,0", false));
        assert_eq!(shown(&p), ["a", "b", "c"], "nothing twice, nothing missed");
        // The job ends: one more read takes a last line without its newline, then none.
        p.take(&p.next_read(), answer(&[], "3,0", true));
        assert!(p.follow);
        let last = p.next_read();
        assert_eq!(
            last,
            LogsFrom::After {
                cursors: "3,0".into(),
                partial: true
            }
        );
        p.take(&last, answer(&["d (no newline)"], "4,0", true));
        assert!(!p.follow);
        assert_eq!(shown(&p), ["a", "b", "c", "d (no newline)"]);
    }

    /// A job that writes more between two reads than the view holds: the view keeps its last
    /// lines (bounded), says it skipped, and reads the tail next instead of falling behind.
    #[test]
    fn a_job_faster_than_the_view_is_skipped_ahead_to_its_tail() {
        let mut p = LogPane::new(7);
        p.update(answer(&["a"], "1,0", false));
        let flood: Vec<String> = (0..TAIL * 3).map(|i| i.to_string()).collect();
        let flood: Vec<&str> = flood.iter().map(String::as_str).collect();
        p.take(&p.next_read(), answer(&flood, "9999,0", false));
        assert_eq!(p.view.nodes[0].lines.len(), 2 * TAIL, "bounded");
        assert_eq!(p.next_read(), LogsFrom::Tail(TAIL));
        assert!(p
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("skipped ahead"));
    }
}
