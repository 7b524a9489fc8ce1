//! Label and field selectors, as the API server reads them, on lists and watches.

use super::Kind;
use serde_json::Value;

/// What a list or watch asks for.
pub(super) struct Filter {
    pub(super) kind: Kind,
    pub(super) namespace: Option<String>,
    pub(super) labels: Vec<LabelReq>,
    pub(super) fields: Vec<(String, bool, String)>,
}

impl Filter {
    pub(super) fn matches(&self, v: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if v["metadata"]["namespace"].as_str() != Some(ns) {
                return false;
            }
        }
        let labels = v["metadata"]["labels"].as_object();
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.labels.iter().all(|r| r.holds(label(&r.key)))
            && self.fields.iter().all(|(path, eq, want)| {
                let got = match path.as_str() {
                    "metadata.name" => v["metadata"]["name"].as_str(),
                    "metadata.namespace" => v["metadata"]["namespace"].as_str(),
                    "spec.nodeName" => v["spec"]["nodeName"].as_str(),
                    "status.phase" => v["status"]["phase"].as_str(),
                    "spec.unschedulable" => Some(if v["spec"]["unschedulable"] == true {
                        "true"
                    } else {
                        "false"
                    }),
                    _ => None,
                }
                .unwrap_or("");
                (got == want) == *eq
            })
    }
}

pub(super) enum LabelOp {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    Absent,
}

pub(super) struct LabelReq {
    key: String,
    op: LabelOp,
}

impl LabelReq {
    fn holds(&self, got: Option<&str>) -> bool {
        match &self.op {
            LabelOp::Eq(v) => got == Some(v),
            LabelOp::Ne(v) => got != Some(v),
            LabelOp::In(vs) => got.is_some_and(|g| vs.iter().any(|v| v == g)),
            LabelOp::NotIn(vs) => !got.is_some_and(|g| vs.iter().any(|v| v == g)),
            LabelOp::Exists => got.is_some(),
            LabelOp::Absent => got.is_none(),
        }
    }
}

/// `a=b,c!=d,e in (x,y),!f` → requirements (commas inside parentheses kept).
pub(super) fn label_selector(text: &str) -> Result<Vec<LabelReq>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    let set = |s: &str| -> Vec<String> {
        s.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().to_string())
            .collect()
    };
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let req = |key: &str, op| LabelReq {
                key: key.trim().to_string(),
                op,
            };
            Ok(if let Some((k, v)) = p.split_once(" notin ") {
                req(k, LabelOp::NotIn(set(v)))
            } else if let Some((k, v)) = p.split_once(" in ") {
                req(k, LabelOp::In(set(v)))
            } else if let Some((k, v)) = p.split_once("!=") {
                req(k, LabelOp::Ne(v.trim().to_string()))
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                req(k, LabelOp::Eq(v.trim().to_string()))
            } else if let Some(k) = p.strip_prefix('!') {
                req(k, LabelOp::Absent)
            } else if p.contains(|c: char| c.is_whitespace() || c == '(') {
                return Err(format!("unable to parse requirement: {p:?}"));
            } else {
                req(&p, LabelOp::Exists)
            })
        })
        .collect()
}

pub(super) fn field_selector(text: &str) -> Result<Vec<(String, bool, String)>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, eq, v) = if let Some((k, v)) = p.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (k, true, v)
            } else {
                return Err(format!("invalid selector: {p:?}; can't understand {p:?}"));
            };
            let k = k.trim();
            if ![
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "status.phase",
                "spec.unschedulable",
            ]
            .contains(&k)
            {
                return Err(format!("field label not supported: {k}"));
            }
            Ok((k.to_string(), eq, v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_read_as_the_api_server_reads_them() {
        let v = json!({"metadata": {"name": "n1", "labels": {"a": "1", "zone": "z1"}}, "spec": {"nodeName": "x"}});
        let f = |l: &str, fs: &str| {
            Filter {
                kind: Kind::Node,
                namespace: None,
                labels: label_selector(l).unwrap(),
                fields: field_selector(fs).unwrap(),
            }
            .matches(&v)
        };
        assert!(f("a=1", ""));
        assert!(f("a==1,zone in (z1, z2)", "metadata.name=n1"));
        assert!(!f("a!=1", ""));
        assert!(f("!b,a", "spec.nodeName!=y"));
        assert!(!f("zone notin (z1)", ""));
        assert!(!f("", "spec.nodeName="));
        assert!(field_selector("spec.bogus=1").is_err());
    }
}
