//! An Ethernet port: configured by a builder, started, stopped and closed on drop; its queues
//! handed out once each.

use crate::eal::USERS;
use crate::error::{check, Error};
use crate::mempool::Mempool;
use crate::queue::{RxQueue, TxQueue};
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Ports open in this process: one `Port` per DPDK port, so one handle per queue.
static OPEN: [AtomicBool; sys::RTE_MAX_ETHPORTS as usize] =
    [const { AtomicBool::new(false) }; sys::RTE_MAX_ETHPORTS as usize];

/// How to set a port up: `PortConfig::new(0).queues(1, 1).promiscuous(true).start(&pool)`.
#[derive(Debug, Clone)]
pub struct PortConfig {
    id: u16,
    rx_queues: u16,
    tx_queues: u16,
    rx_descriptors: u16,
    tx_descriptors: u16,
    promiscuous: bool,
    packet_types: bool,
    link_wait: Option<Duration>,
}

impl PortConfig {
    /// Port `id`, one receive and one transmit queue of 1024 descriptors, not promiscuous, not
    /// waiting for the link.
    pub fn new(id: u16) -> Self {
        PortConfig {
            id,
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            promiscuous: false,
            packet_types: true,
            link_wait: None,
        }
    }
    pub fn queues(mut self, rx: u16, tx: u16) -> Self {
        (self.rx_queues, self.tx_queues) = (rx, tx);
        self
    }
    /// Ring sizes; the driver may round them to what the device takes.
    pub fn descriptors(mut self, rx: u16, tx: u16) -> Self {
        (self.rx_descriptors, self.tx_descriptors) = (rx, tx);
        self
    }
    pub fn promiscuous(mut self, on: bool) -> Self {
        self.promiscuous = on;
        self
    }
    /// Whether the driver classifies received frames (`rte_eth_dev_set_ptypes`): l2fwd turns
    /// it off, since it reads only the Ethernet header. A driver that cannot is left as it is.
    pub fn packet_types(mut self, on: bool) -> Self {
        self.packet_types = on;
        self
    }
    /// After starting, wait up to `timeout` for the link to come up (an error if it does not).
    pub fn wait_for_link(mut self, timeout: Duration) -> Self {
        self.link_wait = Some(timeout);
        self
    }

    /// Configures and starts the port, its receive queues refilled from `pool`.
    pub fn start<'p>(self, pool: &'p Mempool<'_>) -> Result<Port<'p>, Error> {
        let id = self.id;
        // SAFETY: reads DPDK's port table; the pool proves EAL is up.
        if id >= sys::RTE_MAX_ETHPORTS as u16 || unsafe { sys::rte_eth_dev_is_valid_port(id) } != 1 {
            return Err(Error::NoSuchPort(id));
        }
        if self.rx_queues == 0 || self.tx_queues == 0 {
            return Err(Error::Config(format!("port {id}: give it at least one receive and one transmit queue")));
        }
        if OPEN[id as usize].swap(true, Ordering::SeqCst) {
            return Err(Error::PortInUse(id));
        }
        // From here the port is ours: Drop stops and closes it, and releases the claim.
        USERS.fetch_add(1, Ordering::SeqCst);
        pool.ports.fetch_add(1, Ordering::SeqCst);
        let port =
            Port { id, pool, rx_queues: self.rx_queues, tx_queues: self.tx_queues, taken: AtomicBool::new(false) };
        self.set_up(pool)?;
        Ok(port)
    }

    fn set_up(&self, pool: &Mempool<'_>) -> Result<(), Error> {
        let id = self.id;
        let conf = sys::rte_eth_conf::default();
        // SAFETY: id is a valid port we claimed; conf is a zeroed (default) configuration that
        // DPDK only reads.
        check("rte_eth_dev_configure", unsafe {
            sys::rte_eth_dev_configure(id, self.rx_queues, self.tx_queues, &conf)
        })?;
        let (mut rx_desc, mut tx_desc) = (self.rx_descriptors, self.tx_descriptors);
        // SAFETY: a configured port we claimed; both pointers are to locals.
        check("rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rx_desc, &mut tx_desc)
        })?;
        // SAFETY: reads the port's NUMA socket.
        let socket = unsafe { sys::rte_eth_dev_socket_id(id) }.max(0) as u32;
        for q in 0..self.rx_queues {
            // SAFETY: q < the configured count; NULL asks for the driver's default queue
            // configuration; the pool is live and stays so while the port is (`pool.ports`).
            check("rte_eth_rx_queue_setup", unsafe {
                sys::rte_eth_rx_queue_setup(id, q, rx_desc, socket, std::ptr::null(), pool.raw())
            })?;
        }
        for q in 0..self.tx_queues {
            // SAFETY: q < the configured count; NULL: the driver's default configuration.
            check("rte_eth_tx_queue_setup", unsafe {
                sys::rte_eth_tx_queue_setup(id, q, tx_desc, socket, std::ptr::null())
            })?;
        }
        if !self.packet_types {
            // SAFETY: a configured port we claimed; no array of types is asked for (NULL, 0).
            unsafe { sys::rte_eth_dev_set_ptypes(id, 0, std::ptr::null_mut(), 0) };
        }
        // SAFETY: every queue is set up.
        check("rte_eth_dev_start", unsafe { sys::rte_eth_dev_start(id) })?;
        if self.promiscuous {
            // SAFETY: a started port we claimed.
            check("rte_eth_promiscuous_enable", unsafe { sys::rte_eth_promiscuous_enable(id) })?;
        }
        if let Some(timeout) = self.link_wait {
            let deadline = Instant::now() + timeout;
            while !link_up(id) {
                if Instant::now() >= deadline {
                    return Err(Error::Config(format!(
                        "port {id}: the link did not come up within {timeout:?}: check the cable, or wait longer"
                    )));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }
}

fn link_up(id: u16) -> bool {
    let mut link = sys::rte_eth_link::default();
    // SAFETY: a port we claimed; link is a local DPDK fills.
    let ret = unsafe { sys::rte_eth_link_get_nowait(id, &mut link) };
    ret == 0 && link.link_status() == 1
}

/// A started port. Its queues borrow it, so it is stopped and closed (on drop) only after
/// every queue is gone; it borrows the pool its receive queues refill from.
pub struct Port<'p> {
    id: u16,
    pool: &'p Mempool<'p>,
    rx_queues: u16,
    tx_queues: u16,
    taken: AtomicBool,
}

/// A port's counters (`rte_eth_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Frames the device dropped because no descriptor was free.
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// Receive buffers the driver could not allocate.
    pub rx_no_mbuf: u64,
}

impl std::fmt::Debug for Port<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.id)
            .field("rx_queues", &self.rx_queues)
            .field("tx_queues", &self.tx_queues)
            .finish()
    }
}

impl<'p> Port<'p> {
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Every receive and transmit queue, once: a second call returns none.
    pub fn queues(&self) -> (Vec<RxQueue<'_>>, Vec<TxQueue<'_>>) {
        if self.taken.swap(true, Ordering::SeqCst) {
            return (Vec::new(), Vec::new());
        }
        (
            (0..self.rx_queues).map(|q| RxQueue::new(self.id, q)).collect(),
            (0..self.tx_queues).map(|q| TxQueue::new(self.id, q)).collect(),
        )
    }

    pub fn mac(&self) -> [u8; 6] {
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: a port we claimed; addr is a local DPDK fills.
        unsafe { sys::rte_eth_macaddr_get(self.id, &mut addr) };
        addr.addr_bytes
    }

    pub fn link_up(&self) -> bool {
        link_up(self.id)
    }

    pub fn stats(&self) -> Result<Stats, Error> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: a port we claimed; s is a local DPDK fills.
        check("rte_eth_stats_get", unsafe { sys::rte_eth_stats_get(self.id, &mut s) })?;
        Ok(Stats {
            rx_packets: s.ipackets,
            tx_packets: s.opackets,
            rx_bytes: s.ibytes,
            tx_bytes: s.obytes,
            rx_missed: s.imissed,
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_no_mbuf: s.rx_nombuf,
        })
    }
}

impl Drop for Port<'_> {
    /// Stops the port (the device writes no more into the pool's buffers, and the driver frees
    /// the mbufs its rings held), closes it, and only then lets the pool go.
    fn drop(&mut self) {
        // SAFETY: a port we claimed; no queue handle is alive (they borrow the port).
        if unsafe { sys::rte_eth_dev_stop(self.id) } != 0 {
            // The device may still write into the pool: leak the pool, EAL and the port.
            return;
        }
        // SAFETY: a stopped port we claimed.
        unsafe { sys::rte_eth_dev_close(self.id) };
        self.pool.ports.fetch_sub(1, Ordering::SeqCst);
        USERS.fetch_sub(1, Ordering::SeqCst);
        OPEN[self.id as usize].store(false, Ordering::SeqCst);
    }
}
