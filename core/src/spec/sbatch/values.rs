//! Option values as sbatch writes them: counts, GRES, memory sizes, times, signals.

/// `[type:]N` (`--gpus-per-node`, `--gpus`, `--gpus-per-task`).
pub(super) fn typed_count(v: &str) -> Result<TypedCount, String> {
    let (ty, n) = match v.rsplit_once(':') {
        Some((t, n)) => (Some(t.to_string()), n),
        None => (None, v),
    };
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("`{v}`: expected [TYPE:]COUNT, like a100:4 or 4"))?;
    Ok((ty, n))
}

/// `--gres=gpu[:type]:N[,other…]`: the GPUs, and the other resources named.
/// GPUs asked for: the type, if named, and how many.
pub(super) type TypedCount = (Option<String>, u32);

pub(super) fn gres(v: &str) -> Result<(Option<TypedCount>, Vec<String>), String> {
    let (mut gpu, mut other) = (None, Vec::new());
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let item = item.trim_start_matches("gres:").trim_start_matches("gres/");
        let mut parts = item.split(':');
        if parts.next() != Some("gpu") {
            other.push(item.to_string());
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        let found = match rest.as_slice() {
            [] => (None, 1),
            [n] if n.parse::<u32>().is_ok() => (None, n.parse().unwrap_or(1)),
            [t] => (Some(t.to_string()), 1),
            [t, n] => (
                Some(t.to_string()),
                n.parse()
                    .map_err(|_| format!("`{item}`: expected gpu[:TYPE]:COUNT, like gpu:a100:4"))?,
            ),
            _ => {
                return Err(format!(
                    "`{item}`: expected gpu[:TYPE]:COUNT, like gpu:a100:4"
                ))
            }
        };
        gpu = Some(found);
    }
    Ok((gpu, other))
}

/// A count of whole things (`--nodes`, `--ntasks`, …).
pub(super) fn count(v: &str, what: &str) -> Result<u32, String> {
    if let Some((a, b)) = v.split_once('-') {
        if a == b {
            return count(a, what);
        }
        return Err(format!(
            "`{v}`: a range of {what}; gantry runs a job on a fixed number: give one"
        ));
    }
    v.trim()
        .parse()
        .map_err(|_| format!("`{v}`: expected a number of {what}"))
}

/// Memory as sbatch writes it (`64G`, `512000`, `500M`; no unit: megabytes), in MiB.
pub(super) fn memory_mib(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{v}`: expected a size like 64G or 500M"))?;
    let per = match unit.to_ascii_uppercase().trim_end_matches('B') {
        "" | "M" => 1,
        "K" => return Ok(n.div_ceil(1024)),
        "G" => 1024,
        "T" => 1024 * 1024,
        _ => return Err(format!("`{v}`: unknown unit `{unit}`; use K, M, G or T")),
    };
    Ok(n.saturating_mul(per))
}

/// A time limit as sbatch writes it: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`;
/// `None` for no limit.
pub(super) fn time_s(v: &str) -> Result<Option<f64>, String> {
    let bad =
        || format!("`{v}`: expected a time like 90 (minutes), 1:30:00, 2-00:00:00 or UNLIMITED");
    if ["infinite", "unlimited"].contains(&v.to_ascii_lowercase().as_str()) {
        return Ok(None);
    }
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (d.parse::<u32>().map_err(|_| bad())?, Some(r)),
        None => (0, None),
    };
    // In f64: no sum of parsed numbers overflows.
    let nums = |s: &str| -> Result<Vec<f64>, String> {
        s.split(':')
            .map(|p| p.parse::<u32>().map(f64::from).map_err(|_| bad()))
            .collect()
    };
    let s = match rest {
        Some(r) => match nums(r)?.as_slice() {
            [h] => h * 3600.0,
            [h, m] => h * 3600.0 + m * 60.0,
            [h, m, s] => h * 3600.0 + m * 60.0 + s,
            _ => return Err(bad()),
        },
        None => match nums(v)?.as_slice() {
            [m] => m * 60.0,
            [m, s] => m * 60.0 + s,
            [h, m, s] => h * 3600.0 + m * 60.0 + s,
            _ => return Err(bad()),
        },
    };
    let total = f64::from(days) * 86_400.0 + s;
    if total == 0.0 {
        return Err(format!("`{v}` is no time at all"));
    }
    Ok(Some(total))
}

/// `--signal=[{R|B}:]SIG[@SECONDS]`: the signal and its lead time (sbatch's default 60 s).
pub(super) fn signal(v: &str) -> Result<(String, f64), String> {
    let v2 = v
        .strip_prefix("R:")
        .or_else(|| v.strip_prefix("B:"))
        .or_else(|| v.strip_prefix("RB:"))
        .or_else(|| v.strip_prefix("BR:"))
        .unwrap_or(v);
    let (sig, secs) = match v2.split_once('@') {
        Some((s, t)) => (
            s,
            t.parse::<u32>()
                .map_err(|_| format!("`{v}`: `{t}` is not a number of seconds"))?,
        ),
        None => (v2, 60),
    };
    let by_number = [
        (1, "SIGHUP"),
        (2, "SIGINT"),
        (3, "SIGQUIT"),
        (10, "SIGUSR1"),
        (12, "SIGUSR2"),
        (15, "SIGTERM"),
    ];
    let name = match sig.parse::<u32>() {
        Ok(n) => by_number
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, s)| s.to_string()),
        Err(_) => {
            let up = sig.to_ascii_uppercase();
            let up = if up.starts_with("SIG") {
                up
            } else {
                format!("SIG{up}")
            };
            by_number.iter().any(|(_, s)| *s == up).then_some(up)
        }
    };
    let name = name.ok_or_else(|| {
        format!("`{v}`: `{sig}` is not a signal a job can checkpoint on; allowed: USR1, USR2, TERM, INT, HUP, QUIT (or their numbers)")
    })?;
    Ok((name, f64::from(secs)))
}
