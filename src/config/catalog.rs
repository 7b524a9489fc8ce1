//! The cloud price catalogs (`gantry_core::catalog`, pure data) applied to the fleet file's
//! cloud pools.

pub use gantry_core::catalog::*;

/// A pool that buys its nodes, checked against its cloud's catalog: `instance_type = "auto"`
/// becomes the cheapest type holding the pool's GPUs in its region; a type the catalog knows
/// must hold what the pool declares (a pool that says 2× A100-80GB on a p4d would have jobs
/// placed on GPUs that are not there). A type the catalog does not know is taken as declared.
pub fn resolve(p: &mut crate::config::fleet::PoolConfig) -> Result<(), String> {
    let cloud = if p.is_ec2() {
        Cloud::Aws
    } else if p.is_lambda() {
        Cloud::Lambda
    } else {
        return Ok(());
    };
    let name = format!("pool `{}`", p.name);
    let gpu = p.gpu.clone().unwrap_or_default();
    let spot = p.capacity == crate::model::CapacityType::Spot;
    if p.instance_type == AUTO {
        if gpu.is_empty() || p.gpus_per_node == 0 {
            return Err(format!(
                "{name}: instance_type = \"auto\" chooses by the GPUs the pool declares: give gpu and gpus_per_node"
            ));
        }
        return match cheapest(cloud, &gpu, p.gpus_per_node, &p.region, spot) {
            Some((o, _)) => {
                p.instance_type = o.instance_type.clone();
                Ok(())
            }
            None => {
                let types = types_with(cloud, &gpu);
                Err(format!(
                    "{name}: no {} instance type with {}× {gpu} in {}{} in gantry's catalog ({}); name the type with instance_type",
                    cloud.name(),
                    p.gpus_per_node,
                    p.region,
                    if spot { " at a spot price" } else { "" },
                    if types.is_empty() {
                        format!("it has no {gpu} at all")
                    } else {
                        format!("types with {gpu}: {}", types.join(", "))
                    }
                ))
            }
        };
    }
    match holds(cloud, &p.instance_type) {
        Some((g, n)) if !g.eq_ignore_ascii_case(&gpu) || n != p.gpus_per_node => Err(format!(
            "{name}: instance_type = \"{}\" holds {n}× {g} ({}'s catalog), but the pool says {}× {}: write gpu = \"{g}\" and gpus_per_node = {n}, or instance_type = \"auto\" for the cheapest type holding what you wrote",
            p.instance_type,
            cloud.name(),
            p.gpus_per_node,
            if gpu.is_empty() { "no GPU" } else { gpu.as_str() },
        )),
        _ => Ok(()),
    }
}

/// `instance_type = "auto"`.
pub const AUTO: &str = "auto";

#[cfg(test)]
mod pool_tests {
    use crate::config::fleet::parse;

    fn pool(instance_type: &str, gpu: &str, gpus: u8, capacity: &str) -> String {
        format!(
            "[[pools]]\nname = \"p\"\nprovider = \"aws\"\nbackend = \"ec2\"\nregion = \"us-east-1\"\nzone = \"us-east-1a\"\ninstance_type = \"{instance_type}\"\ngpu = \"{gpu}\"\ngpus_per_node = {gpus}\nvram_gb = 80\ncpus = 96\nmemory_gb = 1152\ncapacity = \"{capacity}\"\nprice_per_hour = 30.0\nnodes = 0\nmax_nodes = 2\n\n[pools.ec2]\nimage = \"ami-0123456789abcdef0\"\n"
        )
    }

    #[test]
    fn a_cloud_pool_names_its_gpus_and_the_catalog_checks_or_chooses_the_type() {
        let auto = parse("f.toml", &pool("auto", "H100", 8, "on-demand")).unwrap();
        assert_eq!(auto.pools[0].instance_type, "p5.48xlarge");
        let wrong =
            parse("f.toml", &pool("p4d.24xlarge", "A100-80GB", 2, "on-demand")).unwrap_err();
        assert_eq!((wrong.line, wrong.col), (1, 1), "{wrong}");
        assert!(
            wrong.message.contains("instance_type = \"p4d.24xlarge\" holds 8× A100 (AWS's catalog), but the pool says 2× A100-80GB: write gpu = \"A100\" and gpus_per_node = 8"),
            "{wrong}"
        );
        let none = parse("f.toml", &pool("auto", "H100", 3, "on-demand")).unwrap_err();
        assert!(
            none.message
                .contains("no AWS instance type with 3× H100 in us-east-1")
                && none.message.contains("p5.48xlarge (8× H100)"),
            "{none}"
        );
        // A type the catalog does not know is taken as declared.
        assert!(parse("f.toml", &pool("p9.future", "H100", 8, "on-demand")).is_ok());
    }
}
