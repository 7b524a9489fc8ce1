//! SkyPilot's `file_mounts`: local files and directories copied onto every node, bucket
//! objects and prefixes copied or mounted there, and SkyPilot's storage objects
//! (`{name, source, store, mode}`), read into [`FileMount`]s. What is done on the node is
//! `backend::mounts`' part; this reads and checks the file, pointing at the entry it is about.

use super::task::Reader;
use super::values::kind;
use super::SpecError;
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

/// One entry of `file_mounts` (a storage object with several local sources is one per source).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMount {
    /// Where it appears on the node: absolute, or relative to the home directory (`~/x`, `x`).
    pub dest: String,
    pub source: MountSource,
    pub mode: MountMode,
}

/// Where a mount's data comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountSource {
    /// A file or directory on the submitter's machine: made absolute (or shipped to a remote
    /// daemon) by `gantry submit`, copied to each node before setup.
    Local(String),
    /// `s3://`, `gs://`, `r2://` or `https://`: fetched on each node with the store's tool.
    Bucket {
        url: String,
        /// A storage object named a bucket with no source: SkyPilot creates it when it is
        /// missing (a bucket the job writes its checkpoints to), and so does gantry.
        create: bool,
    },
}

/// SkyPilot's storage modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MountMode {
    /// Copied onto the node's disk before setup; writes stay on the node.
    Copy,
    /// Mounted (FUSE), reads and writes go to the bucket.
    Mount,
    /// Mounted with a local cache; writes reach the bucket asynchronously.
    MountCached,
}

impl MountMode {
    fn parse(s: &str) -> Option<MountMode> {
        match s.to_ascii_uppercase().as_str() {
            "COPY" => Some(MountMode::Copy),
            "MOUNT" => Some(MountMode::Mount),
            "MOUNT_CACHED" => Some(MountMode::MountCached),
            _ => None,
        }
    }
}

/// The schemes gantry fetches, and the stores a storage object may name, with their scheme.
/// Besides S3 and GCS, SkyPilot's S3-compatible stores (R2, Nebius, CoreWeave, OCI, IBM COS)
/// are reached with the S3 tools at the store's endpoint (`backend::mounts`).
pub const SCHEMES: [&str; 10] = [
    "s3", "gs", "r2", "nebius", "cw", "oci", "cos", "hf", "https", "http",
];
const STORES: [(&str, &str); 7] = [
    ("s3", "s3"),
    ("gcs", "gs"),
    ("r2", "r2"),
    ("nebius", "nebius"),
    ("coreweave", "cw"),
    ("oci", "oci"),
    ("ibm", "cos"),
];
/// SkyPilot's other stores: named so that the refusal can say which it is.
const OTHER_STORES: [&str; 1] = ["azure"];

/// The tools a node may have for `file_mounts`, as a pool declares them (`tools = [...]` in
/// the fleet file; `fuse` is `/dev/fuse` with `fusermount`).
pub const TOOLS: [&str; 11] = [
    "aws", "gcloud", "gsutil", "rclone", "fuse", "mount-s3", "goofys", "gcsfuse", "curl", "wget",
    "hf",
];

impl FileMount {
    /// What a node needs for this mount: all the tools of any one of these sets (nothing for
    /// a local source), as `backend::mounts` tries them.
    pub fn needs(&self) -> &'static [&'static [&'static str]] {
        let MountSource::Bucket { url, .. } = &self.source else {
            return &[];
        };
        let gcs = url.starts_with("gs://");
        let web = url.starts_with("http://") || url.starts_with("https://");
        if url.starts_with("hf://") {
            return &[&["hf"]];
        }
        match (self.mode, gcs, web) {
            (_, _, true) => &[&["curl"], &["wget"]],
            (MountMode::Copy, true, _) => &[&["gcloud"], &["gsutil"], &["rclone"]],
            (MountMode::Copy, false, _) => &[&["aws"], &["rclone"]],
            (_, true, _) => &[&["rclone", "fuse"], &["gcsfuse"]],
            (_, false, _) => &[&["rclone", "fuse"], &["mount-s3"], &["goofys"]],
        }
    }

    /// Whether a node with `tools` can do this mount.
    pub fn can(&self, tools: &[String]) -> bool {
        let needs = self.needs();
        needs.is_empty()
            || needs
                .iter()
                .any(|set| set.iter().all(|t| tools.iter().any(|have| have == t)))
    }

    /// What it needs, as a sentence part: `aws or rclone`, `rclone with fuse, mount-s3 or
    /// goofys`.
    pub fn needs_text(&self) -> String {
        let sets: Vec<String> = self.needs().iter().map(|s| s.join(" with ")).collect();
        match sets.as_slice() {
            [] => "nothing".to_string(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// A bucket URL in the form the node's prelude reads, `SCHEME://BUCKET/PATH`: OCI's
/// `oci://BUCKET@REGION/PATH` and IBM's `cos://REGION/BUCKET/PATH` lose their region (the
/// endpoint carries it).
fn canonical(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("oci://") {
        let (head, path) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket = head.split('@').next().unwrap_or(head);
        return format!(
            "oci://{bucket}{}{path}",
            if path.is_empty() { "" } else { "/" }
        );
    }
    if let Some(rest) = url.strip_prefix("cos://") {
        if let Some((_, after)) = rest.split_once('/') {
            return format!("cos://{after}");
        }
    }
    url.to_string()
}

/// `s` with `$NAME` and `${NAME}` replaced by their values in `envs` (names it does not have
/// stay as written), and the names it replaced.
pub(super) fn filled(
    s: &str,
    envs: &std::collections::BTreeMap<String, String>,
) -> (String, Vec<String>) {
    let b = s.as_bytes();
    let (mut out, mut names, mut i) = (String::new(), Vec::new(), 0);
    while i < b.len() {
        if b[i] == b'$' {
            let braced = b.get(i + 1) == Some(&b'{');
            let start = i + 1 + usize::from(braced);
            let mut end = start;
            while end < b.len()
                && (b[end].is_ascii_alphanumeric() || b[end] == b'_')
                && !(end == start && b[end].is_ascii_digit())
            {
                end += 1;
            }
            let closed = !braced || b.get(end) == Some(&b'}');
            if end > start && closed {
                if let Some(val) = envs.get(&s[start..end]) {
                    out.push_str(val);
                    names.push(s[start..end].to_string());
                    i = end + usize::from(braced);
                    continue;
                }
            }
        }
        let c = s[i..].chars().next().unwrap_or('$');
        out.push(c);
        i += c.len_utf8();
    }
    (out, names)
}

/// Takes out the mounts whose source is only variables the file leaves empty (`SKYPILOT_BUCKET:
/// ""`, meant for `sky launch --env`) and says which variables: such a mount is the submitter's
/// to give (`gantry submit --env`), as an env without a value is, not an empty source. Each
/// variable comes with the mount (its path as written) that asks for it.
pub(super) fn take_empty_sources(
    v: &mut Value,
    envs: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let Value::Mapping(m) = v else {
        return Vec::new();
    };
    let mut names: Vec<(String, String)> = Vec::new();
    m.retain(|at, src| {
        let src = match src {
            Value::String(s) => s.as_str(),
            Value::Mapping(o) => match o.get("source") {
                Some(Value::String(s)) => s.as_str(),
                _ => return true,
            },
            _ => return true,
        };
        let (text, used) = filled(src, envs);
        let empty = text.trim().is_empty() && !used.is_empty();
        if empty {
            let at = match at {
                Value::String(a) => a.clone(),
                other => serde_yaml_ng::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            for n in used {
                if !names.iter().any(|(k, _)| *k == n) {
                    names.push((n, at.clone()));
                }
            }
        }
        !empty
    });
    names
}

/// SkyPilot fills `$NAME` and `${NAME}` in `file_mounts` (paths, bucket names, sources) from
/// the task's `envs` and valued `secrets`; names it does not have stay as written.
pub(super) fn fill_in_envs(v: &mut Value, envs: &std::collections::BTreeMap<String, String>) {
    match v {
        Value::String(s) => *s = filled(s, envs).0,
        Value::Sequence(list) => list.iter_mut().for_each(|v| fill_in_envs(v, envs)),
        Value::Mapping(m) => {
            let old = std::mem::take(m);
            for (mut k, mut v) in old {
                fill_in_envs(&mut k, envs);
                fill_in_envs(&mut v, envs);
                m.insert(k, v);
            }
        }
        _ => {}
    }
}
const STORAGE_KEYS: [&str; 8] = [
    "name",
    "source",
    "store",
    "mode",
    "persistent",
    "config",
    "_force_delete",
    "_bucket_sub_path",
];

/// The scheme of `s` (`s3` of `s3://b/k`), if it is a URL.
fn scheme(s: &str) -> Option<&str> {
    let (scheme, rest) = s.split_once("://")?;
    (!scheme.is_empty()
        && !rest.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-'))
    .then_some(scheme)
}

/// Text a shell script may carry between single quotes: no control characters.
fn plain(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(char::is_control)
}

impl Reader<'_> {
    /// An error at the `file_mounts` entry `dest` (its key, searched after `file_mounts:`).
    fn mount_err(&self, dest: &str, message: String) -> SpecError {
        let (line, col) = locate_entry(self.text, dest);
        SpecError {
            file: self.file.to_string(),
            line,
            col,
            message: format!("`file_mounts` entry `{dest}`: {message}"),
        }
    }

    /// `file_mounts`, checked; `cloud` is the job's (a storage object with no `store` uses
    /// that cloud's store, as SkyPilot does).
    pub(super) fn file_mounts(
        &mut self,
        v: Value,
        cloud: Option<&str>,
    ) -> Result<Vec<FileMount>, SpecError> {
        let map = match v {
            Value::Null => return Ok(Vec::new()),
            Value::Mapping(m) => m,
            other => {
                return Err(self.err(
                    "file_mounts",
                    format!("expected a mapping of node paths to sources (`/data: s3://bucket/data`), found {}", kind(&other)),
                ))
            }
        };
        let mut out = Vec::new();
        for (k, v) in map {
            let dest = match k {
                Value::String(s) if plain(&s) => s,
                other => {
                    return Err(self.err(
                        "file_mounts",
                        format!(
                            "a node path must be a non-empty string, found {}",
                            kind(&other)
                        ),
                    ))
                }
            };
            if scheme(&dest).is_some() {
                return Err(self.mount_err(&dest, "the key is where the data appears on the node (a path), the value where it comes from: write `/data: s3://bucket/data`".to_string()));
            }
            match v {
                Value::String(src) => {
                    let source = self.source(&dest, &src, false)?;
                    out.push(FileMount {
                        dest,
                        source,
                        mode: MountMode::Copy,
                    });
                }
                Value::Mapping(m) => self.storage(&dest, m, cloud, &mut out)?,
                Value::Number(n) => {
                    let source = self.source(&dest, &n.to_string(), false)?;
                    out.push(FileMount {
                        dest,
                        source,
                        mode: MountMode::Copy,
                    });
                }
                other => {
                    return Err(self.mount_err(&dest, format!("expected a source (a local path or a bucket URL) or a storage object (`{{source, store, mode}}`), found {}", kind(&other))))
                }
            }
        }
        Ok(out)
    }

    /// A source as written: a bucket URL of a scheme gantry fetches, or a local path.
    fn source(&self, dest: &str, src: &str, create: bool) -> Result<MountSource, SpecError> {
        let src = src.trim();
        if !plain(src) {
            return Err(self.mount_err(
                dest,
                "the source is empty or has control characters".to_string(),
            ));
        }
        match scheme(src) {
            None => Ok(MountSource::Local(src.to_string())),
            Some(s) if SCHEMES.contains(&s) => Ok(MountSource::Bucket {
                url: canonical(src),
                create,
            }),
            Some(s) => Err(self.mount_err(
                dest,
                format!(
                    "`{s}://` sources are not fetched by gantry (it fetches {}): copy the data to one of those, or fetch it in `setup`",
                    SCHEMES.map(|s| format!("{s}://")).join(", ")
                ),
            )),
        }
    }

    /// A storage object: `{name, source, store, mode, persistent}`.
    fn storage(
        &mut self,
        dest: &str,
        m: serde_yaml_ng::Mapping,
        cloud: Option<&str>,
        out: &mut Vec<FileMount>,
    ) -> Result<(), SpecError> {
        let text = |key: &str| -> Result<Option<String>, SpecError> {
            match m.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(Value::Bool(b)) => Ok(Some(b.to_string())),
                Some(other) => Err(self.mount_err(
                    dest,
                    format!("`{key}`: expected a string, found {}", kind(other)),
                )),
            }
        };
        let (name, store, mode, sub) = (
            text("name")?,
            text("store")?,
            text("mode")?,
            text("_bucket_sub_path")?,
        );
        for k in m.keys() {
            let k = k.as_str().unwrap_or("?");
            if !STORAGE_KEYS.contains(&k) {
                return Err(self.mount_err(
                    dest,
                    format!(
                        "unknown storage field `{k}` (allowed: {})",
                        STORAGE_KEYS.join(", ")
                    ),
                ));
            }
        }
        let mode = match mode {
            None => MountMode::Mount,
            Some(s) => MountMode::parse(&s).ok_or_else(|| {
                self.mount_err(
                    dest,
                    format!("`mode: {s}`: expected COPY, MOUNT or MOUNT_CACHED"),
                )
            })?,
        };
        let store_scheme = match store.as_deref().map(str::to_ascii_lowercase) {
            None => None,
            Some(s) => match STORES.iter().find(|(n, _)| *n == s) {
                Some((_, scheme)) => Some(*scheme),
                None if OTHER_STORES.contains(&s.as_str()) => {
                    return Err(self.mount_err(dest, format!("`store: {s}`: gantry fetches S3, GCS and S3-compatible buckets (r2, nebius, coreweave, oci, ibm) and https:// URLs; copy the data to one of those, or fetch it in `setup`")))
                }
                None => {
                    return Err(self.mount_err(
                        dest,
                        format!(
                            "`store: {s}`: expected one of {}",
                            STORES.map(|(n, _)| n).join(", ")
                        ),
                    ))
                }
            },
        };
        let sources: Vec<String> = match m.get("source") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Sequence(list)) => {
                let mut all = Vec::new();
                for s in list {
                    match s {
                        Value::String(s) => all.push(s.clone()),
                        other => {
                            return Err(self.mount_err(
                                dest,
                                format!("`source`: expected paths, found {}", kind(other)),
                            ))
                        }
                    }
                }
                all
            }
            Some(other) => {
                return Err(self.mount_err(
                    dest,
                    format!(
                        "`source`: expected a path, a bucket URL or a list of paths, found {}",
                        kind(other)
                    ),
                ))
            }
        };
        let with_sub = |url: String| match sub.as_deref().map(|s| s.trim_matches('/')) {
            Some(s) if !s.is_empty() => format!("{}/{s}", url.trim_end_matches('/')),
            _ => url,
        };
        if sources.is_empty() {
            // A bucket by name: the store's, created where it is missing.
            let Some(name) = name.filter(|n| plain(n) && !n.contains('/')) else {
                return Err(self.mount_err(dest, "a storage object needs a `source` (a local path or a bucket URL) or the `name` of its bucket; SkyPilot stops at it too (an underspecified storage object): fill in the name".to_string()));
            };
            let scheme = match store_scheme {
                Some(s) => s,
                None => {
                    let s = if cloud == Some("gcp") { "gs" } else { "s3" };
                    self.ignored.push(format!(
                        "file_mounts.{dest}.store: not given; gantry uses {} (the store of the job's cloud, as SkyPilot does)",
                        if s == "gs" { "gcs" } else { "s3" }
                    ));
                    s
                }
            };
            out.push(FileMount {
                dest: dest.to_string(),
                source: MountSource::Bucket {
                    url: with_sub(format!("{scheme}://{name}")),
                    create: true,
                },
                mode,
            });
            return Ok(());
        }
        let many = sources.len() > 1;
        for src in sources {
            match self.source(dest, &src, false)? {
                MountSource::Bucket { url, .. } => {
                    if many {
                        return Err(self.mount_err(dest, "a list of sources may hold local paths only: give a bucket its own entry".to_string()));
                    }
                    if (url.starts_with("http") || url.starts_with("hf://"))
                        && mode != MountMode::Copy
                    {
                        let scheme = url.split("://").next().unwrap_or("https");
                        return Err(self.mount_err(dest, format!("a {scheme}:// source can only be copied: write `mode: COPY` (it is {mode:?})")));
                    }
                    out.push(FileMount {
                        dest: dest.to_string(),
                        source: MountSource::Bucket {
                            url: with_sub(url),
                            create: false,
                        },
                        mode,
                    });
                }
                MountSource::Local(path) => {
                    if mode != MountMode::Copy {
                        self.ignored.push(format!("file_mounts.{dest}: a local source is copied onto each node, not uploaded to a bucket and mounted: writes under {dest} stay on the node"));
                    }
                    // Several sources land side by side under dest, each by its own name.
                    let at = if many {
                        let base = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                        format!("{}/{base}", dest.trim_end_matches('/'))
                    } else {
                        dest.to_string()
                    };
                    out.push(FileMount {
                        dest: at,
                        source: MountSource::Local(path),
                        mode: MountMode::Copy,
                    });
                }
            }
        }
        if m.contains_key("persistent") || m.contains_key("_force_delete") {
            self.ignored.push(format!("file_mounts.{dest}.persistent: gantry never deletes a bucket; the data stays where it is"));
        }
        if m.contains_key("config") {
            self.ignored.push(format!(
                "file_mounts.{dest}.config: the store's own settings are the node's (its tool's configuration)"
            ));
        }
        Ok(())
    }
}

/// Where the key `dest` of `file_mounts` is written: the first line after `file_mounts:` that
/// holds it as a key (quoted or not); `file_mounts:` itself where it is not found.
fn locate_entry(text: &str, dest: &str) -> (usize, usize) {
    let start = text
        .lines()
        .position(|l| l.starts_with("file_mounts:"))
        .unwrap_or(0);
    crate::spec::find_key(text, dest, true, start).unwrap_or((start + 1, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts(yaml: &str) -> Result<Vec<FileMount>, String> {
        crate::spec::parse("t.yaml", yaml.as_bytes())
            .map(|s| s.file_mounts)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn paths_buckets_and_storage_objects_are_read() {
        let m = mounts(
            "run: x\nfile_mounts:\n  /data: s3://bucket/data\n  ~/.netrc: ~/.netrc\n  /ckpt:\n    name: my-ckpt\n    store: gcs\n    mode: mount_cached\n  /in:\n    source: gs://b/in\n    mode: COPY\n  /many:\n    source: [./a, ./b/]\n",
        )
        .unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(
            m[0].source,
            MountSource::Bucket {
                url: "s3://bucket/data".into(),
                create: false
            }
        );
        assert_eq!(m[0].mode, MountMode::Copy);
        assert_eq!(m[1].source, MountSource::Local("~/.netrc".into()));
        assert_eq!(
            m[2].source,
            MountSource::Bucket {
                url: "gs://my-ckpt".into(),
                create: true
            }
        );
        assert_eq!(m[2].mode, MountMode::MountCached);
        assert_eq!(m[3].mode, MountMode::Copy);
        assert_eq!(m[4].dest, "/many/a");
        assert_eq!(m[5].dest, "/many/b");
    }

    #[test]
    fn what_cannot_be_fetched_is_refused_at_its_entry() {
        let e = mounts("run: x\nfile_mounts:\n  /a: ./a\n  /data: ftp://host/data\n").unwrap_err();
        assert!(e.starts_with("t.yaml:4:3:"), "{e}");
        assert!(e.contains("`ftp://` sources are not fetched"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  /d:\n    name: b\n    store: azure\n").unwrap_err();
        assert!(
            e.contains("gantry fetches S3, GCS and S3-compatible"),
            "{e}"
        );
        let e = mounts("run: x\nfile_mounts:\n  /d:\n    mode: MOUNT\n").unwrap_err();
        assert!(e.contains("needs a `source`"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  /d: {source: s3://b, mode: SYNC}\n").unwrap_err();
        assert!(e.contains("expected COPY, MOUNT or MOUNT_CACHED"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  /d: {source: s3://b, sotre: s3}\n").unwrap_err();
        assert!(e.contains("unknown storage field `sotre`"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  s3://b: /d\n").unwrap_err();
        assert!(e.contains("write `/data: s3://bucket/data`"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  /d: {source: 'https://x.org/f', mode: MOUNT}\n")
            .unwrap_err();
        assert!(e.contains("a https:// source can only be copied"), "{e}");
        let e = mounts("run: x\nfile_mounts:\n  /d: {source: 'hf://org/model', mode: MOUNT}\n")
            .unwrap_err();
        assert!(e.contains("a hf:// source can only be copied"), "{e}");
    }

    #[test]
    fn envs_fill_in_paths_and_names_and_s3_compatible_stores_are_read() {
        let m = mounts(
            "run: x\nenvs: {SIZE: 7, B: ckpts}\nfile_mounts:\n  /m/llama-${SIZE}b: s3://w/llama-$SIZE/\n  /ck: {name: $B, store: nebius}\n  /o: oci://bk@us-sanjose-1/p\n  /i: cos://us-east/bk2/q\n  /u: $UNSET\n",
        )
        .unwrap();
        let urls: Vec<String> = m
            .iter()
            .map(|m| match &m.source {
                MountSource::Bucket { url, .. } => format!("{} <- {url}", m.dest),
                MountSource::Local(p) => format!("{} <- local {p}", m.dest),
            })
            .collect();
        assert_eq!(
            urls,
            [
                "/m/llama-7b <- s3://w/llama-7/",
                "/ck <- nebius://ckpts",
                "/o <- oci://bk/p",
                "/i <- cos://bk2/q",
                "/u <- local $UNSET",
            ]
        );
    }

    #[test]
    fn a_named_bucket_without_a_store_is_the_jobs_clouds() {
        let s = crate::spec::parse(
            "t.yaml",
            b"run: x\nresources: {infra: gcp}\nfile_mounts:\n  /ckpt: {name: ck}\n",
        )
        .unwrap();
        assert_eq!(
            s.file_mounts[0].source,
            MountSource::Bucket {
                url: "gs://ck".into(),
                create: true
            }
        );
        assert!(s.ignored.iter().any(|n| n.contains("gantry uses gcs")));
    }

    /// A source that is only a variable the file leaves empty, to be given at launch
    /// (`SKYPILOT_BUCKET: ""` and `sky launch --env SKYPILOT_BUCKET=…`), is the submitter's to
    /// give, as an env without a value is. Before: "the source is empty or has control
    /// characters".
    #[test]
    fn a_source_left_to_an_empty_variable_is_given_at_submit() {
        let s = crate::spec::parse(
            "t.yaml",
            b"run: x\nenvs:\n  SKYPILOT_BUCKET: \"\"\nfile_mounts:\n  /artifacts:\n    source: ${SKYPILOT_BUCKET}\n    mode: MOUNT\n  /data: s3://d\n",
        )
        .unwrap();
        assert_eq!(s.unset, ["envs.SKYPILOT_BUCKET"]);
        assert_eq!(
            s.unset_at_its_use().unwrap(),
            "file_mounts./artifacts: ${SKYPILOT_BUCKET} is not set: pass --env SKYPILOT_BUCKET=… at submit"
        );
        assert_eq!(s.file_mounts.len(), 1, "{:?}", s.file_mounts);
        // Given a value (as `gantry submit --env` writes it into the file), it is the bucket.
        let s = crate::spec::parse(
            "t.yaml",
            b"run: x\nenvs:\n  SKYPILOT_BUCKET: s3://runs\nfile_mounts:\n  /artifacts:\n    source: ${SKYPILOT_BUCKET}\n    mode: MOUNT\n",
        )
        .unwrap();
        assert!(s.unset.is_empty());
        assert!(
            matches!(&s.file_mounts[0].source, MountSource::Bucket { url, .. } if url == "s3://runs")
        );
    }
}
