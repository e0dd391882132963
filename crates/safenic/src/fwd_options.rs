//! What `safenic fwd` is asked, and what every kind of port shares: ring, batch and pool
//! sizes, and the set-up before the first device is opened.

use crate::{MacRewrite, Mode};
use std::path::PathBuf;
use std::time::Duration;

/// Descriptors per ring (a power of two; TinyNF uses 256).
pub const RING: usize = 512;
/// Flexible model: packets per batch.
pub const BATCH: usize = 32;
/// Flexible model: buffers per direction's pool.
pub const POOL: usize = 4096;

pub struct Options {
    pub mode: Mode,
    pub input: String,
    pub output: String,
    pub sysfs: PathBuf,
    pub mac_rewrite: MacRewrite,
    pub outputs: usize,
    pub seconds: Option<f64>,
    pub progress: bool,
    pub cpu: Option<usize>,
    /// IEEE 802.3x flow control on both ports, and a lossless flexible model.
    pub flow_control: bool,
    /// How long an 82599 port's link may take to come up before the driver gives up.
    pub link_timeout: Duration,
    /// Flexible model: drop IPv4 UDP frames to this port, by a C filter in an isolation domain.
    pub filter: Option<u16>,
    /// A virtio-net port's interface; the driver's choice (modern where offered) if `None`.
    pub virtio_interface: Option<virtio::Interface>,
    /// 82599 ports: queue pairs, over which RSS spreads the flows (1 to 16).
    pub queues: usize,
    /// 82599 ports: the CPUs of the forwarding threads, one thread per CPU.
    pub cores: Option<Vec<usize>>,
    /// AF_XDP ports: how their sockets are bound.
    pub xdp_bind: afxdp::BindMode,
}

/// SIGINT/SIGTERM end forwarding, and the process runs on `--cpu` if given.
pub fn stop_on_signals_and_pin(o: &Options) -> Result<(), String> {
    platform::signals::install_termination_flag().map_err(|e| format!("installing signal handlers: {e}"))?;
    if let Some(cpu) = o.cpu {
        platform::sched::pin_current_thread(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    Ok(())
}
