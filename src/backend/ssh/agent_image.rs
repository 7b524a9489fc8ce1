//! What a new host receives as its agent, and its installation there (`install`): this binary without its debug sections (where the
//! daemon's machine has `objcopy` or `strip`; symbols stay, so a panic still names its
//! functions), gzip'd for the copy and unpacked on the host by `gzip -dc`. A release build
//! goes from 223 MB to 19 MB on the wire (docs/measured.md). Made once per build and kept
//! under the user's cache directory, so every host and every restart of the daemon reuses it.

use super::feed::{run_fed, Input};
use super::{error_chain, Shared};
use flate2::write::GzEncoder;
use std::path::{Path, PathBuf};

/// An agent ready to send.
#[derive(Clone, Debug)]
pub struct Image {
    /// The gzip'd agent.
    pub packed: PathBuf,
    /// Its size unpacked: what a whole copy on the host measures.
    pub len: u64,
    /// Its size packed: what crosses the network.
    pub packed_len: u64,
    /// Debug sections were left out.
    pub stripped: bool,
}

/// Where images are kept: `$XDG_CACHE_HOME/gantry/agents`, `~/.cache/gantry/agents`, or the
/// temporary directory.
fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("gantry").join("agents")
}

/// The image of `exe` (build `build`): the kept one, or made now (seconds: run it off the
/// async runtime).
pub fn prepare(exe: &Path, build: &str) -> Result<Image, String> {
    prepare_in(&cache_dir(), exe, build)
}

pub(crate) fn prepare_in(dir: &Path, exe: &Path, build: &str) -> Result<Image, String> {
    let packed = dir.join(format!("agent-{build}.gz"));
    let meta = dir.join(format!("agent-{build}.len"));
    if let (Ok(text), Ok(m)) = (std::fs::read_to_string(&meta), std::fs::metadata(&packed)) {
        let mut words = text.split_whitespace();
        if let (Some(Ok(len)), Some(stripped)) = (words.next().map(str::parse), words.next()) {
            return Ok(Image {
                packed,
                len,
                packed_len: m.len(),
                stripped: stripped == "stripped",
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Names of this process's own, put in place by rename: daemons starting together each
    // make a whole image, and the last rename wins.
    let tag = format!("{}-{}", std::process::id(), nanos());
    let lean = dir.join(format!("agent-{build}.{tag}.bin"));
    let stripped = strip(exe, &lean);
    let source = if stripped { lean.as_path() } else { exe };
    let result = pack(source, &packed, &meta, &tag, stripped);
    let _ = std::fs::remove_file(&lean);
    sweep(dir, KEEP);
    result
}

/// Images kept: one per build, and builds come and go (a developer's, an upgrade's).
const KEEP: usize = 4;

/// Removes all but the `keep` newest images (and their sizes).
fn sweep(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut images: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("agent-") && n.ends_with(".gz"))
        })
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    images.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    for (_, p) in images.into_iter().skip(keep) {
        let _ = std::fs::remove_file(p.with_extension("len"));
        let _ = std::fs::remove_file(p);
    }
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// `exe` without its debug sections at `out`; false where no tool could do it.
fn strip(exe: &Path, out: &Path) -> bool {
    let tries: [(&str, &[&str]); 2] = [
        ("objcopy", &["--strip-debug"]),
        ("strip", &["--strip-debug", "-o"]),
    ];
    for (tool, args) in tries {
        let mut cmd = std::process::Command::new(tool);
        cmd.args(args);
        if tool == "objcopy" {
            cmd.arg(exe).arg(out);
        } else {
            cmd.arg(out).arg(exe);
        }
        let ok = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok && std::fs::metadata(out).is_ok_and(|m| m.len() > 0) {
            return true;
        }
    }
    false
}

fn pack(
    source: &Path,
    packed: &Path,
    meta: &Path,
    tag: &str,
    stripped: bool,
) -> Result<Image, String> {
    let err = |e: std::io::Error| format!("packing the agent {}: {e}", source.display());
    let len = std::fs::metadata(source).map_err(err)?.len();
    let tmp = packed.with_extension(format!("gz.{tag}"));
    {
        let mut from = std::fs::File::open(source).map_err(err)?;
        let to = std::fs::File::create(&tmp).map_err(err)?;
        let mut gz = GzEncoder::new(std::io::BufWriter::new(to), flate2::Compression::default());
        std::io::copy(&mut from, &mut gz).map_err(err)?;
        let mut w = gz.finish().map_err(err)?;
        std::io::Write::flush(&mut w).map_err(err)?;
    }
    let packed_len = std::fs::metadata(&tmp).map_err(err)?.len();
    std::fs::rename(&tmp, packed).map_err(err)?;
    let meta_tmp = meta.with_extension(format!("len.{tag}"));
    let said = format!("{len} {}\n", if stripped { "stripped" } else { "whole" });
    std::fs::write(&meta_tmp, said)
        .and_then(|()| std::fs::rename(&meta_tmp, meta))
        .map_err(err)?;
    Ok(Image {
        packed: packed.to_path_buf(),
        len,
        packed_len,
        stripped,
    })
}

/// Makes sure the host has this build's agent: its path there, or why it cannot have it.
pub(super) async fn install(
    s: &openssh::Session,
    host: usize,
    shared: &Shared,
) -> Result<String, String> {
    let path = format!(".gantry/bin/gantry-{}", shared.build);
    // A copy is whole or absent: one cut short (the connection dropped, the pool stopped, the
    // host given back mid-copy) ends in a clean EOF, which `cat` takes for the end — so the
    // size is checked before the copy is put in place, and again before it is trusted (a
    // truncated agent crashes before it says hello, on every connection).
    let whole_len = std::fs::metadata(&shared.exe)
        .map(|m| m.len())
        .map_err(|e| format!("cannot read {}: {e}", shared.exe.display()))?;
    let image = shared
        .image
        .get_or_init(|| async {
            // `GANTRY_AGENT_LEAN=0` sends the binary as it is (and measures what that costs).
            if std::env::var("GANTRY_AGENT_LEAN").is_ok_and(|v| v == "0") {
                return None;
            }
            let (exe, build) = (shared.exe.clone(), shared.build.clone());
            tokio::task::spawn_blocking(move || prepare(&exe, &build))
                .await
                .ok()
                .and_then(Result::ok)
        })
        .await
        .clone();
    let probe = s
        .raw_command(format!(
            "uname -m; command -v gzip >/dev/null 2>&1 && echo gzip || echo no-gzip; test -x {path} && wc -c < {path} || echo absent"
        ))
        .output()
        .await
        .map_err(|e| format!("cannot run a command: {}", error_chain(&e)))?;
    let out = String::from_utf8_lossy(&probe.stdout);
    let mut words = out.split_whitespace();
    let arch = words.next().unwrap_or("").to_string();
    let gzip = words.next() == Some("gzip");
    let there: Option<u64> = words.next().and_then(|w| w.parse().ok());
    // A whole copy of either form (the lean image, or the binary as it is for a host without
    // gzip) is this build's agent.
    if there.is_some_and(|n| n == whole_len || image.as_ref().is_some_and(|i| i.len == n)) {
        return Ok(path);
    }
    let (send, len, unpack) = match image.filter(|_| gzip) {
        Some(i) => (i.packed, i.len, "gzip -dc"),
        None => (shared.exe.clone(), whole_len, "cat"),
    };
    if shared.own_binary && arch != std::env::consts::ARCH {
        return Err(format!(
            "the host is {arch}, this gantry binary is {}: install gantry {} for {arch} there as ~/{path}",
            std::env::consts::ARCH,
            env!("CARGO_PKG_VERSION"),
        ));
    }
    // Hosts may share a home directory (NFS): each copy gets a name of its own.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = format!("{path}.part-{}-{host}-{nanos}", std::process::id());
    let command = format!(
        "mkdir -p .gantry/bin && {unpack} > {tmp} && if [ \"$(wc -c < {tmp})\" -eq {len} ]; then chmod 755 {tmp} && mv -f {tmp} {path}; else rm -f {tmp}; echo \"the copy was cut short\" >&2; exit 1; fi"
    );
    let what = format!("copying the agent to ~/{path}");
    run_fed(s, command, Input::File(&send), &what).await?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn an_image_unpacks_to_a_binary_that_runs_and_is_kept_for_the_next_call() {
        let dir = gantry_testkit::scratch::scratch("agent-image");
        // A small binary of this system stands in for gantry.
        let exe = Path::new("/bin/true");
        let img = prepare_in(&dir, exe, "test-build").unwrap();
        let mut unpacked = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&img.packed).unwrap())
            .read_to_end(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked.len() as u64, img.len);
        assert!(img.len <= std::fs::metadata(exe).unwrap().len());
        let copy = dir.join("true-copy");
        std::fs::write(&copy, &unpacked).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(std::process::Command::new(&copy)
            .status()
            .unwrap()
            .success());
        // Kept: the second call reads it back rather than making it again.
        let again = prepare_in(&dir, exe, "test-build").unwrap();
        assert_eq!((again.len, again.packed_len), (img.len, img.packed_len));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            3,
            "the image, its size and the copy; nothing left over"
        );
        // Only the newest images are kept.
        for b in ["b1", "b2", "b3", "b4", "b5"] {
            prepare_in(&dir, exe, b).unwrap();
        }
        let gz = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".gz"))
            .count();
        assert_eq!(gz, KEEP);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
