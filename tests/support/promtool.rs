//! `promtool check metrics` for the tests that lint a `/metrics` text.

/// `promtool check metrics` over a metrics text (Debian's prometheus package; CI installs it):
/// every problem it reports fails the test, except the camelCase lint on the families in
/// `dcgm` — they carry the DCGM exporter's `modelName` label on purpose (the same names as
/// DCGM's series, to join them). `None` when promtool is not installed.
pub fn check(text: &str, dcgm: &[&str]) -> Option<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| eprintln!("skipped: promtool ({e}): apt-get install prometheus"))
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !dcgm.iter().any(|f| {
                *l == format!("{f} label names should be written in 'snake_case' not 'camelCase'")
            })
        })
        .collect();
    assert!(problems.is_empty(), "promtool: {said}\n{text}");
    // Exit 3 is lint findings only (all of them allowed above); anything else is an error.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "promtool failed: {said}\n{text}"
    );
    Some(())
}
