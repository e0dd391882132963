//! The EAL arguments this API passes on: an allowlist, so that no argument makes EAL load,
//! map or run something the program did not link [DPDK 22.11, "EAL parameters"]. Refused,
//! among others: `-d` (a driver shared object or a directory of them), `--proc-type` (a
//! secondary process maps another process's memory), `--vfio-vf-token`, `--create-uio-dev`, `--trace*`, `--huge-dir`, `--mbuf-pool-ops-name`, and a virtual device
//! that is not one of [`VIRTUAL_DEVICES`] (vhost-user, memif and virtio-user share memory with
//! another process).
//!
//! # Soundness
//! What EAL loads besides is the drivers of its own installation (a shared build loads the
//! plugin directory it was built with), trusted as the libraries the program links are.

use crate::error::Error;

/// Every EAL option this API passes on, and whether it takes a value (`-l 0-1`, `-l0-1`,
/// `--lcores=0-1`).
pub const ALLOWED_EAL_OPTIONS: [(&str, bool); 23] = [
    ("-l", true),
    ("--lcores", true),
    ("-c", true),
    ("-n", true),
    ("-m", true),
    ("--socket-mem", true),
    ("-a", true),
    ("--allow", true),
    ("-b", true),
    ("--block", true),
    ("--vdev", true),
    ("--log-level", true),
    ("--main-lcore", true),
    ("--iova-mode", true),
    ("--no-pci", false),
    ("--no-huge", false),
    ("--in-memory", false),
    ("--no-shconf", false),
    ("--no-telemetry", false),
    ("--no-hpet", false),
    ("--legacy-mem", false),
    // A primary process takes the address as a hint: it reserves memory there only if nothing
    // is mapped, and elsewhere otherwise (eal_get_virtual_area); valgrind needs it.
    ("--base-virtaddr", true),
    ("-v", false),
];

fn takes_value(option: &str) -> Option<bool> {
    ALLOWED_EAL_OPTIONS.iter().find(|(o, _)| *o == option).map(|&(_, v)| v)
}

/// The virtual devices a `--vdev` may name: each moves frames between this process and a
/// ring, nothing, a pcap file, a TAP interface or a packet socket.
pub const VIRTUAL_DEVICES: [&str; 5] = ["net_ring", "net_null", "net_pcap", "net_tap", "net_af_packet"];

/// Refuses the first EAL argument of `args` (before `--`; the first is the program's name)
/// that is not in the allowlist.
pub(crate) fn vet(args: &[String]) -> Result<(), Error> {
    let mut i = 1;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            return Ok(());
        }
        let refused = |why: &str| Error::RefusedArgument { argument: arg.clone(), why: why.to_string() };
        if takes_value(arg) == Some(false) {
            i += 1;
            continue;
        }
        let (option, attached) = split(arg).ok_or_else(|| refused("it is not an option EAL takes"))?;
        if takes_value(option) != Some(true) {
            return Err(refused("this API passes on only EAL options that load, map and run nothing of their own"));
        }
        let value = match attached {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i).map(String::as_str).ok_or_else(|| refused("it needs a value"))?
            }
        };
        if option == "--vdev" && !VIRTUAL_DEVICES.contains(&driver_of(value)) {
            return Err(refused("that virtual device is not one of dpdk::VIRTUAL_DEVICES"));
        }
        i += 1;
    }
    Ok(())
}

/// An option and the value written into the same argument, if any (`--x=v`, `-lv`).
fn split(arg: &str) -> Option<(&str, Option<&str>)> {
    if let Some((option, value)) = arg.split_once('=').filter(|(o, _)| o.starts_with("--")) {
        return Some((option, Some(value)));
    }
    if arg.starts_with("--") {
        return Some((arg, None));
    }
    if arg.len() > 2 && arg.starts_with('-') && arg.is_char_boundary(2) {
        return Some((&arg[..2], Some(&arg[2..])));
    }
    arg.starts_with('-').then_some((arg, None))
}

/// The driver of a `--vdev` specification: `net_pcap0,rx_pcap=f` is `net_pcap`.
fn driver_of(spec: &str) -> &str {
    let name = spec.split(',').next().unwrap_or("");
    name.trim_end_matches(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn what_the_project_passes_is_allowed() {
        for ok in [
            &["l2fwd", "-l", "0", "--no-pci", "--no-huge", "-m", "512", "--no-shconf", "--vdev", "net_null0"][..],
            &["l2fwd", "-l0-1", "-n", "1", "--in-memory", "-a", "0000:5e:00.0", "--", "-p", "3", "-d", "x"],
            &["t", "--vdev=net_pcap0,rx_pcap=/tmp/a.pcap", "--log-level=lib.eal:error", "--vdev", "net_ring1"],
            &["t", "--base-virtaddr", "0x2000000000", "-m", "256"],
        ] {
            vet(&args(ok)).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
    }

    #[test]
    fn every_option_that_loads_maps_or_runs_something_is_refused() {
        for bad in [
            &["p", "-d", "/tmp/evil.so"][..],
            &["p", "-d/tmp/evil.so"],
            &["p", "--proc-type=secondary"],
            &["p", "--file-prefix", "x", "--proc-type", "auto"],
            &["p", "--vdev", "net_vhost0,iface=/tmp/sock"],
            &["p", "--vdev", "net_memif0"],
            &["p", "--vdev=virtio_user0,path=/dev/vhost-net"],
            &["p", "--trace=.*"],
            &["p", "--huge-dir", "/tmp"],
            &["p", "--create-uio-dev"],
            &["p", "stray"],
            &["p", "-l"],
        ] {
            let e = vet(&args(bad)).expect_err(&format!("{bad:?}"));
            assert!(e.to_string().contains("dpdk::"), "{bad:?}: {e}");
        }
    }
}
