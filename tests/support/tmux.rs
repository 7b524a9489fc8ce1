//! tmux for the console's end-to-end tests: a server of the test's own, keys sent, the screen
//! read until it shows what the test waits for. Included by the console test files.

/// Whether tmux is here; if not, says that `what` is skipped.
pub fn have_tmux(what: &str) -> bool {
    let here = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok();
    if !here {
        eprintln!("tmux is not installed: {what} skipped (.ci/run installs it)");
    }
    here
}

/// A tmux server of the test's own (`-L`) with one session: run commands, wait for text.
pub struct Tmux {
    socket: String,
    session: &'static str,
}

/// The server goes with the test, passed or failed (a failed test left its console running).
impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

impl Tmux {
    pub fn new(session: &'static str) -> Tmux {
        Tmux {
            socket: format!("gantry-{session}-{}", std::process::id()),
            session,
        }
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once it shows any of `texts` (30 s at most, else the test fails with it:
    /// a loaded CI machine was seen to need more than 10).
    pub fn wait_for(&self, texts: &[&str]) -> String {
        let screen = || self.run(&["capture-pane", "-p", "-t", self.session]);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(30) {
            let s = screen();
            if texts.iter().any(|t| s.contains(t)) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("never saw any of {texts:?}:\n{}", screen());
    }

    /// Waits until the screen no longer shows `text` (10 s at most, else the test fails).
    pub fn wait_gone(&self, text: &str) {
        let screen = || self.run(&["capture-pane", "-p", "-t", self.session]);
        for _ in 0..100 {
            if !screen().contains(text) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("{text:?} never went away:\n{}", screen());
    }
}
