//! Crash safety of the journal: the real binary submits from 16 concurrent clients and is
//! killed with SIGKILL mid-stream, three times on the same database. Every acknowledged job
//! must exist exactly once afterwards, and nothing may be half-written.

use gantry::daemon::journal::Store;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn acknowledged_jobs_survive_kill_9() {
    let dir = std::env::temp_dir().join(format!("gantry-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("state.db");
    let mut acked: HashSet<i64> = HashSet::new();
    for round in 0..3 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args([
                "bench",
                "journal",
                "--db",
                db.to_str().unwrap(),
                "--clients",
                "16",
                "--jobs",
                "10000000",
                "--print-acks",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gantry");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut this_round = 0;
        // Let it run until it has acknowledged a good number, then kill it without warning.
        while this_round < 1500 {
            let line = lines.next().expect("gantry stopped early").unwrap();
            let id: i64 = line
                .strip_prefix("ack ")
                .expect("ack line")
                .parse()
                .unwrap();
            assert!(acked.insert(id), "id {id} acknowledged twice");
            this_round += 1;
        }
        child.kill().unwrap(); // SIGKILL on Unix
                               // Acks already written before the kill are acknowledged too.
        for line in lines.map_while(Result::ok) {
            if let Some(id) = line.strip_prefix("ack ").and_then(|s| s.parse().ok()) {
                assert!(acked.insert(id), "id {id} acknowledged twice");
            }
        }
        child.wait().unwrap();

        let store = Store::open(&db).expect("the journal opens after a crash");
        let jobs = store.load().expect("every row reads back");
        let ids: HashSet<i64> = jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids.len(), jobs.len(), "round {round}: a job appears twice");
        let lost: Vec<&i64> = acked
            .iter()
            .filter(|id| !ids.contains(id))
            .take(5)
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged jobs lost: {lost:?}"
        );
        for j in &jobs {
            gantry::spec::parse("journal", j.spec.as_bytes())
                .unwrap_or_else(|e| panic!("job {} half-written: {e}", j.id));
            assert!(
                j.name.as_deref().is_some_and(|n| n.starts_with("bench-")),
                "job {} has no name",
                j.id
            );
        }
    }
    assert!(acked.len() >= 4500);
    let _ = std::fs::remove_dir_all(&dir);
}
