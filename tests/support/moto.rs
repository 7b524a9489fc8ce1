//! A real EC2 API for the cloud tests: `moto_server` (moto, from PyPI; `.ci/run` installs it)
//! on a 127.0.0.1 port of its own, and in front of it a small proxy that injects what moto
//! cannot do — refuse capacity in a zone, answer slowly — so failover and a daemon killed
//! mid-launch are tested against the real SDK. What EC2 holds is read back with the SDK itself,
//! not through gantry. moto's instances get made-up public IPs: nothing here connects to one
//! (the pools reach their instances by node name, through an ssh_config that maps each name to
//! a local sshd).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `moto_server` from PATH, if installed.
pub fn moto_bin() -> Option<String> {
    let ok = Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| "moto_server".to_string())
}

impl Moto {
    pub fn start(port: u16) -> Moto {
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "moto_server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Moto { child, port }
    }
}

/// What the proxy does with a request (its form body: `Action=RunInstances&…`).
#[derive(Clone)]
pub enum Fault {
    /// Answers an EC2 error (`code`) instead of moto.
    Refuse { code: String, message: String },
    /// Holds the request this long before moto gets it.
    Delay(Duration),
    /// Answers this JSON (200) instead of moto: what AWS serves and moto does not.
    Json(String),
}

/// A rule: requests whose body contains every one of `when` get `fault`.
#[derive(Clone)]
pub struct Rule {
    pub when: Vec<String>,
    pub fault: Fault,
}

/// The fault-injecting proxy: its rules can change while it runs; it counts requests by
/// action.
#[derive(Clone, Default)]
pub struct Faults {
    pub rules: Arc<Mutex<Vec<Rule>>>,
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl Faults {
    pub fn set(&self, rules: Vec<Rule>) {
        *self.rules.lock().unwrap() = rules;
    }

    /// Requests seen whose body contains `what`.
    pub fn count(&self, what: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.contains(what))
            .count()
    }
}

/// Starts the proxy on a free port in front of moto at `upstream`; its port.
pub fn proxy(upstream: u16, faults: Faults) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let faults = faults.clone();
            std::thread::spawn(move || serve(c, upstream, &faults));
        }
    });
    port
}

/// One client connection: each request read whole, answered from moto (on a connection of its
/// own) or from the rules.
fn serve(mut c: TcpStream, upstream: u16, faults: &Faults) {
    loop {
        let Some((head, body)) = read_request(&mut c) else {
            return;
        };
        let text = decode(&body);
        faults.seen.lock().unwrap().push(text.clone());
        let rule = faults
            .rules
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.when.iter().all(|w| text.contains(w.as_str())))
            .cloned();
        let answer = match rule.map(|r| r.fault) {
            Some(Fault::Refuse { code, message }) => {
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>gantry-test</RequestID></Response>"
                );
                format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{xml}",
                    xml.len()
                )
                .into_bytes()
            }
            Some(Fault::Delay(d)) => {
                std::thread::sleep(d);
                forward(upstream, &head, &body)
            }
            Some(Fault::Json(json)) => format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )
            .into_bytes(),
            None => forward(upstream, &head, &body),
        };
        if c.write_all(&answer).is_err() {
            return;
        }
    }
}

/// The form body decoded, `key=value` pairs joined by `&`, for the rules to match (a JSON
/// body — the Service Quotas API's — as it is).
fn decode(body: &[u8]) -> String {
    if body.first() == Some(&b'{') {
        return String::from_utf8_lossy(body).into_owned();
    }
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn read_request(c: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if c.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// The request to moto as it came, on a connection that closes after the answer; the answer
/// with the connection kept for the client.
fn forward(upstream: u16, head: &str, body: &[u8]) -> Vec<u8> {
    let Ok(mut u) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n".to_vec();
    };
    let head: String = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect::<Vec<_>>()
        .join("\r\n");
    let head = head.trim_end_matches("\r\n").to_string() + "\r\nConnection: close\r\n\r\n";
    let _ = u.write_all(head.as_bytes());
    let _ = u.write_all(body);
    let mut out = Vec::new();
    let _ = u.read_to_end(&mut out);
    // Keep-alive for the client: drop moto's `Connection: close`.
    let text = String::from_utf8_lossy(&out);
    match text.find("\r\n\r\n") {
        Some(end) => {
            let head: Vec<&str> = text[..end]
                .split("\r\n")
                .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                .collect();
            let mut v = (head.join("\r\n") + "\r\n\r\n").into_bytes();
            v.extend_from_slice(&out[end + 4..]);
            v
        }
        None => out,
    }
}

/// An instance as EC2 (moto) holds it.
#[derive(Clone, Debug)]
pub struct Held {
    pub id: String,
    pub state: String,
    pub zone: String,
    pub tags: Vec<(String, String)>,
}

impl Held {
    pub fn tag(&self, k: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    pub fn live(&self) -> bool {
        matches!(self.state.as_str(), "pending" | "running")
    }
}

/// Terminates instance `id` behind gantry's back (as a spot reclaim, or an operator, would).
pub fn terminate(port: u16, region: &str, id: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        client(port, region)
            .terminate_instances()
            .instance_ids(id)
            .send()
            .await
            .expect("TerminateInstances");
    });
}

/// Makes a security group in moto's default VPC, admitting tcp `ports` from anywhere; its id.
pub fn security_group(port: u16, region: &str, name: &str, ports: &[i32]) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = client(port, region);
        let id = c
            .create_security_group()
            .group_name(name)
            .description("gantry test")
            .send()
            .await
            .expect("CreateSecurityGroup")
            .group_id()
            .unwrap()
            .to_string();
        for p in ports {
            c.authorize_security_group_ingress()
                .group_id(&id)
                .ip_protocol("tcp")
                .from_port(*p)
                .to_port(*p)
                .cidr_ip("0.0.0.0/0")
                .send()
                .await
                .expect("AuthorizeSecurityGroupIngress");
        }
        id
    })
}

fn client(port: u16, region: &str) -> aws_sdk_ec2::Client {
    let creds = aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "test");
    let conf = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new(region.to_string()))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(creds)
        .http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                    aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                ))
                .build_https(),
        )
        .build();
    aws_sdk_ec2::Client::from_conf(conf)
}

/// Every instance in `region` at moto's `port`, read with the SDK (static test credentials).
pub fn instances(port: u16, region: &str) -> Vec<Held> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = client(port, region);
        let out = c
            .describe_instances()
            .send()
            .await
            .expect("DescribeInstances");
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| Held {
                id: i.instance_id().unwrap_or_default().to_string(),
                state: i
                    .state()
                    .and_then(|s| s.name())
                    .map_or("?", |n| n.as_str())
                    .to_string(),
                zone: i
                    .placement()
                    .and_then(|p| p.availability_zone())
                    .unwrap_or_default()
                    .to_string(),
                tags: i
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
            })
            .collect()
    })
}
