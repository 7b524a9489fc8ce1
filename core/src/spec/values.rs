//! Value types of the spec. Each validates inside `Deserialize`, so its errors keep the
//! position of the offending value.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_yaml_ng::Value;

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What a YAML value is, for messages.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A name-like string: 1..=253 characters, no control characters (they would corrupt
/// terminals and logs that show it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let s = scalar_text(&v)
            .ok_or_else(|| D::Error::custom(format!("expected a string, found {}", kind(&v))))?;
        if s.is_empty() || s.chars().count() > 253 {
            return Err(D::Error::custom("expected 1..=253 characters"));
        }
        if let Some(c) = s.chars().find(|c| c.is_control()) {
            return Err(D::Error::custom(format!(
                "control character {:?} is not allowed here",
                c
            )));
        }
        Ok(Text(s))
    }
}

/// A whole number ≥ 0 (counts, sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match &v {
            Value::Number(n) => n
                .as_u64()
                .filter(|&x| x <= 1_000_000)
                .map(|x| Count(x as u32))
                .ok_or_else(|| {
                    D::Error::custom(format!("{n} is not a whole number in 0..=1000000"))
                }),
            other => Err(D::Error::custom(format!(
                "expected a whole number, found {}",
                kind(other)
            ))),
        }
    }
}

/// A number (integer or decimal).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(pub f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match &v {
            Value::Number(n) => n
                .as_f64()
                .filter(|x| x.is_finite())
                .map(Number)
                .ok_or_else(|| D::Error::custom("expected a finite number")),
            other => Err(D::Error::custom(format!(
                "expected a number, found {}",
                kind(other)
            ))),
        }
    }
}

/// SkyPilot's `cpus` / `memory`: a number, or a string like "32" or "32+" (at least 32), held
/// in thousandths (32 CPUs = 32000 milli-CPU; 256 GB = 256000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(pub u32);

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = scalar_text(&v).ok_or_else(|| {
            D::Error::custom(format!(
                "expected a number like 32 or \"32+\", found {}",
                kind(&v)
            ))
        })?;
        let n: f64 = text.trim().trim_end_matches('+').parse().map_err(|_| {
            D::Error::custom(format!("`{text}` is not a number like 32 or \"32+\""))
        })?;
        if !(n.is_finite() && n > 0.0 && n <= 1_000_000.0) {
            return Err(D::Error::custom(format!(
                "`{text}` is out of range; expected more than 0 and at most 1000000"
            )));
        }
        Ok(Amount((n * 1000.0).round() as u32))
    }
}

/// SkyPilot's `memory`: GB as a number or a string — "32", "32+" (at least 32), "32GB",
/// "32GB+", "512MB" — held in thousandths of a GB (as `Amount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryGb(pub u32);

impl<'de> Deserialize<'de> for MemoryGb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = scalar_text(&v).ok_or_else(|| {
            D::Error::custom(format!(
                "expected GB like 32, \"32+\" or \"32GB+\", found {}",
                kind(&v)
            ))
        })?;
        let gb = size_gb(text.trim().trim_end_matches('+')).map_err(|_| {
            D::Error::custom(format!(
                "`{text}` is not memory like 32, \"32+\" or \"32GB+\""
            ))
        })?;
        if !(gb > 0.0 && gb <= 1_000_000.0) {
            return Err(D::Error::custom(format!(
                "`{text}` is out of range; expected more than 0 and at most 1000000 GB"
            )));
        }
        Ok(MemoryGb((gb * 1000.0).round() as u32))
    }
}

/// SkyPilot's `disk_size`: GB as a whole number or a size string ("1024GB", "1TB").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskGb(pub u32);

impl<'de> Deserialize<'de> for DiskGb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = scalar_text(&v).ok_or_else(|| {
            D::Error::custom(format!(
                "expected GB like 256 or \"1TB\", found {}",
                kind(&v)
            ))
        })?;
        let gb = size_gb(text.trim())
            .ok()
            .filter(|g| *g >= 0.0 && *g <= 1_000_000.0)
            .ok_or_else(|| {
                D::Error::custom(format!("`{text}` is not a disk size like 256 or \"1TB\""))
            })?;
        Ok(DiskGb(gb.ceil() as u32))
    }
}

/// Why a size did not read.
enum SizeError {
    NotANumber,
    /// The unit as written, lowercased.
    Unit(String),
}

/// A size in GB from "32", "32GB", "32GiB", "512MB", "1TB", "1Ti" (a bare number is GB; the
/// units are binary whatever their spelling, as SkyPilot's `parse_memory_resource` reads KB,
/// Ki, MB, Mi, GB, Gi, TB, Ti, PB and Pi). Memory, disk and VRAM sizes all read through it.
fn size_gb(t: &str) -> Result<f64, SizeError> {
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| SizeError::NotANumber)?;
    let k = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "g" | "gb" | "gi" | "gib" => 1.0,
        "k" | "kb" | "ki" | "kib" => 1.0 / (1024.0 * 1024.0),
        "m" | "mb" | "mi" | "mib" => 1.0 / 1024.0,
        "t" | "tb" | "ti" | "tib" => 1024.0,
        "p" | "pb" | "pi" | "pib" => 1024.0 * 1024.0,
        other => return Err(SizeError::Unit(other.to_string())),
    };
    Some(n * k)
        .filter(|x| x.is_finite())
        .ok_or(SizeError::NotANumber)
}

/// VRAM: "40GB", "40GiB", "40960MiB" or a number of GB; held in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u32);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = scalar_text(&v).ok_or_else(|| {
            D::Error::custom(format!("expected a size like 40GB, found {}", kind(&v)))
        })?;
        let mib = match size_gb(text.trim()) {
            // Scaling by a power of two is exact: 40960MiB is 40960 again.
            Ok(gb) => gb * 1024.0,
            Err(SizeError::NotANumber) => {
                return Err(D::Error::custom(format!(
                    "`{text}` is not a size like 40GB"
                )))
            }
            Err(SizeError::Unit(other)) => {
                return Err(D::Error::custom(format!(
                    "unknown unit `{other}` in `{text}`; use MiB, GB or TB"
                )))
            }
        };
        if !(1.0..=16.0 * 1024.0 * 1024.0).contains(&mib) {
            return Err(D::Error::custom(format!(
                "`{text}` is out of range (1 MiB ..= 16 TB)"
            )));
        }
        Ok(Bytes(mib.round() as u32))
    }
}

/// A duration: "90s", "500ms", "30m", "90min", "12h", "2d", "1h30m", "1h 30m", "1.5h", or a
/// number of seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration(pub f64);

/// Seconds in `text`: a bare number, else `humantime`'s durations, else a fractional one
/// ("1.5h", which humantime does not take).
pub fn parse_duration(text: &str) -> Option<f64> {
    let t = text.trim();
    if let Ok(s) = t.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then_some(s);
    }
    if let Ok(d) = humantime::parse_duration(t) {
        return Some(d.as_secs_f64());
    }
    fractional(t)
}

/// "1.5h", "2.5d": a decimal number and one unit (s, m, h, d).
fn fractional(t: &str) -> Option<f64> {
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    Some(n * scale).filter(|s| s.is_finite())
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let text = scalar_text(&v).ok_or_else(|| {
            D::Error::custom(format!("expected a duration like 30m, found {}", kind(&v)))
        })?;
        match parse_duration(&text) {
            Some(s) if s > 0.0 && s <= 365.0 * 86_400.0 => Ok(Duration(s)),
            Some(_) => Err(D::Error::custom(format!(
                "`{text}` is out of range; expected more than 0 and at most a year"
            ))),
            None => Err(D::Error::custom(format!(
                "`{text}` is not a duration; expected e.g. 90s, 30m, 12h, 1h30m"
            ))),
        }
    }
}

const SIGNALS: &[&str] = &[
    "SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGQUIT",
];

/// A signal a job can catch to checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signal(pub String);

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Text(s) = Text::deserialize(d)?;
        let up = s.to_ascii_uppercase();
        let name = if up.starts_with("SIG") {
            up
        } else {
            format!("SIG{up}")
        };
        if SIGNALS.contains(&name.as_str()) {
            Ok(Signal(name))
        } else {
            Err(D::Error::custom(format!(
                "unknown signal `{s}`; allowed: {}",
                SIGNALS.join(", ")
            )))
        }
    }
}

/// How a job checkpoints: where, how often, and how it is told to stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    #[serde(default, deserialize_with = "opt_text")]
    pub dir: Option<String>,
    #[serde(
        default,
        rename(deserialize = "interval"),
        deserialize_with = "opt_duration"
    )]
    pub interval_s: Option<f64>,
    #[serde(default = "default_signal")]
    pub signal: Signal,
    #[serde(
        default = "default_grace",
        rename(deserialize = "grace"),
        deserialize_with = "duration"
    )]
    pub grace_s: f64,
}

fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Some(Text::deserialize(d)?.0))
}
fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(Some(Duration::deserialize(d)?.0))
}
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Duration::deserialize(d)?.0)
}
fn default_signal() -> Signal {
    Signal("SIGTERM".to_string())
}
fn default_grace() -> f64 {
    30.0
}

/// GPUs per node for one accelerator: whole GPUs, or a fraction of one (milli-GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuCount {
    Whole(u8),
    Fraction(u16),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accelerator {
    pub model: String,
    pub count: GpuCount,
}

/// SkyPilot's `accelerators`: `"H100:8"`, `"H100"` (one), `"L4:0.5"`, a mapping of
/// alternatives `{H100: 8, A100-80GB: 8}` (any of them), or a list (in order of preference).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accelerators {
    pub options: Vec<Accelerator>,
    pub ordered: bool,
}

fn count_of(model: &str, v: Option<&Value>) -> Result<GpuCount, String> {
    let Some(v) = v else {
        return Ok(GpuCount::Whole(1));
    };
    let text = scalar_text(v).ok_or_else(|| {
        format!(
            "`{model}`: expected a count like 8 or 0.5, found {}",
            kind(v)
        )
    })?;
    let n: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{model}:{text}`: `{text}` is not a GPU count"))?;
    if !n.is_finite() || n <= 0.0 {
        return Err(format!(
            "`{model}:{text}` asks for no GPU; leave `accelerators` out for CPU-only work"
        ));
    }
    if n < 1.0 {
        let milli = (n * 1000.0).round();
        if milli < 1.0 {
            return Err(format!("`{model}:{text}` is below 0.001 GPU"));
        }
        return Ok(GpuCount::Fraction(milli as u16));
    }
    if n.fract() != 0.0 || n > 64.0 {
        return Err(format!(
            "`{model}:{text}`: whole GPUs per node must be 1..=64 (fractions only below 1)"
        ));
    }
    Ok(GpuCount::Whole(n as u8))
}

fn parse_one(text: &str) -> Result<Accelerator, String> {
    let (model, count) = match text.split_once(':') {
        Some((m, c)) => (m.trim(), Some(Value::String(c.trim().to_string()))),
        None => (text.trim(), None),
    };
    if model.is_empty() || model.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("`{text}` is not an accelerator like H100:8"));
    }
    Ok(Accelerator {
        model: model.to_string(),
        count: count_of(model, count.as_ref())?,
    })
}

impl<'de> Deserialize<'de> for Accelerators {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let options = match &v {
            Value::String(s) => vec![parse_one(s).map_err(D::Error::custom)?],
            Value::Mapping(m) => m
                .iter()
                .map(|(k, c)| {
                    let model = scalar_text(k)
                        .ok_or_else(|| "accelerator names must be strings".to_string())?;
                    // `{H100:8, H200:8}` (no space after the colon) is YAML for keys
                    // "H100:8" with no value, as SkyPilot's loader reads it too: the count is
                    // in the key.
                    let one = parse_one(&model)?;
                    match (model.contains(':'), c.is_null()) {
                        (_, true) => Ok(one),
                        (false, false) => Ok(Accelerator {
                            count: count_of(&one.model, Some(c))?,
                            model: one.model,
                        }),
                        (true, false) => Err(format!(
                            "`{model}: {}`: give the count once, in the key (`{model}`) or as its value (`{}: N`)",
                            scalar_text(c).unwrap_or_default(),
                            one.model
                        )),
                    }
                })
                .collect::<Result<Vec<_>, String>>()
                .map_err(D::Error::custom)?,
            Value::Sequence(items) => items
                .iter()
                .map(|i| {
                    scalar_text(i)
                        .ok_or_else(|| {
                            format!("expected entries like \"H100:8\", found {}", kind(i))
                        })
                        .and_then(|s| parse_one(&s))
                })
                .collect::<Result<Vec<_>, String>>()
                .map_err(D::Error::custom)?,
            other => {
                return Err(D::Error::custom(format!(
                    "expected \"H100:8\", a mapping or a list, found {}",
                    kind(other)
                )))
            }
        };
        if options.is_empty() {
            return Err(D::Error::custom("names no accelerator"));
        }
        Ok(Accelerators {
            options,
            ordered: matches!(v, Value::Sequence(_)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s"), Some(90.0));
        assert_eq!(parse_duration("1h30m"), Some(5400.0));
        assert_eq!(parse_duration("2d"), Some(172_800.0));
        assert_eq!(parse_duration("45"), Some(45.0));
        assert_eq!(parse_duration("h"), None);
        // The forms people write that the hand-written parser refused (humantime's).
        assert_eq!(parse_duration("500ms"), Some(0.5));
        assert_eq!(parse_duration("90min"), Some(5400.0));
        assert_eq!(parse_duration("1h 30m"), Some(5400.0));
        assert_eq!(parse_duration("3 weeks"), Some(3.0 * 7.0 * 86_400.0));
        assert_eq!(parse_duration("1.5h"), Some(5400.0));
        assert_eq!(parse_duration("3 parsecs"), None);
        assert_eq!(parse_duration("-5"), None);
        assert_eq!(parse_duration("1.5x"), None);
    }

    #[test]
    fn accelerator_forms() {
        assert_eq!(
            parse_one("H100:8").unwrap(),
            Accelerator {
                model: "H100".into(),
                count: GpuCount::Whole(8)
            }
        );
        assert_eq!(parse_one("L4:0.5").unwrap().count, GpuCount::Fraction(500));
        assert_eq!(parse_one("A100-80GB").unwrap().count, GpuCount::Whole(1));
        assert!(parse_one("H100:0").unwrap_err().contains("no GPU"));
        assert!(parse_one("H100:1.5").unwrap_err().contains("1..=64"));
        assert!(parse_one("H100:eight").is_err());
    }

    /// Memory in every unit SkyPilot's loader reads (`parse_memory_resource`: KB, Ki, MB, Mi,
    /// GB, Gi, TB, Ti, PB, Pi, any case), binary whatever the spelling. Before: `1Ti` and `16Gi`
    /// were refused although SkyPilot loads them.
    #[test]
    fn memory_reads_skypilots_units() {
        let gb = |s: &str| serde_yaml_ng::from_str::<MemoryGb>(s).map(|m| f64::from(m.0) / 1000.0);
        for (text, want) in [
            ("32", 32.0),
            ("\"32+\"", 32.0),
            ("1Ti", 1024.0),
            ("1TB", 1024.0),
            ("16Gi", 16.0),
            ("16gb", 16.0),
            ("512Mi", 0.5),
            ("\"512MB+\"", 0.5),
            ("1048576Ki", 1.0),
            ("0.5Pi", 524_288.0),
        ] {
            assert_eq!(gb(text).unwrap(), want, "{text}");
        }
        let e = gb("16 furlongs").unwrap_err().to_string();
        assert!(e.contains("is not memory like"), "{e}");
    }
}
