//! VFIO in the bench (`safenic bench-vfio`, docs/vfio.md): instructions and estimated cycles
//! per forwarded packet of each driver and model through sysfs (root, physical addresses) and
//! through VFIO (`nicsim exec --vfio`, as `nobody`, IOVAs), in rounds that interleave the two.
//! The forwarding loops are the same code either way; the pair shows that nothing of the VFIO
//! path reaches them.

use crate::{count_instructions, rings_overflowed, Counting, Driver, Harness, Instructions, DRIVER_CPU};
use std::cell::Cell;
use std::path::{Path, PathBuf};

/// The unprivileged user the VFIO runs are made as (`nobody`).
const NOBODY: u32 = 65534;
/// Pinned memory the drivers may map under callgrind: nicsim's type1 accounting is given this
/// in place of RLIMIT_MEMLOCK, which containers often may not raise (docs/vfio.md).
const MEMLOCK: u64 = 256 << 20;

/// How a driver is run through VFIO: under `nicsim exec --vfio` as `nobody`, pinned to the
/// driver's CPU.
pub struct Through {
    nicsim: PathBuf,
    runs: Cell<u32>,
}

impl Through {
    /// Through the `nicsim` program at `nicsim`.
    pub fn new(nicsim: PathBuf) -> Through {
        Through { nicsim, runs: Cell::new(0) }
    }

    /// The words before valgrind's, for the nicsim serving `root`.
    pub(crate) fn words(&self, root: &Path) -> Vec<String> {
        let mut w: Vec<String> = ["taskset", "-c", &DRIVER_CPU.to_string()].map(String::from).to_vec();
        w.push(self.nicsim.display().to_string());
        w.extend(["--root".to_string(), root.display().to_string()]);
        w.extend(["exec", "--vfio", "--vfio-user"].map(String::from));
        w.push(NOBODY.to_string());
        w.extend(["--vfio-memlock".to_string(), MEMLOCK.to_string(), "--".to_string(), "setpriv".to_string()]);
        w.extend([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}")]);
        w.extend(["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"].map(String::from));
        w
    }

    /// A new directory in the session's scratch directory that `nobody` may write, for one
    /// run's profile.
    pub(crate) fn fresh_profile_dir(&self, session: &Harness) -> Result<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt;
        self.runs.set(self.runs.get() + 1);
        let dir = session.profile_of("x").with_file_name(format!("vfio-profiles-{}", self.runs.get()));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)))
            .map_err(|e| format!("making {}: {e}", dir.display()))?;
        Ok(dir)
    }
}

/// The one callgrind profile in `dir`.
pub(crate) fn only_profile(dir: &Path) -> Result<PathBuf, String> {
    let profiles: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("listing {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("callgrind.out.")))
        .collect();
    match profiles.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("{} holds {} callgrind profiles, not one", dir.display(), profiles.len())),
    }
}

/// Instructions per packet of `driver` in `mode`, through VFIO if `through` is given, else
/// through sysfs; measured again (at most [`crate::rfc2544::TRIES`] runs) while the driver
/// was not the limit throughout.
pub fn instructions(
    driver: &Driver,
    mode: &str,
    seconds: f64,
    through: Option<&Through>,
) -> Result<Instructions, String> {
    let path = if through.is_some() { "vfio" } else { "sysfs" };
    let session = Harness::start(&format!("{}-{mode}-{path}-cg", driver.name))?;
    let how = Counting { mode, extra: &[], saturated: rings_overflowed, vfio: through, flows: 1 };
    let (mut counted, _) = count_instructions(&session, driver, &how, seconds)?;
    let mut runs = 1;
    while !counted.saturated && runs < crate::rfc2544::TRIES {
        eprintln!(
            "bench: {} {mode} through {path} was not saturated under callgrind in run {runs}; measuring again",
            driver.name
        );
        counted = count_instructions(&session, driver, &how, seconds)?.0;
        runs += 1;
    }
    Ok(counted)
}

/// One driver and model through both paths in one round.
#[derive(Debug, Clone)]
pub struct Pair {
    pub driver: String,
    pub mode: String,
    pub sysfs: Instructions,
    pub vfio: Instructions,
}

/// `rounds` rounds, each measuring every driver in every model of `modes` through sysfs and
/// then through VFIO.
pub fn run(
    drivers: &[Driver],
    modes: &[&str],
    seconds: f64,
    rounds: usize,
    nicsim: &Path,
) -> Result<Vec<Vec<Pair>>, String> {
    let through = Through::new(nicsim.to_path_buf());
    (0..rounds)
        .map(|_| {
            let mut round = Vec::new();
            for d in drivers {
                for &mode in modes {
                    let sysfs = instructions(d, mode, seconds, None)?;
                    let vfio = instructions(d, mode, seconds, Some(&through))?;
                    round.push(Pair { driver: d.name.clone(), mode: mode.to_string(), sysfs, vfio });
                }
            }
            Ok(round)
        })
        .collect()
}

/// The table of docs/results.md: per driver and model, the medians over the rounds through
/// each path and their ratio (VFIO / sysfs) with the range of the per-round ratios.
pub fn markdown(rounds: &[Vec<Pair>], seconds: f64) -> String {
    let median = |v: Vec<f64>| crate::results::median(&v);
    let mut s = format!(
        "Instructions and estimated cycles per forwarded packet through sysfs (root, physical addresses) \
         and through VFIO (`nicsim exec --vfio`, as nobody, IOVAs of nicsim's IOMMU), each run {seconds} s \
         under callgrind counting inside the forwarding loop only, {} round(s) interleaving the paths \
         (medians; a ratio's range is over the rounds).\n\n\
         | driver | model | Ir/packet sysfs | Ir/packet VFIO | **VFIO / sysfs** | est. cycles sysfs | est. cycles VFIO | **VFIO / sysfs** | driver the limit |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|\n",
        rounds.len()
    );
    let Some(first) = rounds.first() else { return s };
    for p in first {
        let same = |q: &&Pair| q.driver == p.driver && q.mode == p.mode;
        let all: Vec<&Pair> = rounds.iter().filter_map(|r| r.iter().find(same)).collect();
        let column = |f: fn(&Instructions) -> f64, vfio: bool| -> Vec<f64> {
            all.iter().map(|q| f(if vfio { &q.vfio } else { &q.sysfs })).collect()
        };
        let ratio = |f: fn(&Instructions) -> f64| {
            let (a, b) = (column(f, true), column(f, false));
            let per: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
            let (lo, hi) = per.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            format!("**{:.4}** ({lo:.4}–{hi:.4})", median(a) / median(b))
        };
        let saturated = all.iter().all(|q| q.sysfs.saturated && q.vfio.saturated);
        s += &format!(
            "| {} | {} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {} | {} |\n",
            p.driver,
            p.mode,
            median(column(Instructions::per_packet, false)),
            median(column(Instructions::per_packet, true)),
            ratio(Instructions::per_packet),
            median(column(Instructions::cycles_per_packet, false)),
            median(column(Instructions::cycles_per_packet, true)),
            ratio(Instructions::cycles_per_packet),
            if saturated { "yes" } else { "**no**: a figure may include idle polls" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callgrind::Events;

    fn counted(ir: u64, packets: u64) -> Instructions {
        Instructions { events: Events { ir, ..Events::default() }, packets, saturated: true }
    }

    #[test]
    fn the_table_gives_each_paths_median_and_their_ratio_with_its_range() {
        let pair =
            |s, v| Pair { driver: "rust".into(), mode: "flexible".into(), sysfs: counted(s, 10), vfio: counted(v, 10) };
        let t = markdown(&[vec![pair(1000, 1010)], vec![pair(1000, 990)]], 5.0);
        assert!(t.contains("| rust | flexible | 100.00 | 100.00 | **1.0000** (0.9900–1.0100) |"), "{t}");
    }

    #[test]
    fn a_vfio_run_is_nicsim_exec_as_nobody_before_valgrind() {
        let w = Through::new(PathBuf::from("/x/nicsim")).words(Path::new("/dev/shm/r"));
        let text = w.join(" ");
        assert!(text.starts_with("taskset -c 1 /x/nicsim --root /dev/shm/r exec"), "{text}");
        assert!(text.contains(" exec --vfio --vfio-user 65534 --vfio-memlock "), "{text}");
        assert!(
            text.ends_with("setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --"),
            "{text}"
        );
    }
}
