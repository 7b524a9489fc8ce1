//! The console's views as components: each is a file that says its name, its table's
//! columns, how it draws, what its key bar offers and the keys it handles itself (as gitui's
//! `Component`); the console's common keys (filter, command, sort, views, help, quit) and what
//! opens over a view (a job's detail, its logs, a pool, a node, the form) stay with `App`.
//!
//! Adding a view is one new file here plus its line in `views!` below: the line makes the
//! `View` the keymap, the `:` commands, the tabs and `PerView` know it by, and registers the
//! component; a view without one does not compile.

mod events;
mod fleet;
mod jobs;
mod overview;
mod services;
mod teams;

pub use events::EventsState;
pub use fleet::FleetState;
pub use jobs::JobsState;

use super::{App, Outcome};
use crate::api::Snapshot;
use crate::console::keymap::Action;
use crate::console::table::Col;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::Frame;

/// A view of the console.
pub trait Tab: Sync {
    /// Its name in `:` commands and keymap files (`view jobs`).
    fn name(&self) -> &'static str;

    /// The tab's title without its number key (`Jobs`).
    fn short(&self) -> &'static str;

    /// Whether `/` filters its rows and its `:` command takes a filter (`:jobs team=ml`).
    fn takes_filter(&self) -> bool {
        false
    }

    /// The `/` filter it keeps; a view that filters nothing of its own (the Overview,
    /// Teams) filters the jobs, as `/` there then shows in the Jobs view.
    fn filter<'a>(&self, app: &'a mut App) -> &'a mut Option<crate::console::filter::Filter> {
        &mut app.jobs.filter
    }

    /// Its table's columns, which `<`, `>` and the column letters order by; none for a view
    /// that is not one table.
    fn columns(&self) -> &'static [Col] {
        &[]
    }

    /// `o` in the view's own order (no column chosen): the order it turns to; `None` where
    /// `o` does nothing. By default its first column, descending.
    fn turned(&self) -> Option<crate::console::table::Sort> {
        Some(crate::console::table::Sort { col: 0, desc: true })
    }

    /// Whether `o` on a turned order goes back to the view's own (the Events view: oldest
    /// first, then newest first again) rather than reversing the column.
    fn turns_back(&self) -> bool {
        false
    }

    /// What the key bar calls the order `sort` (`None`: the view's own), where the view names
    /// it itself.
    fn order_name(&self, sort: Option<crate::console::table::Sort>) -> Option<String> {
        let _ = sort;
        None
    }

    /// Draws it over `area`.
    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot);

    /// Its key bar, from the parts every view's has: `help` (`? help  `), `acts` (the job
    /// actions, greyed for a viewer) and `common` (filter, command, view, quit).
    fn key_bar(&self, app: &App, bar: KeyBar) -> Line<'static> {
        if self.columns().is_empty() {
            Line::from(format!("{}{}", bar.help, bar.common))
        } else {
            Line::from(format!(
                "{}< > sort  {} reverse  {}",
                bar.help,
                app.key_for(Action::Sort),
                bar.common
            ))
        }
    }

    /// Handles `action` if it is one of this view's own keys (open what is selected, move the
    /// selection, act on a job); `None` leaves it to what every view does.
    fn key(&self, app: &mut App, action: Action, snap: &Snapshot) -> Option<Outcome> {
        let _ = (app, action, snap);
        None
    }

    /// A mouse event while capture is on and nothing is open over the view.
    fn mouse(
        &self,
        app: &mut App,
        event: crossterm::event::MouseEvent,
        snap: &Snapshot,
    ) -> Outcome {
        let _ = (app, event, snap);
        Outcome::Nothing
    }
}

/// The parts of the key bar every view shares.
pub struct KeyBar {
    pub help: String,
    pub acts: ratatui::text::Span<'static>,
    pub common: String,
}

/// Declares the views, in tab order: the `View` each is known by and its component.
macro_rules! views {
    ($($variant:ident => $tab:expr),+ $(,)?) => {
        /// A view of the console, in tab order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum View {
            $($variant),+
        }

        impl View {
            /// Every view, in tab order.
            pub const ALL: [View; [$(View::$variant),+].len()] = [$(View::$variant),+];

            /// Its component.
            pub fn tab(self) -> &'static dyn Tab {
                match self {
                    $(View::$variant => &$tab),+
                }
            }
        }
    };
}

views! {
    Overview => overview::Overview,
    Jobs => jobs::Jobs,
    Fleet => fleet::Fleet,
    Teams => teams::Teams,
    Events => events::Events,
    Services => services::Services,
}

impl View {
    /// The tab's name without its key (`Overview`).
    pub fn short(self) -> &'static str {
        self.tab().short()
    }

    /// Its name in `:` commands and keymap files (`view jobs`).
    pub fn name(self) -> &'static str {
        self.tab().name()
    }

    /// The view of that name, if one has it.
    pub fn named(name: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Whether its `:` command takes a filter (`:jobs team=ml`).
    pub fn takes_filter(self) -> bool {
        self.tab().takes_filter()
    }

    /// Its place in tab order.
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// The tab's title with the number key that selects it (`2 Jobs`).
    pub(super) fn title(self) -> String {
        format!("{} {}", self.index() + 1, self.short())
    }
}

#[cfg(test)]
mod tests {
    use super::View;

    #[test]
    fn each_view_is_registered_once_in_tab_order_under_its_own_name() {
        for (i, v) in View::ALL.iter().enumerate() {
            assert_eq!(v.index(), i);
            assert_eq!(View::named(v.name()), Some(*v));
            assert!(!v.short().is_empty());
        }
        assert_eq!(View::Jobs.title(), "2 Jobs");
    }
}
