//! A job's `file_mounts` done on each node, by every backend alike: a shell prelude that setup
//! runs first (copies, fetches, mounts) and one that run starts with (unmounting when it ends,
//! preempted or not). The tools are the node's own: `aws`, `gcloud`/`gsutil` or `rclone` to
//! copy from a bucket; `rclone mount` (FUSE), `mount-s3`, `goofys` or `gcsfuse` to mount one;
//! `curl` or `wget` for https; `hf` (or `huggingface-cli`) for Hugging Face repositories. A
//! node without a tool a mount needs fails the job's setup with a line that names the mount,
//! the tools that would do and the host.
//!
//! Local sources are read at `$GANTRY_MOUNTS_FROM` + their path on the daemon's machine: unset
//! where the node sees the daemon's files (a local pool; Slurm and Kubernetes, whose nodes see
//! them as they see the workdir), the directory the SSH backend copied them to otherwise.

use crate::spec::mounts::{FileMount, MountMode, MountSource};

/// The functions the preludes call; each mount is one call.
const FUNCTIONS: &str = r#"gantry_has() { command -v "$1" >/dev/null 2>&1; }
gantry_dest() { case "$1" in /*) printf '%s' "$1";; '~') printf '%s' "$HOME";; '~/'*) printf '%s/%s' "$HOME" "${1#'~/'}";; *) printf '%s/%s' "$HOME" "$1";; esac; }
gantry_mount_fail() { echo "gantry: file_mounts $1: $2 (on $(hostname))" >&2; exit 1; }
gantry_endpoint_var() { case "$1" in r2://*) echo R2_ENDPOINT_URL;; nebius://*) echo NEBIUS_ENDPOINT_URL;; cw://*) echo COREWEAVE_ENDPOINT_URL;; oci://*) echo OCI_ENDPOINT_URL;; cos://*) echo IBM_ENDPOINT_URL;; *) echo AWS_ENDPOINT_URL;; esac; }
gantry_endpoint() {
  case "$1" in
  r2://*) printf '%s' "${R2_ENDPOINT_URL:-$([ -f "$HOME/.cloudflare/accountid" ] && printf 'https://%s.r2.cloudflarestorage.com' "$(cat "$HOME/.cloudflare/accountid")")}";;
  *) eval "printf '%s' \"\${$(gantry_endpoint_var "$1"):-}\"";;
  esac
}
gantry_s3like() {
  case "$2" in
  s3://*) ;;
  *) [ -n "$(gantry_endpoint "$2")" ] || gantry_mount_fail "$1" "$2 is reached through its store's S3-compatible endpoint: give $(gantry_endpoint_var "$2") in the job's envs or secrets";;
  esac
}
gantry_rclone_remote() {
  case "$1" in
  gs://*) printf ':gcs,env_auth=true:%s' "${1#gs://}";;
  *) ep=$(gantry_endpoint "$1"); case "$1" in s3://*) p=${ep:+Other}; p=${p:-AWS};; r2://*) p=Cloudflare;; *) p=Other;; esac
     printf ':s3,provider=%s,env_auth=true%s:%s' "$p" "${ep:+,endpoint='$ep'}" "${1#*://}";;
  esac
}
gantry_rclone() { env -u AWS_CA_BUNDLE rclone ${AWS_CA_BUNDLE:+--ca-cert "$AWS_CA_BUNDLE"} "$@"; }
# The nodes of one job may share a filesystem (an NFS home) and copy to the same place at once:
# cp -a creates each file exclusively, so the node that loses the race fails with "File
# exists". A second try finds the files there and overwrites them.
gantry_cp() { cp -a "$@" 2>/dev/null || cp -a "$@"; }
# A file is copied beside its destination under a name of this node's own, then renamed over
# it: cp overwrites in place (cut to nothing, then written), so a node of the same job that
# shares the filesystem and already reads the file read it empty. An image without mv gets
# cp's copy as before.
gantry_cp_file() {
  gantry_cf=$2; [ -d "$gantry_cf" ] && gantry_cf="$gantry_cf/${1##*/}"
  gantry_has mv || { gantry_cp "$1" "$gantry_cf"; return; }
  gantry_cf_tmp="$gantry_cf.gantry-$(hostname 2>/dev/null)-$$"
  cp -a "$1" "$gantry_cf_tmp" && mv -f "$gantry_cf_tmp" "$gantry_cf" || { rm -f "$gantry_cf_tmp"; false; }
}
gantry_local() {
  s="${GANTRY_MOUNTS_FROM:-}$2"; d=$(gantry_dest "$1")
  if [ -d "$s" ]; then mkdir -p "$d" && gantry_cp "$s/." "$d/"
  elif [ -e "$s" ]; then mkdir -p "$(dirname "$d")" && gantry_cp_file "$s" "$d"
  else gantry_mount_fail "$1" "its source $2 is not on this node"; fi || gantry_mount_fail "$1" "copying $2 failed"
}
gantry_fetch() {
  m=$1; u=$2; d=$(gantry_dest "$1"); mkdir -p "$(dirname "$d")" || gantry_mount_fail "$m" "cannot make $(dirname "$d")"
  case "$u" in
  gs://*)
    if gantry_has gcloud; then gcloud storage cp "$u" "$d" >/dev/null 2>&1 || { mkdir -p "$d" && gcloud storage rsync -r "$u" "$d"; } || gantry_mount_fail "$m" "gcloud storage could not copy $u"
    elif gantry_has gsutil; then gsutil -q cp "$u" "$d" >/dev/null 2>&1 || { mkdir -p "$d" && gsutil -m -q rsync -r "$u" "$d"; } || gantry_mount_fail "$m" "gsutil could not copy $u"
    elif gantry_has rclone; then gantry_rclone copyto "$(gantry_rclone_remote "$u")" "$d" || gantry_mount_fail "$m" "rclone could not copy $u"
    else gantry_mount_fail "$m" "copying $u needs gcloud, gsutil or rclone, and this node has none"; fi;;
  hf://*)
    b=${u#hf://}; ht=model
    case "$b" in datasets/*) ht=dataset; b=${b#datasets/};; spaces/*) ht=space; b=${b#spaces/};; esac
    ns=${b%%/*}; r=${b#*/}; nr=${r%%/*}; hs=""; [ "$r" != "$nr" ] && hs=${r#*/}
    hn=${nr%%@*}; hr=""; case "$nr" in *@*) hr=${nr#*@};; esac
    if gantry_has hf; then c=hf; elif gantry_has huggingface-cli; then c=huggingface-cli
    else gantry_mount_fail "$m" "fetching $u needs hf or huggingface-cli (pip install huggingface_hub), and this node has neither"; fi
    t="$d.gantry-hf"; rm -rf "$t"
    $c download "$ns/$hn" --repo-type "$ht" ${hr:+--revision "$hr"} ${hs:+--include "$hs" --include "$hs/*"} --local-dir "$t" >/dev/null || gantry_mount_fail "$m" "$c could not download $u"
    rm -rf "$t/.cache"
    if [ -d "$t/$hs" ]; then mkdir -p "$d" && cp -a "$t/$hs/." "$d/"; else cp -a "$t/$hs" "$d"; fi || gantry_mount_fail "$m" "$u has no $hs"
    rm -rf "$t";;
  http://*|https://*)
    if gantry_has curl; then curl -fsSL -o "$d" "$u" || gantry_mount_fail "$m" "curl could not fetch $u"
    elif gantry_has wget; then wget -qO "$d" "$u" || gantry_mount_fail "$m" "wget could not fetch $u"
    else gantry_mount_fail "$m" "fetching $u needs curl or wget, and this node has neither"; fi;;
  *)
    gantry_s3like "$m" "$u"; ep=$(gantry_endpoint "$u"); s3="s3://${u#*://}"
    if gantry_has aws; then
      aws s3 cp --only-show-errors ${ep:+--endpoint-url "$ep"} "$s3" "$d" >/dev/null 2>&1 || { mkdir -p "$d" && aws s3 sync --only-show-errors ${ep:+--endpoint-url "$ep"} "$s3" "$d"; } || gantry_mount_fail "$m" "aws s3 could not copy $u"
    elif gantry_has rclone; then gantry_rclone copyto "$(gantry_rclone_remote "$u")" "$d" || gantry_mount_fail "$m" "rclone could not copy $u"
    else gantry_mount_fail "$m" "copying $u needs aws or rclone, and this node has neither"; fi;;
  esac
}
gantry_make_bucket() {
  b="${2%%://*}://$(printf '%s' "${2#*://}" | cut -d/ -f1)"
  case "$b" in
  gs://*)
    if gantry_has gcloud; then gcloud storage buckets describe "$b" >/dev/null 2>&1 || gcloud storage buckets create "$b" >/dev/null || gantry_mount_fail "$1" "cannot create the bucket $b"
    elif gantry_has rclone; then gantry_rclone mkdir "$(gantry_rclone_remote "$b")" || gantry_mount_fail "$1" "cannot create the bucket $b"; fi;;
  *)
    gantry_s3like "$1" "$b"; ep=$(gantry_endpoint "$b")
    if gantry_has aws; then aws s3api head-bucket ${ep:+--endpoint-url "$ep"} --bucket "${b#*://}" >/dev/null 2>&1 || aws s3 mb ${ep:+--endpoint-url "$ep"} "s3://${b#*://}" >/dev/null || gantry_mount_fail "$1" "cannot create the bucket $b"
    elif gantry_has rclone; then gantry_rclone mkdir "$(gantry_rclone_remote "$b")" || gantry_mount_fail "$1" "cannot create the bucket $b"; fi;;
  esac
}
gantry_mount() {
  m=$1; u=$2; d=$(gantry_dest "$1"); mkdir -p "$d" || gantry_mount_fail "$m" "cannot make $d"
  fusermount -uz "$d" 2>/dev/null
  bucket=$(printf '%s' "${u#*://}" | cut -d/ -f1); prefix=${u#*://}; prefix=${prefix#"$bucket"}; prefix=${prefix#/}
  case "$u" in gs://*) ;; *) gantry_s3like "$m" "$u"; ep=$(gantry_endpoint "$u");; esac
  if gantry_has rclone && [ -e /dev/fuse ]; then
    if [ "$3" = cached ]; then c="--vfs-cache-mode full --vfs-write-back 1s"; else c="--vfs-cache-mode off"; fi
    gantry_rclone mount "$(gantry_rclone_remote "$u")" "$d" --daemon $c || gantry_mount_fail "$m" "rclone mount of $u failed"
    return
  fi
  case "$u" in
  gs://*)
    if gantry_has gcsfuse; then gcsfuse ${prefix:+--only-dir "$prefix"} "$bucket" "$d" >/dev/null || gantry_mount_fail "$m" "gcsfuse of $u failed"; return; fi
    gantry_mount_fail "$m" "mounting $u needs rclone (with /dev/fuse) or gcsfuse, and this node has neither (or write mode: COPY)";;
  *)
    if gantry_has mount-s3; then mount-s3 ${ep:+--endpoint-url "$ep"} ${prefix:+--prefix "$prefix/"} --allow-delete --allow-overwrite "$bucket" "$d" || gantry_mount_fail "$m" "mount-s3 of $u failed"; return; fi
    if gantry_has goofys; then goofys ${ep:+--endpoint "$ep"} "$bucket${prefix:+:$prefix}" "$d" || gantry_mount_fail "$m" "goofys of $u failed"; return; fi
    gantry_mount_fail "$m" "mounting $u needs rclone (with /dev/fuse), mount-s3 or goofys, and this node has none (or write mode: COPY)";;
  esac
}
"#;

/// Single-quoted for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What setup runs first: each mount in the order the file gives them. Empty without mounts.
pub fn setup_prelude(mounts: &[FileMount]) -> String {
    if mounts.is_empty() {
        return String::new();
    }
    let mut s = format!("# gantry: file_mounts\n{FUNCTIONS}");
    for m in mounts {
        let dest = quote(&m.dest);
        let line = match (&m.source, m.mode) {
            (MountSource::Local(p), _) => format!("gantry_local {dest} {}", quote(p)),
            (MountSource::Bucket { url, create }, mode) => {
                let make = if *create {
                    format!("gantry_make_bucket {dest} {}\n", quote(url))
                } else {
                    String::new()
                };
                let act = match mode {
                    MountMode::Copy => format!("gantry_fetch {dest} {}", quote(url)),
                    MountMode::Mount => format!("gantry_mount {dest} {} direct", quote(url)),
                    MountMode::MountCached => format!("gantry_mount {dest} {} cached", quote(url)),
                };
                format!("{make}{act}")
            }
        };
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str("# gantry: file_mounts done\n");
    s
}

/// What run starts with where anything is mounted: unmount on the way out, whether run ends,
/// fails, or is stopped (a preemption's TERM ends the script, not only its command), so that
/// a bucket's writes are flushed before the job is said to be over. Empty without mounts.
pub fn run_prelude(mounts: &[FileMount]) -> String {
    let mounted: Vec<String> = mounts
        .iter()
        .filter(|m| m.mode != MountMode::Copy)
        .map(|m| quote(&m.dest))
        .collect();
    if mounted.is_empty() {
        return String::new();
    }
    format!(
        "gantry_unmount() {{ for m in {}; do case \"$m\" in /*) d=$m;; '~/'*) d=\"$HOME/${{m#'~/'}}\";; *) d=\"$HOME/$m\";; esac; fusermount -u \"$d\" 2>/dev/null || fusermount -uz \"$d\" 2>/dev/null || umount -l \"$d\" 2>/dev/null; done; }}\ntrap gantry_unmount EXIT\ntrap 'exit 143' TERM\ntrap 'exit 130' INT\n",
        mounted.join(" ")
    )
}

/// The local sources of `mounts`: what a backend whose nodes do not see the daemon's files
/// (SSH) ships with the job.
pub fn local_sources(mounts: &[FileMount]) -> Vec<String> {
    mounts
        .iter()
        .filter_map(|m| match &m.source {
            MountSource::Local(p) => Some(p.clone()),
            MountSource::Bucket { .. } => None,
        })
        .collect()
}

/// The tools for `file_mounts` (`spec::mounts::TOOLS`) this host has: on the PATH, and `fuse`
/// where `/dev/fuse` and `fusermount` are.
pub fn tools_here() -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = |tool: &str| {
        std::env::split_paths(&path).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    };
    crate::spec::mounts::TOOLS
        .iter()
        .filter(|&&t| match t {
            "fuse" => std::path::Path::new("/dev/fuse").exists() && on_path("fusermount"),
            "hf" => on_path("hf") || on_path("huggingface-cli"),
            t => on_path(t),
        })
        .map(|t| t.to_string())
        .collect()
}

/// Where `mounts` mount a bucket (as written: `~/x`, `x` and `/x`).
pub fn mount_points(mounts: &[FileMount]) -> Vec<String> {
    mounts
        .iter()
        .filter(|m| m.mode != MountMode::Copy)
        .map(|m| m.dest.clone())
        .collect()
}

/// Unmounts those of `points` that are mounted (lazily: a process still in one lets go when it
/// ends), for a run that is over; its mount tool then exits. Nothing to do for most runs.
pub fn unmount(points: &[String]) {
    if points.is_empty() {
        return;
    }
    let table = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for p in points {
        let path = match (p.strip_prefix('/'), std::env::var("HOME")) {
            (Some(_), _) => p.clone(),
            (None, Ok(home)) => format!("{home}/{}", p.trim_start_matches("~/")),
            (None, Err(_)) => continue,
        };
        // /proc/self/mounts escapes spaces and the like as octal.
        let escaped = path
            .replace('\\', "\\134")
            .replace(' ', "\\040")
            .replace('\t', "\\011")
            .replace('\n', "\\012");
        if table
            .lines()
            .any(|l| l.split(' ').nth(1) == Some(escaped.as_str()))
        {
            let _ = std::process::Command::new("fusermount")
                .args(["-uz", &path])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A directory of this test's own, removed when dropped.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn new(name: &str) -> Scratch {
            let p = gantry_testkit::scratch::scratch(&format!("mounts-{name}"));
            Scratch(p)
        }
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn sh(script: &str, env: &[(&str, &str)]) -> (i32, String) {
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    #[test]
    fn local_sources_are_copied_to_their_destinations_under_a_shipped_root() {
        let t = Scratch::new("local");
        let root = t.path().join("shipped");
        let src = t.path().join("src");
        std::fs::create_dir_all(root.join(src.strip_prefix("/").unwrap()).join("sub")).unwrap();
        let shipped = root.join(src.strip_prefix("/").unwrap());
        std::fs::write(shipped.join("sub/a.txt"), "a").unwrap();
        std::fs::write(shipped.join("one.txt"), "1").unwrap();
        let dest = t.path().join("dest");
        let mounts = vec![
            FileMount {
                dest: format!("{}/dir", dest.display()),
                source: MountSource::Local(src.display().to_string()),
                mode: MountMode::Copy,
            },
            FileMount {
                dest: format!("{}/it's.txt", dest.display()),
                source: MountSource::Local(format!("{}/one.txt", src.display())),
                mode: MountMode::Copy,
            },
        ];
        let (rc, err) = sh(
            &setup_prelude(&mounts),
            &[("GANTRY_MOUNTS_FROM", root.to_str().unwrap())],
        );
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            std::fs::read_to_string(dest.join("dir/sub/a.txt")).unwrap(),
            "a"
        );
        assert_eq!(std::fs::read_to_string(dest.join("it's.txt")).unwrap(), "1");
        // A source that is not there fails setup, naming the mount.
        let missing = vec![FileMount {
            dest: "/tmp/x".into(),
            source: MountSource::Local("/no/such".into()),
            mode: MountMode::Copy,
        }];
        let (rc, err) = sh(&setup_prelude(&missing), &[]);
        assert_eq!(rc, 1);
        assert!(
            err.contains("gantry: file_mounts /tmp/x: its source /no/such is not on this node"),
            "{err}"
        );
    }

    /// Bug fixed: the two nodes of a gang on hosts sharing a filesystem copied a local source
    /// to the same destination at once, and one failed its setup with cp's "File exists".
    #[test]
    fn nodes_sharing_a_filesystem_copy_to_one_destination_at_once() {
        let t = Scratch::new("shared");
        let src = t.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/a.txt"), "a").unwrap();
        std::fs::write(src.join("one.txt"), "1").unwrap();
        let dest = t.path().join("dest");
        let mounts = vec![
            FileMount {
                dest: format!("{}/dir", dest.display()),
                source: MountSource::Local(src.display().to_string()),
                mode: MountMode::Copy,
            },
            FileMount {
                dest: format!("{}/one.txt", dest.display()),
                source: MountSource::Local(format!("{}/one.txt", src.display())),
                mode: MountMode::Copy,
            },
        ];
        let prelude = setup_prelude(&mounts);
        for round in 0..40 {
            let _ = std::fs::remove_dir_all(&dest);
            let nodes: Vec<_> = (0..2)
                .map(|_| {
                    Command::new("/bin/sh")
                        .arg("-c")
                        .arg(&prelude)
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for node in nodes {
                let out = node.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "round {round}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert_eq!(std::fs::read_to_string(dest.join("one.txt")).unwrap(), "1");
            assert_eq!(
                std::fs::read_to_string(dest.join("dir/sub/a.txt")).unwrap(),
                "a"
            );
        }
    }

    /// Bug fixed: a node that copied a file to where another node of the job (sharing the
    /// filesystem) already read it overwrote it in place — cut to nothing, then written — and
    /// the reader read it empty (`tests/hosts/ssh.rs`, the gang's `mounted=`). Now the file is
    /// replaced whole: one already open still reads what it held.
    #[test]
    fn a_file_another_node_reads_is_replaced_whole_not_rewritten_in_place() {
        use std::io::Read;
        let t = Scratch::new("replace");
        std::fs::write(t.path().join("new.txt"), "new").unwrap();
        let dest = t.path().join("dest.txt");
        std::fs::write(&dest, "old").unwrap();
        let mut reading = std::fs::File::open(&dest).unwrap();
        let mounts = vec![FileMount {
            dest: dest.display().to_string(),
            source: MountSource::Local(t.path().join("new.txt").display().to_string()),
            mode: MountMode::Copy,
        }];
        let (rc, err) = sh(&setup_prelude(&mounts), &[]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        let mut held = String::new();
        reading.read_to_string(&mut held).unwrap();
        assert_eq!(held, "old", "the file being read was rewritten in place");
        let mut left: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(left, ["dest.txt", "new.txt"], "no copy left beside it");
        // A destination that is a directory takes the file by its name, as cp does.
        let into = t.path().join("into");
        std::fs::create_dir_all(&into).unwrap();
        let mounts = vec![FileMount {
            dest: into.display().to_string(),
            source: MountSource::Local(t.path().join("new.txt").display().to_string()),
            mode: MountMode::Copy,
        }];
        let (rc, err) = sh(&setup_prelude(&mounts), &[]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            std::fs::read_to_string(into.join("new.txt")).unwrap(),
            "new"
        );
    }

    #[test]
    fn a_node_without_the_tools_says_which_would_do() {
        let t = Scratch::new("tools");
        let mounts = vec![FileMount {
            dest: t.path().join("d").display().to_string(),
            source: MountSource::Bucket {
                url: "gs://b/p".into(),
                create: false,
            },
            mode: MountMode::Mount,
        }];
        // A PATH with only what the prelude itself needs.
        let bin = t.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for tool in ["mkdir", "cut", "hostname", "printf", "dirname"] {
            if let Some(p) = ["/bin", "/usr/bin"]
                .iter()
                .map(|d| std::path::Path::new(d).join(tool))
                .find(|p| p.exists())
            {
                std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
            }
        }
        let (rc, err) = sh(&setup_prelude(&mounts), &[("PATH", bin.to_str().unwrap())]);
        assert_eq!(rc, 1, "{err}");
        assert!(err.contains("mounting gs://b/p needs rclone (with /dev/fuse) or gcsfuse, and this node has neither"), "{err}");
    }

    #[test]
    fn a_hugging_face_repository_is_downloaded_with_its_revision_and_sub_path() {
        let t = Scratch::new("hf");
        let bin = t.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        // A stand-in `hf` that says how it was called and makes what a download of the
        // sub-path makes: the repository's tree under --local-dir.
        let args = t.path().join("args");
        std::fs::write(
            bin.join("hf"),
            format!(
                "#!/bin/sh\necho \"$@\" > {}\nwhile [ $# -gt 0 ]; do [ \"$1\" = --local-dir ] && out=$2; shift; done\nmkdir -p \"$out/weights/a\" \"$out/.cache\" && echo w > \"$out/weights/a/w.bin\"\n",
                args.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("hf"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let dest = t.path().join("model");
        let mounts = vec![FileMount {
            dest: dest.display().to_string(),
            source: MountSource::Bucket {
                url: "hf://datasets/org/set@v1/weights".into(),
                create: false,
            },
            mode: MountMode::Copy,
        }];
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let (rc, err) = sh(&setup_prelude(&mounts), &[("PATH", path.as_str())]);
        assert_eq!(rc, 0, "{err}");
        assert_eq!(
            std::fs::read_to_string(&args).unwrap().trim(),
            format!(
                "download org/set --repo-type dataset --revision v1 --include weights --include weights/* --local-dir {}.gantry-hf",
                dest.display()
            )
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("a/w.bin")).unwrap(),
            "w\n"
        );
        assert!(
            !t.path().join("model.gantry-hf").exists(),
            "the download's own directory is removed"
        );
    }

    #[test]
    fn only_mounts_are_unmounted_and_copies_ship_their_sources() {
        let m = |mode, source| FileMount {
            dest: "~/d".into(),
            source,
            mode,
        };
        let copy = m(MountMode::Copy, MountSource::Local("/src".into()));
        assert_eq!(run_prelude(std::slice::from_ref(&copy)), "");
        assert_eq!(local_sources(std::slice::from_ref(&copy)), vec!["/src"]);
        let mount = m(
            MountMode::Mount,
            MountSource::Bucket {
                url: "s3://b".into(),
                create: false,
            },
        );
        assert!(run_prelude(&[copy, mount]).contains("trap gantry_unmount EXIT"));
    }
}
