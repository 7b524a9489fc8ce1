//! A GPU as a cluster names it — a Slurm GRES type chosen by the site (`a100`, `a100_80g`,
//! `h100`), GPU Feature Discovery's product label (`NVIDIA-H100-80GB-HBM3`) — to gantry's
//! model name and memory per GPU, for the fleet files `gantry slurm --fleet` and `gantry
//! kube --fleet` write. NVML's device names (`from_nvml`) too.

/// gantry's model name and memory per GPU (GB) for `t`, and what to check where the name
/// does not settle it (0 GB: unknown).
pub fn model_of(t: &str) -> (String, u32, Option<String>) {
    let l = t.to_ascii_lowercase();
    let has = |s: &str| l.contains(s);
    let (name, vram, check) = match () {
        _ if has("a100") && has("80") => ("A100-80GB", 80, None),
        _ if has("a100") => ("A100", 40, Some("A100s come with 40 or 80 GB")),
        _ if has("h100") => ("H100", 80, None),
        _ if has("gh200") => ("GH200", 96, None),
        _ if has("h200") => ("H200", 141, None),
        _ if has("b200") => ("B200", 180, None),
        _ if has("l40s") => ("L40S", 48, None),
        _ if has("l40") => ("L40", 48, None),
        _ if has("l4") => ("L4", 24, None),
        _ if has("a10g") => ("A10G", 24, None),
        _ if has("a10") => ("A10", 24, None),
        _ if has("a40") => ("A40", 48, None),
        _ if has("a6000") => ("RTXA6000", 48, None),
        _ if has("v100") && has("32") => ("V100-32GB", 32, None),
        _ if has("v100") => ("V100", 16, Some("V100s come with 16 or 32 GB")),
        _ if has("t4") => ("T4", 16, None),
        _ if has("mi300") => ("MI300X", 192, None),
        _ if has("mi250") => ("MI250X", 128, None),
        _ => {
            return (
                t.to_ascii_uppercase(),
                0,
                Some(format!(
                    "gantry does not know the memory of a `{t}`: set vram_gb"
                )),
            )
        }
    };
    (name.into(), vram, check.map(str::to_string))
}

/// The model name gantry's catalog uses for an NVML device name
/// ("NVIDIA H100 80GB HBM3" → "H100"); unknown boards keep their name without the vendor.
pub fn from_nvml(nvml_name: &str) -> String {
    let name = nvml_name.trim().trim_start_matches("NVIDIA").trim();
    let upper = name.to_ascii_uppercase();
    for (pattern, model) in [
        ("GH200", "GH200"),
        ("H200", "H200"),
        ("H100", "H100"),
        ("B200", "B200"),
        ("A100-SXM4-80GB", "A100-80GB"),
        ("A100 80GB", "A100-80GB"),
        ("A100-PCIE-80GB", "A100-80GB"),
        ("A100", "A100"),
        ("L40S", "L40S"),
        ("A10G", "A10G"),
        ("L4", "L4"),
        ("T4", "T4"),
        ("V100", "V100"),
    ] {
        if upper.contains(pattern) {
            return model.to_string();
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_names_map_to_catalog_models() {
        assert_eq!(from_nvml("NVIDIA H100 80GB HBM3"), "H100");
        assert_eq!(from_nvml("NVIDIA A100-SXM4-80GB"), "A100-80GB");
        assert_eq!(from_nvml("NVIDIA A100-SXM4-40GB"), "A100");
        assert_eq!(from_nvml("NVIDIA L40S"), "L40S");
        assert_eq!(from_nvml("NVIDIA GeForce RTX 4090"), "GeForce RTX 4090");
    }
}
