//! A job's workdir shipped to a daemon on another machine (SkyPilot's `workdir: .` with a
//! remote API server): `gantry submit` packs the directory as git would see it (`.gitignore`,
//! SkyPilot's `.skyignore`, never `.git`) into a gzip'd tar; the daemon keeps it by content
//! hash and unpacks it without letting any entry leave its directory.

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::path::Path;

/// What one upload may be (compressed), unless the daemon says otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// The directory `dir` as a gzip'd tar, at most `max` bytes; entries are relative to it.
pub fn pack(dir: &Path, max: u64) -> Result<Vec<u8>, String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .require_git(false)
        .add_custom_ignore_filename(".skyignore")
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(dir) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        tar.append_path_with_name(path, rel)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if tar.get_ref().get_ref().len() as u64 > max {
            return Err(too_big(dir, max));
        }
    }
    let bytes = tar
        .into_inner()
        .and_then(|gz| gz.finish())
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(too_big(dir, max));
    }
    Ok(bytes)
}

/// One file as a gzip'd tar of one entry, by its own name: a `file_mounts` source shipped as
/// a workdir is (the daemon keeps a directory).
pub fn pack_file(file: &Path, max: u64) -> Result<Vec<u8>, String> {
    let name = file
        .file_name()
        .ok_or_else(|| format!("{} has no file name", file.display()))?;
    let gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(true);
    tar.append_path_with_name(file, name)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let bytes = tar
        .into_inner()
        .and_then(|gz| gz.finish())
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(too_big(file, max));
    }
    Ok(bytes)
}

fn too_big(dir: &Path, max: u64) -> String {
    format!(
        "{} is over {} MiB packed: leave data out of it (.gitignore or .skyignore) and fetch it in `setup`",
        dir.display(),
        max >> 20
    )
}

/// What a workdir takes on the daemon's disk: bytes in whole blocks (a one-byte file takes a
/// block, and an inode), and entries (files, directories, links: each an inode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    pub bytes: u64,
    pub files: u64,
}

/// The block every entry is charged at least, and its size rounded up to.
pub const BLOCK: u64 = 4096;
/// The most entries one shipped workdir may unpack to, unless the daemon says otherwise.
pub const DEFAULT_MAX_FILES: u64 = 50_000;

impl Footprint {
    /// One entry of `size` bytes: its blocks, at least one.
    fn entry(size: u64) -> Footprint {
        Footprint {
            bytes: size.div_ceil(BLOCK).max(1) * BLOCK,
            files: 1,
        }
    }

    fn add(&mut self, other: Footprint) {
        self.bytes += other.bytes;
        self.files += other.files;
    }
}

/// Which bound an unpack passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Bytes,
    Files,
}

/// Why a shipped workdir was not unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// It takes more than the room given (which bound, and the room).
    #[error("{}", over(*.0, .1))]
    OverBudget(Bound, Footprint),
    /// It is not a workdir gantry takes, and why.
    #[error("{0}")]
    Bad(String),
}

fn over(bound: Bound, room: &Footprint) -> String {
    match bound {
        Bound::Bytes => format!(
            "over {} MiB unpacked (on disk, in {BLOCK}-byte blocks); the daemon takes no more",
            room.bytes >> 20
        ),
        Bound::Files => format!(
            "over {} files and directories unpacked; the daemon takes no more",
            room.files
        ),
    }
}

impl From<String> for UnpackError {
    fn from(why: String) -> UnpackError {
        UnpackError::Bad(why)
    }
}

/// Unpacks the gzip'd tar at `archive` into the new directory `into`: regular files,
/// directories and symlinks only, none outside `into`, no set-user-ID, set-group-ID or sticky
/// bits, no owners but the daemon's, within `room`; what it takes.
pub fn unpack(archive: &Path, into: &Path, room: Footprint) -> Result<Footprint, UnpackError> {
    let mut file = std::fs::File::open(archive).map_err(|e| e.to_string())?;
    let mut magic = [0u8; 2];
    use std::io::{Read, Seek};
    if file.read_exact(&mut magic).is_err() || magic != [0x1f, 0x8b] {
        return Err(UnpackError::Bad(
            "not a gzip'd tar (gantry submit packs the workdir as one)".into(),
        ));
    }
    file.rewind().map_err(|e| e.to_string())?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    // The mode's permission bits only: a setuid file shipped by a researcher must not become
    // a setuid file of the daemon's user.
    tar.set_preserve_permissions(false);
    tar.set_preserve_ownerships(false);
    tar.set_unpack_xattrs(false);
    tar.set_overwrite(false);
    std::fs::create_dir_all(into).map_err(|e| format!("{}: {e}", into.display()))?;
    let mut total = Footprint::default();
    for entry in tar
        .entries()
        .map_err(|e| format!("not a gzip'd tar: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("a broken entry: {e}"))?;
        let kind = entry.header().entry_type();
        let name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if !(kind.is_file() || kind.is_dir() || kind.is_symlink()) {
            return Err(UnpackError::Bad(format!(
                "`{name}`: only files, directories and symlinks are taken"
            )));
        }
        total.add(Footprint::entry(entry.size()));
        if total.files > room.files {
            return Err(UnpackError::OverBudget(Bound::Files, room));
        }
        if total.bytes > room.bytes {
            return Err(UnpackError::OverBudget(Bound::Bytes, room));
        }
        // `unpack_in` refuses entries that would land outside `into` (`..`, absolute
        // paths, writes through a symlink unpacked before).
        match entry.unpack_in(into) {
            Ok(true) => {}
            Ok(false) => {
                return Err(UnpackError::Bad(format!(
                    "`{name}` would land outside the workdir"
                )))
            }
            Err(e) => return Err(UnpackError::Bad(format!("`{name}`: {e}"))),
        }
    }
    Ok(total)
}

/// The file beside kept workdir `kept` saying who sent it first and what it takes:
/// `TEAM BYTES FILES` (what that team is charged for while it is kept).
fn charge_path(kept: &Path) -> std::path::PathBuf {
    let mut p = kept.as_os_str().to_os_string();
    p.push(".charge");
    p.into()
}

/// Charges kept workdir `kept` (taking `took`) to `team`.
pub fn charge(kept: &Path, team: &str, took: Footprint) -> std::io::Result<()> {
    std::fs::write(
        charge_path(kept),
        format!("{team} {} {}\n", took.bytes, took.files),
    )
}

/// What `team`'s kept workdirs in `dir` take.
pub fn charged(dir: &Path, team: &str) -> Footprint {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Footprint::default();
    };
    let mut sum = Footprint::default();
    for e in entries.flatten() {
        if e.path().extension().is_none_or(|x| x != "charge") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        // `TEAM BYTES FILES`, read from the right; files are missing in charges written before
        // they were counted.
        let mut words = text.trim().rsplitn(3, ' ');
        let (Some(last), Some(mid)) = (words.next(), words.next()) else {
            continue;
        };
        let (who, bytes, files) = match (words.next(), mid.parse::<u64>()) {
            (Some(who), Ok(bytes)) => (who, bytes, last.parse().unwrap_or(0)),
            _ => (mid, last.parse().unwrap_or(0), 0),
        };
        if who == team {
            sum.add(Footprint { bytes, files });
        }
    }
    sum
}

/// Removes from `dir` the shipped workdirs no live job uses (`in_use`: the paths jobs not yet
/// ended have as their workdir) and that were last written or sent more than `keep` ago, and
/// uploads left half-done as long; what it removed. `keep` covers a submission whose workdir
/// has arrived and whose job has not yet.
pub fn sweep(
    dir: &Path,
    in_use: &std::collections::HashSet<String>,
    keep: std::time::Duration,
) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let now = std::time::SystemTime::now();
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if in_use.contains(&path.display().to_string()) {
            continue;
        }
        // A charge goes with its workdir (below), or once that is gone.
        if path.extension().is_some_and(|x| x == "charge") {
            let of = path.with_extension("");
            if !of.exists() && std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
            continue;
        }
        let age = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok());
        if age.is_none_or(|a| a < keep) {
            continue;
        }
        let gone = if path.is_dir() {
            let _ = std::fs::remove_file(charge_path(&path));
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if gone.is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Marks a kept workdir as just sent (the same content again): the sweep counts from now.
pub fn touch(kept: &Path) {
    if let Ok(f) = std::fs::File::open(kept) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        gantry_testkit::scratch::scratch(&format!("wd-{name}"))
    }

    #[test]
    fn a_workdir_travels_as_git_sees_it() {
        let d = temp("pack");
        let src = d.join("src");
        std::fs::create_dir_all(src.join("pkg")).unwrap();
        std::fs::create_dir_all(src.join(".git")).unwrap();
        std::fs::create_dir_all(src.join("data")).unwrap();
        std::fs::write(src.join("train.py"), "print('hi')\n").unwrap();
        std::fs::write(src.join("pkg/util.py"), "x = 1\n").unwrap();
        std::fs::write(src.join(".env.example"), "A=1\n").unwrap();
        std::fs::write(src.join(".git/HEAD"), "ref\n").unwrap();
        std::fs::write(src.join("data/big.bin"), vec![0u8; 1000]).unwrap();
        std::fs::write(src.join("model.ckpt"), "weights").unwrap();
        std::fs::write(src.join(".gitignore"), "data/\n").unwrap();
        std::fs::write(src.join(".skyignore"), "*.ckpt\n").unwrap();
        let bytes = pack(&src, DEFAULT_MAX_BYTES).unwrap();
        let archive = d.join("w.tar.gz");
        std::fs::write(&archive, &bytes).unwrap();
        let out = d.join("out");
        let room = Footprint {
            bytes: 1 << 20,
            files: 100,
        };
        unpack(&archive, &out, room).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("train.py")).unwrap(),
            "print('hi')\n"
        );
        assert!(out.join("pkg/util.py").is_file());
        assert!(out.join(".env.example").is_file(), "hidden files travel");
        assert!(!out.join(".git").exists());
        assert!(!out.join("data").exists(), ".gitignore is honoured");
        assert!(!out.join("model.ckpt").exists(), ".skyignore is honoured");
        let e = pack(&src, 10).unwrap_err();
        assert!(e.contains("over 0 MiB packed"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_archive_cannot_write_outside_its_directory_or_past_its_size() {
        let d = temp("unpack");
        // A hand-made archive whose entry climbs out.
        let mut raw = tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut h = tar::Header::new_gnu();
        let body = b"owned";
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        // Written raw: the builder itself refuses `..`.
        h.as_gnu_mut().unwrap().name[..10].copy_from_slice(b"../escaped");
        h.set_cksum();
        raw.append(&h, &body[..]).unwrap();
        let bytes = raw.into_inner().unwrap().finish().unwrap();
        let archive = d.join("evil.tar.gz");
        std::fs::write(&archive, bytes).unwrap();
        let room = Footprint {
            bytes: 1 << 20,
            files: 100,
        };
        let e = unpack(&archive, &d.join("out"), room)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the workdir"), "{e}");
        assert!(!d.join("escaped").exists());
        // Over the unpacked budget.
        let src = d.join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("zeros"), vec![0u8; 100_000]).unwrap();
        std::fs::write(&archive, pack(&src, DEFAULT_MAX_BYTES).unwrap()).unwrap();
        let small = Footprint {
            bytes: 1000,
            files: 100,
        };
        let e = unpack(&archive, &d.join("out2"), small)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unpacked"), "{e}");
        assert!(unpack(&d.join("missing"), &d.join("x"), small).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Before: bytes were counted, not blocks or files (100,000 one-byte files were charged
    /// 100 kB and took 412 MB and 100k inodes), and set-user-ID bits were kept.
    #[test]
    fn tiny_files_are_charged_as_blocks_and_counted_and_special_bits_are_stripped() {
        use std::os::unix::fs::PermissionsExt;
        let d = temp("tiny");
        let src = d.join("src");
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..300 {
            std::fs::write(src.join(format!("f{i}")), "x").unwrap();
        }
        let suid = src.join("tool");
        std::fs::write(&suid, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let archive = d.join("a.tar.gz");
        std::fs::write(&archive, pack(&src, DEFAULT_MAX_BYTES).unwrap()).unwrap();
        let roomy = Footprint {
            bytes: 1 << 30,
            files: 1000,
        };
        let took = unpack(&archive, &d.join("out"), roomy).unwrap();
        assert_eq!(took.files, 301);
        assert_eq!(took.bytes, 301 * BLOCK, "a one-byte file takes a block");
        let mode = std::fs::metadata(d.join("out/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "set-user-ID stripped: {mode:o}");
        let few = Footprint {
            bytes: 1 << 30,
            files: 200,
        };
        let e = unpack(&archive, &d.join("out2"), few).unwrap_err();
        assert!(matches!(e, UnpackError::OverBudget(Bound::Files, _)), "{e}");
        assert!(e.to_string().contains("over 200 files"), "{e}");
        let bytes = Footprint {
            bytes: 100 * BLOCK,
            files: 1000,
        };
        let e = unpack(&archive, &d.join("out3"), bytes).unwrap_err();
        assert!(matches!(e, UnpackError::OverBudget(Bound::Bytes, _)), "{e}");
        // Charges add up per team, and old charges (bytes only) still read.
        let kept = d.join("k1");
        charge(&kept, "ml", took).unwrap();
        std::fs::write(d.join("k2.charge"), "ml 5000\n").unwrap();
        std::fs::write(d.join("k3.charge"), "other 7 7\n").unwrap();
        assert_eq!(
            charged(&d, "ml"),
            Footprint {
                bytes: took.bytes + 5000,
                files: 301
            }
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_sweep_removes_old_workdirs_no_live_job_uses() {
        let d = temp("sweep");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        let age = |p: &Path| {
            std::fs::File::open(p).unwrap().set_modified(old).unwrap();
        };
        for name in ["used", "unused", "fresh"] {
            std::fs::create_dir_all(d.join(name)).unwrap();
            std::fs::write(d.join(name).join("f"), "x").unwrap();
        }
        std::fs::write(d.join(".upload-abc"), "partial").unwrap();
        let one = Footprint {
            bytes: 100,
            files: 1,
        };
        for name in ["used", "unused"] {
            charge(&d.join(name), "ml", one).unwrap();
        }
        let two = Footprint {
            bytes: 200,
            files: 2,
        };
        assert_eq!(
            (charged(&d, "ml"), charged(&d, "cv")),
            (two, Footprint::default())
        );
        age(&d.join("used"));
        age(&d.join("unused"));
        age(&d.join(".upload-abc"));
        let in_use = [d.join("used").display().to_string()].into_iter().collect();
        let hour = std::time::Duration::from_secs(3600);
        let mut removed = sweep(&d, &in_use, hour);
        removed.sort();
        assert_eq!(removed, [d.join(".upload-abc"), d.join("unused")]);
        // Its charge went with it: the team is charged for what is kept.
        assert_eq!(charged(&d, "ml"), one);
        assert!(d.join("used").is_dir(), "a live job's workdir stays");
        assert!(
            d.join("fresh").is_dir(),
            "a new one stays until its job has had time"
        );
        // Sent again: it counts from now.
        age(&d.join("fresh"));
        touch(&d.join("fresh"));
        assert!(sweep(&d, &in_use, hour).is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}
