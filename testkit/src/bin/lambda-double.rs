//! Lambda Cloud's API on this machine, for trying a Lambda pool before having an account
//! (docs/clouds.md, "Try a Lambda pool with no account"). It offers every instance type of the
//! catalog gantry carries (SkyPilot's `lambda/vms.csv`), at its price, in each region the
//! catalog lists, and says every launch and termination. Its instances are records: nothing
//! is bought, nothing boots; the pool reaches them through an ssh_config of the user's.
//!
//! `lambda-double [--port 8765] [--capacity 4]`

use gantry_testkit::lambda::{LambdaDouble, KEY};
use std::collections::BTreeSet;
use std::time::Duration;

fn flag(args: &[String], name: &str, default: u32) -> Result<u32, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} wants a number, as in `{name} {default}`")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let known = ["--port", "--capacity"];
    if let Some(bad) = args
        .iter()
        .step_by(2)
        .find(|a| !known.contains(&a.as_str()))
    {
        eprintln!("lambda-double: unknown argument `{bad}`; usage: lambda-double [--port 8765] [--capacity 4]");
        std::process::exit(2);
    }
    let (port, capacity) = match (flag(&args, "--port", 8765), flag(&args, "--capacity", 4)) {
        (Ok(p), Ok(c)) => (p, c),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("lambda-double: {e}");
            std::process::exit(2);
        }
    };
    let (api, types) = match LambdaDouble::of_catalog(&format!("127.0.0.1:{port}"), capacity) {
        Ok(double) => double,
        Err(e) => {
            eprintln!(
                "lambda-double: cannot listen on 127.0.0.1:{port}: {e}; pick another with --port"
            );
            std::process::exit(1);
        }
    };
    println!("Lambda Cloud API double (nothing is bought, nothing boots)");
    println!("  endpoint_url = \"{}\"", api.url());
    println!("  LAMBDA_API_KEY={KEY}");
    println!(
        "  {} instance types from the catalog, {capacity} of each in every region it lists",
        types
    );
    let mut said = BTreeSet::new();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        for i in api.made() {
            if said.insert((i.id.clone(), false)) {
                println!(
                    "launched {} `{}` ({} in {})",
                    i.id, i.name, i.instance_type, i.region
                );
            }
            if i.ended.is_some() && said.insert((i.id.clone(), true)) {
                println!("terminated {} `{}`", i.id, i.name);
            }
        }
    }
}
