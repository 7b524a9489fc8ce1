//! `gantry slurm`: a Slurm cluster through slurmrestd, as an on-call SRE wants it on one
//! screen — GPUs per node and who holds them, and why each pending job waits.

use super::{print_as, Output};
use gantry::backend::slurm::gres;
use gantry::backend::slurm::inventory::Inventory;
use gantry::backend::slurm::rest::SlurmRest;

pub fn show(url: &str, user: Option<String>, fleet: bool, output: Output) -> Result<(), String> {
    // Who slurmrestd reads as: the user named, else the token's own (what it was made for),
    // else this one.
    let token = gantry::backend::slurm::token::Token::of(None);
    let user = user
        .or_else(|| token.as_ref().and_then(|t| t.user()))
        .or_else(|| std::env::var("USER").ok());
    let named = user.clone().filter(|_| token.is_some());
    if token.is_none() && !url.starts_with("unix:") {
        return Err(format!(
            "slurmrestd {url}: no token: set SLURM_JWT (`export $(scontrol token username=USER)`) — or use its Unix socket (unix:/PATH), where Slurm's local auth needs none"
        ));
    }
    let mut rest = SlurmRest::connect(url, user, token)?;
    let inv = rest.inventory()?;
    if fleet {
        let pools = gantry::backend::slurm::pools::pools(&inv);
        if output.is_data() {
            return print_as(output, &pools);
        }
        if pools.is_empty() {
            return Err(format!(
                "slurmrestd {url}: no node of the cluster has GPUs in its GRES (gres = gpu:TYPE:N), so there is no pool to print"
            ));
        }
        print!(
            "{}",
            gantry::backend::slurm::pools::to_toml(&inv, &pools, url, named.as_deref())
        );
        return Ok(());
    }
    if output.is_data() {
        return print_as(output, &inv);
    }
    print_table(&inv);
    Ok(())
}

fn print_table(inv: &Inventory) {
    println!(
        "Slurm {} through slurmrestd {} · {} partition(s), {} node(s), {} job(s)",
        inv.slurm.as_deref().unwrap_or("?"),
        inv.api,
        inv.partitions.len(),
        inv.nodes.len(),
        inv.jobs.len()
    );
    println!(
        "\n{:<20} {:<16} {:<18} {:>9}  {:>5}  REASON",
        "NODE", "PARTITIONS", "STATE", "GPUS USED", "CPUS"
    );
    for n in &inv.nodes {
        let (total, used) = (gres::count(&n.gpus), gres::count(&n.gpus_used));
        let models: Vec<&str> = n.gpus.iter().filter_map(|g| g.model.as_deref()).collect();
        println!(
            "{:<20} {:<16} {:<18} {:>9}  {:>5}  {}",
            n.name,
            n.partitions.join(","),
            n.state,
            format!(
                "{used}/{total}{}",
                if models.is_empty() {
                    String::new()
                } else {
                    format!(" {}", models.join("+"))
                }
            ),
            n.cpus,
            n.reason
        );
    }
    println!(
        "\n{:>8} {:<16} {:<10} {:<10} {:<10} {:>4} {:<14} WHY",
        "JOB", "NAME", "USER", "PARTITION", "STATE", "GPUS", "NODES"
    );
    for j in inv.jobs.iter().filter(|j| j.pending() || j.running()) {
        println!(
            "{:>8} {:<16} {:<10} {:<10} {:<10} {:>4} {:<14} {}",
            j.id, j.name, j.user, j.partition, j.state, j.gpus_per_node, j.nodes, j.reason
        );
    }
}
