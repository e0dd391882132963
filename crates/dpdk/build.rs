//! Generates the raw bindings from the installed DPDK headers (bindgen) and compiles the shim
//! for DPDK's static inline fast path (cc), both with the flags `pkg-config libdpdk` gives and
//! for the x86-64 level the Rust code is built for (`-C target-cpu` in RUSTFLAGS).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/shim.c");
    let dpdk =
        pkg_config::Config::new().atleast_version("22.11").cargo_metadata(false).probe("libdpdk").unwrap_or_else(|e| {
            panic!("DPDK 22.11's development files are missing (scripts/setup installs dpdk-dev): {e}")
        });
    // `-march` from pkg-config is DPDK's build machine; ours is the level of the Rust code.
    let mut cflags: Vec<String> = dpdk.include_paths.iter().map(|p| format!("-I{}", p.display())).collect();
    cflags.extend(["-include".to_string(), "rte_config.h".to_string()]);
    cflags.push(format!("-march={}", target_cpu().unwrap_or_else(dpdk_march)));

    let mut shim = cc::Build::new();
    shim.file("csrc/shim.c").opt_level(3).warnings(true).extra_warnings(true);
    for f in &cflags {
        shim.flag(f);
    }
    shim.compile("safenic_dpdk_shim");

    // Only the libraries the API calls; EAL loads the drivers (net_ring, net_ixgbe…) itself.
    for lib in ["rte_ethdev", "rte_mbuf", "rte_mempool", "rte_ring", "rte_eal", "rte_kvargs", "rte_telemetry"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for dir in &dpdk.link_paths {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }

    let bindings = bindgen::Builder::default()
        .header("csrc/shim.h")
        .clang_args(&cflags)
        .allowlist_function("safenic_.*")
        .allowlist_function("rte_eal_init|rte_eal_cleanup|rte_strerror|rte_lcore_count|rte_get_next_lcore")
        .allowlist_function(
            "rte_eal_remote_launch|rte_eal_wait_lcore|rte_get_main_lcore|rte_socket_id|rte_lcore_to_socket_id",
        )
        .allowlist_function("rte_pktmbuf_pool_create|rte_mempool_free|rte_mempool_avail_count|rte_mempool_in_use_count")
        .allowlist_function("rte_pktmbuf_free_bulk")
        .allowlist_function("rte_eth_dev_count_avail|rte_eth_dev_is_valid_port|rte_eth_dev_info_get")
        .allowlist_function("rte_eth_dev_configure|rte_eth_rx_queue_setup|rte_eth_tx_queue_setup")
        .allowlist_function("rte_eth_dev_adjust_nb_rx_tx_desc|rte_eth_dev_socket_id")
        .allowlist_function("rte_eth_dev_start|rte_eth_dev_stop|rte_eth_dev_close")
        .allowlist_function("rte_eth_promiscuous_enable|rte_eth_promiscuous_disable|rte_eth_macaddr_get")
        .allowlist_function("rte_eth_stats_get|rte_eth_stats_reset|rte_eth_link_get_nowait|rte_eth_dev_set_ptypes")
        .allowlist_type("rte_mbuf|rte_eth_conf|rte_eth_stats|rte_ether_addr|rte_eth_link|rte_eth_dev_info")
        .allowlist_var("rte_eth_fp_ops|RTE_VER_YEAR|RTE_VER_MONTH|RTE_ETHDEV_RXTX_CALLBACKS")
        .allowlist_function("rte_eth_call_rx_callbacks|rte_eth_call_tx_callbacks")
        .allowlist_var("RTE_MAX_ETHPORTS|RTE_MAX_LCORE|RTE_MBUF_DEFAULT_BUF_SIZE|RTE_PKTMBUF_HEADROOM")
        .derive_default(true)
        .generate_comments(false)
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!("generating DPDK's bindings (bindgen needs libclang: scripts/setup installs it): {e}")
        });
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings.write_to_file(out.join("bindings.rs")).expect("writing the bindings");
}

/// The `-march` DPDK was built for (`pkg-config --cflags`): its headers need at least that.
fn dpdk_march() -> String {
    let out = std::process::Command::new("pkg-config").args(["--cflags", "libdpdk"]).output();
    let flags = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let march = flags.split_whitespace().find_map(|f| f.strip_prefix("-march="));
    march.unwrap_or("native").to_string()
}

/// The `-C target-cpu` of the Rust build (the project's named level), if it names one.
fn target_cpu() -> Option<String> {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let mut words = flags.split('\x1f');
    while let Some(w) = words.next() {
        if let Some(cpu) = w.strip_prefix("-Ctarget-cpu=").or_else(|| w.strip_prefix("target-cpu=")) {
            return Some(cpu.to_string());
        }
        if w == "-C" {
            if let Some(cpu) = words.next().and_then(|n| n.strip_prefix("target-cpu=")) {
                return Some(cpu.to_string());
            }
        }
    }
    None
}
