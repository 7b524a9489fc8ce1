//! A command on a host fed on its standard input: the agent's binary streamed from a file, a
//! packed workdir or mount source from memory. One way to start it, send, close and judge the
//! end, so a cut connection or a refusal on the host reads the same wherever it happens.

use super::super::agent::SAID_MAX;
use super::error_chain;
use std::path::Path;
use tokio::io::AsyncWriteExt;

/// What the command reads.
pub(super) enum Input<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// Runs `command` on the host with `input` on its standard input: its standard output,
/// trimmed, when it exits 0; else `what` (`tar on the host`) and its standard error, bounded.
pub(super) async fn run_fed(
    s: &openssh::Session,
    command: String,
    input: Input<'_>,
    what: &str,
) -> Result<String, String> {
    let mut remote = s
        .raw_command(command)
        .stdin(openssh::Stdio::piped())
        .stdout(openssh::Stdio::piped())
        .stderr(openssh::Stdio::piped())
        .spawn()
        .await
        .map_err(|e| format!("{what}: cannot run it: {}", error_chain(&e)))?;
    if let Some(mut to) = remote.stdin().take() {
        let sent = match input {
            Input::Bytes(b) => to.write_all(b).await,
            Input::File(path) => {
                let mut file = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                tokio::io::copy(&mut file, &mut to).await.map(|_| ())
            }
        };
        let _ = to.shutdown().await;
        sent.map_err(|e| format!("{what}: sending its input failed: {e}"))?;
    }
    let out = remote
        .wait_with_output()
        .await
        .map_err(|e| format!("{what}: {}", error_chain(&e)))?;
    if !out.status.success() {
        return Err(format!(
            "{what}: {}",
            crate::untrusted::bounded(String::from_utf8_lossy(&out.stderr).trim(), SAID_MAX)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
