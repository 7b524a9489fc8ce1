//! The cloud price catalogs gantry carries: what each instance type of the clouds it buys
//! from holds (GPU model and count) and costs, per region (and, for AWS, per availability zone
//! by its zone id). They are copies of SkyPilot's public catalog (`skypilot-org/skypilot-catalog`,
//! `v8/aws/vms.csv` — the GPU types gantry's docs name — and `v8/lambda/vms.csv`, November 2026),
//! read by header name. They let a cloud pool name its GPUs and have gantry choose the type
//! (`instance_type = "auto"`: the cheapest that holds them in the pool's region), and refuse a
//! pool whose declared GPUs are not what its instance type holds.

use std::sync::OnceLock;

const AWS: &str = include_str!("aws.csv");
const LAMBDA: &str = include_str!("lambda.csv");

/// One row: an instance type in a region (and zone), with its GPUs and prices.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    pub instance_type: String,
    /// As the catalog names it (`A100`, `A100-80GB`, `H100`).
    pub gpu: String,
    pub gpus: u8,
    pub vcpus: f64,
    pub memory_gib: f64,
    /// On-demand, US dollars an hour for the whole instance.
    pub price: Option<f64>,
    pub spot_price: Option<f64>,
    pub region: String,
    /// AWS's zone id (`use1-az4`, the same zone in every account; names differ per account).
    pub zone_id: Option<String>,
}

/// The clouds with a catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloud {
    Aws,
    Lambda,
}

impl Cloud {
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS",
            Cloud::Lambda => "Lambda Cloud",
        }
    }
}

/// Reads a catalog by header name; rows without a GPU, or that do not parse, are left out.
fn read(text: &str) -> Vec<Offer> {
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let Ok(headers) = r.headers().cloned() else {
        return Vec::new();
    };
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let (ty, acc, count, vcpus, mem, price, spot, region, zone) = (
        col("InstanceType"),
        col("AcceleratorName"),
        col("AcceleratorCount"),
        col("vCPUs"),
        col("MemoryGiB"),
        col("Price"),
        col("SpotPrice"),
        col("Region"),
        col("AvailabilityZone"),
    );
    let mut out = Vec::new();
    for rec in r.records().flatten() {
        let get = |c: Option<usize>| c.and_then(|i| rec.get(i)).map(str::trim).unwrap_or("");
        let num = |c: Option<usize>| get(c).parse::<f64>().ok().filter(|v| v.is_finite());
        let gpu = get(acc);
        let gpus = num(count).unwrap_or(0.0);
        if gpu.is_empty() || !(1.0..=64.0).contains(&gpus) || get(ty).is_empty() {
            continue;
        }
        out.push(Offer {
            instance_type: get(ty).to_string(),
            gpu: gpu.to_string(),
            gpus: gpus as u8,
            vcpus: num(vcpus).unwrap_or(0.0),
            memory_gib: num(mem).unwrap_or(0.0),
            price: num(price).filter(|p| *p > 0.0),
            spot_price: num(spot).filter(|p| *p > 0.0),
            region: get(region).to_string(),
            zone_id: Some(get(zone).to_string()).filter(|z| !z.is_empty()),
        });
    }
    out
}

/// The catalog of `cloud`.
pub fn offers(cloud: Cloud) -> &'static [Offer] {
    static AWS_OFFERS: OnceLock<Vec<Offer>> = OnceLock::new();
    static LAMBDA_OFFERS: OnceLock<Vec<Offer>> = OnceLock::new();
    match cloud {
        Cloud::Aws => AWS_OFFERS.get_or_init(|| read(AWS)),
        Cloud::Lambda => LAMBDA_OFFERS.get_or_init(|| read(LAMBDA)),
    }
}

/// What `instance_type` holds, by the catalog (any region): (GPU model, count).
pub fn holds(cloud: Cloud, instance_type: &str) -> Option<(&'static str, u8)> {
    offers(cloud)
        .iter()
        .find(|o| o.instance_type == instance_type)
        .map(|o| (o.gpu.as_str(), o.gpus))
}

/// The cheapest instance type with `gpus` × `gpu` in `region` (spot prices for a spot pool;
/// where no zone has a spot price, none is chosen): the type and its price.
pub fn cheapest(
    cloud: Cloud,
    gpu: &str,
    gpus: u8,
    region: &str,
    spot: bool,
) -> Option<(&'static Offer, f64)> {
    offers(cloud)
        .iter()
        .filter(|o| o.region == region && o.gpus == gpus && o.gpu.eq_ignore_ascii_case(gpu))
        .filter_map(|o| {
            let p = if spot { o.spot_price } else { o.price };
            p.map(|p| (o, p))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// `instance_type`'s price in each zone of `region` (by zone id) where the catalog has one,
/// cheapest first: the spot price for `spot`, else on-demand.
pub fn zone_prices(
    cloud: Cloud,
    instance_type: &str,
    region: &str,
    spot: bool,
) -> Vec<(&'static str, f64)> {
    let mut z: Vec<(&str, f64)> = offers(cloud)
        .iter()
        .filter(|o| o.instance_type == instance_type && o.region == region)
        .filter_map(|o| {
            let p = if spot { o.spot_price } else { o.price };
            Some((o.zone_id.as_deref()?, p?))
        })
        .collect();
    z.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
    z
}

/// The types that hold `gpu` at all, with their counts: what to write instead.
pub fn types_with(cloud: Cloud, gpu: &str) -> Vec<String> {
    let mut t: Vec<String> = offers(cloud)
        .iter()
        .filter(|o| o.gpu.eq_ignore_ascii_case(gpu))
        .map(|o| format!("{} ({}× {})", o.instance_type, o.gpus, o.gpu))
        .collect();
    t.sort();
    t.dedup();
    t
}

/// The regions where `instance_type` is offered.
pub fn regions_of(cloud: Cloud, instance_type: &str) -> Vec<String> {
    let mut r: Vec<String> = offers(cloud)
        .iter()
        .filter(|o| o.instance_type == instance_type)
        .map(|o| o.region.clone())
        .collect();
    r.sort();
    r.dedup();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogs_read_by_header_with_their_quirks() {
        let aws = offers(Cloud::Aws);
        assert!(aws.len() > 200, "{}", aws.len());
        assert_eq!(holds(Cloud::Aws, "p4d.24xlarge"), Some(("A100", 8)));
        assert_eq!(holds(Cloud::Aws, "p4de.24xlarge"), Some(("A100-80GB", 8)));
        assert_eq!(holds(Cloud::Aws, "p5.48xlarge"), Some(("H100", 8)));
        // Per zone id; p5e has no on-demand price in the catalog.
        assert!(aws.iter().all(|o| o.zone_id.is_some()));
        assert!(aws
            .iter()
            .filter(|o| o.instance_type == "p5e.48xlarge")
            .all(|o| o.price.is_none()));
        let lambda = offers(Cloud::Lambda);
        assert_eq!(holds(Cloud::Lambda, "gpu_8x_h100_sxm5"), Some(("H100", 8)));
        assert!(lambda.iter().all(|o| o.zone_id.is_none()));
        // CPU rows are not offers of GPUs.
        assert_eq!(holds(Cloud::Lambda, "cpu_4x_general"), None);
    }

    #[test]
    fn the_cheapest_type_that_holds_the_gpus_is_chosen() {
        let (o, p) = cheapest(Cloud::Aws, "A100-80GB", 8, "us-east-1", false).unwrap();
        assert_eq!(o.instance_type, "p4de.24xlarge");
        assert!(p > 10.0, "{p}");
        let (o, _) = cheapest(Cloud::Lambda, "h100", 8, "us-east-1", false).unwrap();
        assert_eq!(o.instance_type, "gpu_8x_h100_sxm5");
        assert!(cheapest(Cloud::Aws, "H100", 3, "us-east-1", false).is_none());
        assert_eq!(
            zone_prices(Cloud::Aws, "p4de.24xlarge", "us-east-1", true),
            [("use1-az6", 9.7262), ("use1-az4", 11.4593)]
        );
        assert!(types_with(Cloud::Aws, "H100")
            .iter()
            .any(|t| t == "p5.48xlarge (8× H100)"));
    }
}
