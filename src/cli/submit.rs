//! `gantry submit`: a job file — a SkyPilot or dstack task, a pipeline of them, a batch script
//! — checked here first (its errors at FILE:LINE:COL), with what was given on the command line
//! written in (`--env`, `--secret`, `--gpus`, `--num-nodes`), a workdir and local mounts made
//! the submitter's (packed as the submitter and shipped to a daemon that is not this user's
//! own: over TCP, or a shared root daemon's socket), then sent; a pipeline's tasks each follow
//! the one before.

use super::remote::Target;
use super::{CliError, Output};
use gantry::api::Submitted;
use gantry::client::http::{encode, ClientError};
use serde_yaml_ng::{Mapping, Value as Y};
use std::path::PathBuf;

/// What `gantry submit` gives the job beside its file: `--env`, `--secret`, `--gpus`,
/// `--num-nodes`.
pub struct Given {
    pub envs: Vec<String>,
    /// Dotenv files read before `envs` (which override them), as `sky launch --env-file`.
    pub env_files: Vec<std::path::PathBuf>,
    pub secrets: Vec<String>,
    pub gpus: Option<String>,
    pub num_nodes: Option<u16>,
}

/// The job file's top-level mapping as `edit` changes it, written out again (its comments and
/// layout are not kept).
fn edit_yaml(
    name: &str,
    text: &str,
    edit: impl FnOnce(&mut Mapping) -> Result<(), CliError>,
) -> Result<Vec<u8>, CliError> {
    let mut doc: Y =
        serde_yaml_ng::from_str(text).map_err(|e| CliError::usage(format!("{name}: {e}")))?;
    let Some(map) = doc.as_mapping_mut() else {
        return Err(CliError::usage(format!(
            "{name}: a job file is a mapping of fields"
        )));
    };
    edit(map)?;
    serde_yaml_ng::to_string(&doc)
        .map(String::into_bytes)
        .map_err(|e| CliError::usage(format!("{name}: {e}")))
}

/// The mapping under `key` (`envs`, `resources`), made where the file has none or leaves it
/// empty.
fn section<'a>(name: &str, map: &'a mut Mapping, key: &str) -> Result<&'a mut Mapping, CliError> {
    let entry = map
        .entry(Y::String(key.into()))
        .or_insert_with(|| Y::Mapping(Mapping::new()));
    if entry.is_null() {
        *entry = Y::Mapping(Mapping::new());
    }
    entry
        .as_mapping_mut()
        .ok_or_else(|| CliError::usage(format!("{name}: `{key}` is not a mapping")))
}

/// A workdir is the submitter's, as `sky launch` reads it: a relative or `~` one made absolute
/// for the user's own daemon; for any other (over TCP, or a root daemon shared on this
/// machine, which opens no path for its callers) packed as this user and shipped to it (`POST
/// /v1/workdirs`), and the job given the daemon's copy.
fn with_workdir(
    name: &str,
    text: Vec<u8>,
    workdir: Option<&str>,
    t: &Target,
    ship: bool,
) -> Result<Vec<u8>, CliError> {
    let Some(w) = workdir else { return Ok(text) };
    let s = String::from_utf8_lossy(&text);
    // A batch script's `--chdir` is a place where the job runs, not a directory to send.
    if gantry::spec::sbatch::is_batch_script(name, &s)
        || (!ship && std::path::Path::new(w).is_absolute())
    {
        return Ok(text);
    }
    let path = submitters(name, &format!("workdir `{w}`"), w)?;
    let there = if ship {
        let packed = gantry::workdir::pack(&path, gantry::workdir::DEFAULT_MAX_BYTES)
            .map_err(|e| CliError::usage(format!("{name}: workdir `{w}`: {e}")))?;
        let size = packed.len();
        let kept = t.client()?.upload_workdir(packed)?;
        let kept = kept.path;
        eprintln!(
            "gantry: {name}: workdir {} shipped to the daemon ({:.1} MiB packed)",
            path.display(),
            size as f64 / f64::from(1 << 20)
        );
        kept
    } else {
        path.display().to_string()
    };
    let dstack = gantry::spec::dstack::is_dstack(&s);
    edit_yaml(name, &s, |map| {
        // The key the file gave it under: dstack's `repos` or `working_dir`, else `workdir`.
        let key = match (dstack, map.contains_key("repos")) {
            (true, true) => {
                map.insert(
                    Y::String("repos".into()),
                    Y::Sequence(vec![Y::String(there.clone())]),
                );
                return Ok(());
            }
            (true, false) => "working_dir",
            (false, _) => "workdir",
        };
        map.insert(Y::String(key.into()), Y::String(there.clone()));
        Ok(())
    })
}

/// A path as the submitter wrote it (`~/x`, relative to the current directory, absolute),
/// as it is on this machine; `what` names it in the error when it is not there.
fn submitters(name: &str, what: &str, w: &str) -> Result<std::path::PathBuf, CliError> {
    let path = match (w.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            std::path::PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => std::env::current_dir()
            .map_err(|e| CliError::usage(format!("{name}: the current directory: {e}")))?
            .join(w),
    };
    path.canonicalize()
        .map_err(|e| CliError::usage(format!("{name}: {what} ({}): {e}", path.display())))
}

/// `text` with each local source of `file_mounts` as the daemon will find it: absolute for the
/// user's own daemon; for any other, packed as this user and shipped to it as a workdir is
/// (`POST /v1/workdirs`, a file as a directory of one) and named by the daemon's copy.
fn with_mounts(
    name: &str,
    text: Vec<u8>,
    mounts: &[gantry::spec::mounts::FileMount],
    t: &Target,
    ship: bool,
) -> Result<Vec<u8>, CliError> {
    let mut there = std::collections::BTreeMap::new();
    for m in mounts {
        let gantry::spec::mounts::MountSource::Local(w) = &m.source else {
            continue;
        };
        if there.contains_key(w) {
            continue;
        }
        let what = format!("`file_mounts` entry `{}`: source `{w}`", m.dest);
        let path = submitters(name, &what, w)?;
        let at = if ship {
            let packed = if path.is_dir() {
                gantry::workdir::pack(&path, gantry::workdir::DEFAULT_MAX_BYTES)
            } else {
                gantry::workdir::pack_file(&path, gantry::workdir::DEFAULT_MAX_BYTES)
            }
            .map_err(|e| CliError::usage(format!("{name}: {what}: {e}")))?;
            let size = packed.len();
            let kept = t.client()?.upload_workdir(packed)?;
            let kept = kept.path;
            eprintln!(
                "gantry: {name}: file_mounts {} shipped to the daemon ({:.1} MiB packed)",
                path.display(),
                size as f64 / f64::from(1 << 20)
            );
            match (path.is_dir(), path.file_name()) {
                (false, Some(f)) => format!("{kept}/{}", f.to_string_lossy()),
                _ => kept,
            }
        } else {
            path.display().to_string()
        };
        there.insert(w.clone(), at);
    }
    if there.is_empty() {
        return Ok(text);
    }
    let s = String::from_utf8_lossy(&text);
    edit_yaml(name, &s, |map| {
        let swap = |v: &mut Y| {
            if let Some(new) = v.as_str().and_then(|w| there.get(w.trim())) {
                *v = Y::String(new.clone());
            }
        };
        let Some(Y::Mapping(all)) = map.get_mut("file_mounts") else {
            return Ok(());
        };
        for (_, v) in all.iter_mut() {
            match v {
                Y::Mapping(storage) => match storage.get_mut("source") {
                    Some(Y::Sequence(list)) => list.iter_mut().for_each(swap),
                    Some(one) => swap(one),
                    None => {}
                },
                one => swap(one),
            }
        }
        Ok(())
    })
}

/// `text` with `given` written into its `envs` and `secrets` (as SkyPilot's `--env` and
/// `--secret` do), `num_nodes` and `resources.accelerators`; the file as it is when nothing is
/// given.
/// The NAME=VALUE pairs of a dotenv file (`--env-file`), read as `sky launch --env-file`
/// reads one (python-dotenv: `export`, quotes, comments, `${NAME}` of earlier lines). A line
/// it cannot read is named by its number.
fn env_file(path: &std::path::Path) -> Result<Vec<(String, String)>, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--env-file {shown}: cannot read it: {e}")))?;
    let mut out = Vec::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        match item {
            Ok(pair) => out.push(pair),
            Err(dotenvy::Error::LineParse(line, col)) => {
                let first = line.lines().next().unwrap_or_default();
                let at = text
                    .lines()
                    .position(|l| l == first)
                    .map_or(String::new(), |n| format!(":{}:{}", n + 1, col + 1));
                return Err(CliError::usage(format!(
                    "--env-file {shown}{at}: `{first}` is not NAME=VALUE (a dotenv line: NAME=VALUE, `export NAME=VALUE`, values quoted with ' or \", # comments)"
                )));
            }
            Err(e) => return Err(CliError::usage(format!("--env-file {shown}: {e}"))),
        }
    }
    Ok(out)
}

fn with_given(name: &str, text: Vec<u8>, given: &Given) -> Result<Vec<u8>, CliError> {
    if given.envs.is_empty()
        && given.env_files.is_empty()
        && given.secrets.is_empty()
        && given.gpus.is_none()
        && given.num_nodes.is_none()
    {
        return Ok(text);
    }
    let s = String::from_utf8_lossy(&text);
    if gantry::spec::sbatch::is_batch_script(name, &s) {
        return Err(CliError::usage(format!(
            "{name}: --env, --secret, --gpus and --num-nodes are for YAML job files; in a batch script write #SBATCH --export=NAME=VALUE, --gres=gpu:N, --nodes=N"
        )));
    }
    let valid = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut envs = Vec::new();
    for path in &given.env_files {
        for (k, v) in env_file(path)? {
            if !valid(&k) {
                return Err(CliError::usage(format!(
                    "--env-file {}: `{k}`: not a name a shell can export (letters, digits and _, not starting with a digit)",
                    path.display()
                )));
            }
            envs.push((k, v));
        }
    }
    for e in &given.envs {
        let Some((k, v)) = e.split_once('=').filter(|(k, _)| valid(k)) else {
            return Err(CliError::usage(format!(
                "--env {e}: expected NAME=VALUE, NAME of letters, digits and _ (not starting with a digit)"
            )));
        };
        envs.push((k.to_string(), v.to_string()));
    }
    let mut secrets = Vec::new();
    for e in &given.secrets {
        let (k, v) = match e.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => {
                let v = std::env::var(e).map_err(|_| {
                    CliError::usage(format!(
                        "--secret {e}: {e} is not set in your environment (export it, or give --secret {e}=VALUE)"
                    ))
                })?;
                (e.clone(), v)
            }
        };
        if !valid(&k) {
            return Err(CliError::usage(format!(
                "--secret {e}: expected NAME or NAME=VALUE, NAME of letters, digits and _"
            )));
        }
        secrets.push((k, v));
    }
    if gantry::spec::dstack::is_dstack(&s) {
        return with_given_dstack(name, &s, envs, secrets, given);
    }
    edit_yaml(name, &s, |map| {
        for (key, given) in [("envs", envs), ("secrets", secrets)] {
            if given.is_empty() {
                continue;
            }
            let m = section(name, map, key)?;
            for (k, v) in given {
                m.insert(Y::String(k), Y::String(v));
            }
        }
        if let Some(n) = given.num_nodes {
            map.insert(Y::String("num_nodes".into()), Y::Number(n.into()));
        }
        if let Some(g) = &given.gpus {
            // A bare count is any model, as `accelerators: "*:8"` would be.
            let g = if g.parse::<f64>().is_ok() {
                format!("{}:{g}", gantry::spec::ANY_MODEL)
            } else {
                g.clone()
            };
            let res = section(name, map, "resources")?;
            // `gpus` is the same field under SkyPilot's newer name: one of them, the given one.
            res.remove(Y::String("gpus".into()));
            res.insert(Y::String("accelerators".into()), Y::String(g));
        }
        Ok(())
    })
}

/// `with_given` for a dstack task: `env` (a list or a mapping), `nodes`, `resources.gpu`.
fn with_given_dstack(
    name: &str,
    s: &str,
    envs: Vec<(String, String)>,
    secrets: Vec<(String, String)>,
    given: &Given,
) -> Result<Vec<u8>, CliError> {
    if !secrets.is_empty() {
        return Err(CliError::usage(format!(
            "{name}: a dstack task has no secrets: give the value with --env NAME=VALUE (it is shown in the job's spec), or write the task as a SkyPilot file with `secrets:`"
        )));
    }
    edit_yaml(name, s, |map| {
        if !envs.is_empty() {
            let env = map
                .entry(Y::String("env".into()))
                .or_insert_with(|| Y::Mapping(Mapping::new()));
            if env.is_null() {
                *env = Y::Mapping(Mapping::new());
            }
            match env {
                Y::Sequence(items) => {
                    items.extend(envs.into_iter().map(|(k, v)| Y::String(format!("{k}={v}"))))
                }
                Y::Mapping(m) => {
                    for (k, v) in envs {
                        m.insert(Y::String(k), Y::String(v));
                    }
                }
                _ => {
                    return Err(CliError::usage(format!(
                        "{name}: `env` is neither a list nor a mapping"
                    )))
                }
            }
        }
        if let Some(n) = given.num_nodes {
            map.insert(Y::String("nodes".into()), Y::Number(n.into()));
        }
        if let Some(g) = &given.gpus {
            section(name, map, "resources")?.insert(Y::String("gpu".into()), Y::String(g.clone()));
        }
        Ok(())
    })
}

pub fn submit(
    t: &Target,
    file: PathBuf,
    (team, priority): (Option<String>, Option<String>),
    output: super::SubmitOutput,
    dry_run: bool,
    given: &Given,
) -> Result<(), CliError> {
    let stdin = file.as_os_str() == "-";
    let name = if stdin {
        "stdin".to_string()
    } else {
        file.display().to_string()
    };
    let text = if stdin {
        let mut t = Vec::new();
        use std::io::Read;
        std::io::stdin()
            .take(gantry::spec::MAX_SPEC_BYTES as u64 + 1)
            .read_to_end(&mut t)
            .map_err(|e| CliError::usage(format!("stdin: cannot read the job file: {e}")))?;
        t
    } else {
        std::fs::read(&file)
            .map_err(|e| CliError::usage(format!("{name}: cannot read the job file: {e}")))?
    };
    // Check locally first, so a broken file gets its file:line:col without a round trip;
    // every task of a pipeline is checked before any is sent.
    let pipeline =
        gantry::spec::parse_pipeline(&name, &text).map_err(|e| CliError::usage(e.to_string()))?;
    if dry_run && pipeline.tasks.len() > 1 {
        return Err(CliError::usage(format!(
            "{name}: --dry-run previews one job, and this pipeline has {} tasks (each starts once the one before it has completed); preview a task on its own",
            pipeline.tasks.len()
        )));
    }
    // A preview ships nothing: where the job lands does not depend on its files.
    let ship = t.ships_files() && !dry_run;
    let texts = pipeline
        .tasks
        .iter()
        .map(|(doc, _)| prepare(&name, doc.as_bytes().to_vec(), given, t, ship))
        .collect::<Result<Vec<_>, _>>()?;
    if dry_run {
        let (text, (written, _)) = (&texts[0], &pipeline.tasks[0]);
        let path = job_path("/v1/preview", &name, team.as_deref(), priority.as_deref());
        let p: gantry::api::Preview = t
            .client()?
            .call("POST", &path, Some(text))
            .map_err(|e| at_its_field(&name, written, e))?;
        return print_preview(&p, output);
    }
    let mut answers: Vec<Submitted> = Vec::new();
    for (text, (written, _)) in texts.into_iter().zip(&pipeline.tasks) {
        // Each task after the first starts once the one before it has completed.
        // Each task keeps the pipeline's name, so that its jobs show what they belong to.
        let prev = answers.last().map(|v| v.id);
        let text = if prev.is_some() || pipeline.name.is_some() {
            edit_yaml(&name, &String::from_utf8_lossy(&text), |map| {
                if let Some(prev) = prev {
                    map.insert(Y::String("after".into()), Y::Number(prev.into()));
                }
                if let Some(p) = &pipeline.name {
                    map.insert(Y::String("pipeline".into()), Y::String(p.clone()));
                }
                Ok(())
            })?
        } else {
            text
        };
        match post_job(
            t,
            &name,
            written,
            &text,
            team.as_deref(),
            priority.as_deref(),
        ) {
            Ok(v) => answers.push(v),
            Err(e) => {
                // A pipeline is whole or not at all: the tasks sent are taken back.
                let sent: Vec<String> = answers.iter().map(|v| v.id.to_string()).collect();
                if !sent.is_empty() {
                    let mut c = t.client()?;
                    for id in &sent {
                        let _ = c.call::<gantry::api::Acted>(
                            "POST",
                            &format!("/v1/jobs/{id}/cancel"),
                            None,
                        );
                    }
                    eprintln!(
                        "gantry: {name}: task {} of the pipeline was refused; its earlier tasks (jobs {}) are cancelled",
                        sent.len() + 1,
                        sent.join(", ")
                    );
                }
                return Err(e);
            }
        }
    }
    let single = answers.len() == 1;
    match output {
        super::SubmitOutput::Json | super::SubmitOutput::Yaml => {
            let as_ = if matches!(output, super::SubmitOutput::Json) {
                Output::Json
            } else {
                Output::Yaml
            };
            let printed = match answers.pop() {
                Some(one) if single => super::print_as(as_, &one),
                last => {
                    answers.extend(last);
                    super::print_as(
                        as_,
                        &serde_json::json!({ "pipeline": pipeline.name, "jobs": answers }),
                    )
                }
            };
            printed.map_err(CliError::usage)
        }
        super::SubmitOutput::Id => {
            for v in &answers {
                println!("{}", v.id);
            }
            Ok(())
        }
        super::SubmitOutput::Table if single => {
            println!("submitted job {}", answers[0].id);
            Ok(())
        }
        super::SubmitOutput::Table => {
            let ids: Vec<String> = answers.iter().map(|v| v.id.to_string()).collect();
            println!(
                "submitted pipeline {}: jobs {} (each starts once the one before it has completed)",
                pipeline.name.as_deref().unwrap_or("(unnamed)"),
                ids.join(" → ")
            );
            Ok(())
        }
    }
}

/// One task's text as it is sent: checked, with what was given at submit written in and a
/// relative `workdir` made the submitter's; what the daemon will not act on is said first.
pub(super) fn prepare(
    name: &str,
    text: Vec<u8>,
    given: &Given,
    t: &Target,
    ship: bool,
) -> Result<Vec<u8>, CliError> {
    let text = with_given(name, text, given)?;
    let spec = gantry::spec::parse(name, &text).map_err(|e| {
        CliError::usage(format!(
            "{e} (in the file as --env, --secret, --gpus and --num-nodes made it)"
        ))
    })?;
    // Only `workdir` and local `file_mounts` sources change: the spec read above stands for
    // the text sent.
    let text = with_workdir(name, text, spec.workdir.as_deref(), t, ship)?;
    let text = with_mounts(name, text, &spec.file_mounts, t, ship)?;
    if let Some(said) = spec.unset_at_its_use() {
        return Err(CliError::usage(format!("{name}: {said}")));
    }
    if let Some(first) = spec.unset.first() {
        let (what, key) = first.split_once('.').unwrap_or(("envs", first));
        let flag = if what == "secrets" {
            format!("--secret {key}")
        } else {
            format!("--env {key}=…")
        };
        return Err(CliError::usage(format!(
            "{name}: {} {} no value in the file: give {} at submit ({flag})",
            spec.unset.join(", "),
            if spec.unset.len() > 1 { "have" } else { "has" },
            if spec.unset.len() > 1 { "them" } else { "it" }
        )));
    }
    // Said before the job goes, so nothing in the file is dropped unseen.
    for i in &spec.ignored {
        eprintln!("gantry: {name}: not acted on: {i}");
    }
    Ok(text)
}

/// A refusal of the daemon about a field of the file, said at that field as the file's own
/// errors are (`FILE:LINE:COL: \`field\`: …`).
pub(super) fn at_its_field(name: &str, written: &str, e: ClientError) -> CliError {
    let at = e.at_its_field(name, written);
    let mut out = CliError::from(e);
    if let Some((_, message)) = at {
        out.message = message;
    }
    out
}

/// Sends one job file (`written`: the task as the file has it, for where its errors are); the
/// daemon's answer.
fn post_job(
    t: &Target,
    name: &str,
    written: &str,
    text: &[u8],
    team: Option<&str>,
    priority: Option<&str>,
) -> Result<Submitted, CliError> {
    let path = job_path("/v1/jobs", name, team, priority);
    // A retry after a lost reply (here or in the client) finds the job, never makes two.
    let key = gantry::client::http::new_idempotency_key()?;
    t.client()?
        .call_with("POST", &path, Some(text), &[("Idempotency-Key", &key)])
        .map_err(|e| at_its_field(name, written, e))
}

/// `base` with the file's name, and the team and class given at submit, as its query.
fn job_path(base: &str, name: &str, team: Option<&str>, priority: Option<&str>) -> String {
    let mut path = format!("{base}?file={}", encode(name));
    if let Some(team) = team {
        path.push_str(&format!("&team={}", encode(team)));
    }
    if let Some(p) = priority {
        path.push_str(&format!("&priority={}", encode(p)));
    }
    path
}

/// `submit --dry-run`: where the job would land now, and what submitting it would do.
fn print_preview(p: &gantry::api::Preview, output: super::SubmitOutput) -> Result<(), CliError> {
    let data = match output {
        super::SubmitOutput::Json => Some(Output::Json),
        super::SubmitOutput::Yaml => Some(Output::Yaml),
        _ => None,
    };
    if let Some(as_) = data {
        return super::print_as(as_, p).map_err(CliError::usage);
    }
    let esc = gantry::console::app::escape;
    println!(
        "job {} for team {} at {}, {} GPU(s) (nothing was submitted):",
        esc(p.name.as_deref().unwrap_or("(unnamed)")),
        esc(&p.team),
        esc(&p.class),
        p.gpus
    );
    match &p.reason {
        None => println!(
            "  fits now on {} (${:.2}/h); quota and queue order decide at the next cycle",
            esc(&p.nodes.join(", ")),
            p.dollars_per_hour
        ),
        Some(why) => println!("  does not fit now: {}", esc(why)),
    }
    match &p.what_if {
        Some(w) => {
            println!("  if it were submitted now and the queue stays as it is:");
            for l in w.lines() {
                println!("    {}", esc(&l));
            }
        }
        None => println!("  (what it would do could not be worked out in time)"),
    }
    Ok(())
}
