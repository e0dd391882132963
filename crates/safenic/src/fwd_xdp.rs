//! `safenic fwd flexible` when a port is AF_XDP (docs/afxdp.md): the flexible model's loop
//! (`fwd_virtio::forward_both`) over crates/afxdp's queues and, for the other port, its own
//! kind's, through the one `Receive`/`Transmit` API.
//!
//! Every buffer is in one region of frames, the UMEM of each AF_XDP socket, so a frame moves
//! between an AF_XDP port and an 82599 or virtio port unchanged: one pool per direction, as in
//! the other kinds' flexible model.

use crate::filter::Filter;
use crate::fwd_options::{stop_on_signals_and_pin, Options, BATCH, RING};
use crate::fwd_virtio::{forward_both, AnyDirection, QUEUE};
use crate::ports::PortKind;
use crate::Mode;
use afxdp::{Port, PortSpec};
use ixgbe::memory::FramePools;
use ixgbe::queues::{BufferPool, QueueMemory, QueueParts, Receive, Transmit};
use platform::dma::DmaRegion;
use std::time::Instant;
use virtio::queues::VirtioMemory;
use virtio::VirtioDevice;

/// Entries of each ring of an AF_XDP socket (libxdp's default is 2048 for fill and completion).
pub const XDP_RING: usize = 1024;
/// Buffers per direction's pool: a fill ring and a transmit ring full; both pools together
/// are the most an AF_XDP receive queue can hold ([`afxdp::queues::CHUNKS`]).
pub const XDP_POOL: usize = afxdp::queues::CHUNKS / 2;

/// What a run did, for the summary lines, and one line per AF_XDP port: how it was bound and
/// what the kernel counted.
struct Outcome {
    run: crate::fwd_virtio::Outcome,
    ports: Vec<String>,
}

/// How `port` was bound and where its program runs.
fn bound(port: &Port) -> (&'static str, &'static str) {
    (if port.zero_copy() { "zero-copy" } else { "copy" }, if port.native() { "native" } else { "generic" })
}

/// Says, once every port is open, that frames flow from now on (tests wait for this line).
fn started(ports: &[&Port]) -> Result<(), String> {
    for port in ports {
        let (mode, xdp) = bound(port);
        cli::outln!("{}: {mode} mode, {xdp} XDP: forwarding", port.spec())?;
    }
    Ok(())
}

/// A port's line: bind mode, where the program runs, and the socket's counters.
fn describe(port: &Port) -> String {
    let (mode, xdp) = bound(port);
    match port.statistics() {
        Ok(s) => format!(
            "{}: {mode} mode, {xdp} XDP; kernel: {} dropped, {} receive ring full, {} fill ring empty, {} invalid receive and {} invalid transmit descriptors",
            port.spec(),
            s.rx_dropped,
            s.rx_ring_full,
            s.rx_fill_ring_empty_descs,
            s.rx_invalid_descs,
            s.tx_invalid_descs
        ),
        Err(e) => format!("{}: {mode} mode, {xdp} XDP; {e}", port.spec()),
    }
}

/// The AF_XDP port `spec` and another port's queues (`rx_o`, `tx_o`, whose receive queue
/// draws on `pool_o`): forwards until told to stop. `xdp_is_input` says which is `a` of the
/// command line.
#[allow(clippy::too_many_arguments)]
fn with_xdp_port<'a, RO: Receive<'a>, TO: Transmit<'a>>(
    o: &Options,
    filter: Option<&mut Filter>,
    spec: &PortSpec,
    xdp_is_input: bool,
    umem: &'a DmaRegion,
    mut pool_x: BufferPool<'a>,
    mut pool_o: BufferPool<'a>,
    rx_o: &mut RO,
    tx_o: &mut TO,
    other_broken: &dyn Fn() -> Option<String>,
) -> Result<Outcome, String> {
    let (port, (mut rx_x, mut tx_x)) = Port::open::<XDP_RING>(spec, umem, o.xdp_bind, &mut pool_x)?;
    started(&[&port])?;
    let mut xo = AnyDirection::new(&mut rx_x, tx_o, &mut pool_x);
    let mut ox = AnyDirection::new(rx_o, &mut tx_x, &mut pool_o);
    let watched = || port.broken().or_else(other_broken);
    let (counts, broken) = if xdp_is_input {
        forward_both(o, filter, &watched, &mut xo, &mut ox)
    } else {
        forward_both(o, filter, &watched, &mut ox, &mut xo)
    };
    let dropped = xo.stop() + ox.stop();
    let run = crate::fwd_virtio::Outcome { counts, broken, malformed: rx_x.refused, dropped };
    Ok(Outcome { run, ports: vec![describe(&port)] })
}

/// Both ports AF_XDP.
fn both_xdp(
    o: &Options,
    filter: Option<&mut Filter>,
    umem: &DmaRegion,
    [mut pool_ab, mut pool_ba]: [BufferPool<'_>; 2],
) -> Result<Outcome, String> {
    let (sa, sb) = (PortSpec::parse(&o.input)?, PortSpec::parse(&o.output)?);
    if sa == sb {
        return Err(format!("{sa} is both input and output: give two different ports"));
    }
    let (pa, (mut rx_a, mut tx_a)) = Port::open::<XDP_RING>(&sa, umem, o.xdp_bind, &mut pool_ab)?;
    let (pb, (mut rx_b, mut tx_b)) = Port::open::<XDP_RING>(&sb, umem, o.xdp_bind, &mut pool_ba)?;
    started(&[&pa, &pb])?;
    let mut ab = AnyDirection::new(&mut rx_a, &mut tx_b, &mut pool_ab);
    let mut ba = AnyDirection::new(&mut rx_b, &mut tx_a, &mut pool_ba);
    let (counts, broken) = forward_both(o, filter, &|| pa.broken().or_else(|| pb.broken()), &mut ab, &mut ba);
    let dropped = ab.stop() + ba.stop();
    let malformed = rx_a.refused + rx_b.refused;
    let run = crate::fwd_virtio::Outcome { counts, broken, malformed, dropped };
    Ok(Outcome { run, ports: vec![describe(&pa), describe(&pb)] })
}

/// `safenic fwd` when a port is AF_XDP: `kinds` are the input's and the output's, `other`
/// the kind of the port that is not AF_XDP (or AF_XDP too).
pub fn run(o: &Options, kinds: [PortKind; 2], other: PortKind) -> Result<(), String> {
    if o.mode != Mode::Flexible {
        return Err(format!(
            "the {} model is the 82599's (TinyNF's agents own their rings): use flexible with an AF_XDP port",
            format!("{:?}", o.mode).to_lowercase()
        ));
    }
    if o.queues != 1 || o.cores.is_some() {
        return Err(
            "--queues and --cores are for two 82599 ports: an AF_XDP port is one queue (xdp:IFNAME@QUEUE)".into()
        );
    }
    let mut filter = o.filter.map(|port| Filter::new(port, BATCH)).transpose()?;
    stop_on_signals_and_pin(o)?;
    let start = Instant::now();
    let e = |e: ixgbe::DriverError| e.to_string();
    let mut frames = FramePools::allocate(&[XDP_POOL, XDP_POOL]).map_err(e)?;
    let (umem, pools) = frames.parts().map_err(e)?;
    let [pool_1, pool_2]: [BufferPool<'_>; 2] = pools.try_into().map_err(|_| "two pools".to_string())?;
    let xdp_is_input = kinds[0] == PortKind::Xdp;
    let (x_arg, o_arg) = if xdp_is_input { (&o.input, &o.output) } else { (&o.output, &o.input) };
    let outcome = match other {
        PortKind::Xdp => both_xdp(o, filter.as_mut(), umem, [pool_1, pool_2])?,
        PortKind::I82599 => {
            let spec = PortSpec::parse(x_arg)?;
            let port = ixgbe::Port::open(&o.sysfs, o_arg).map_err(e)?;
            let x = port.device();
            x.init().map_err(e)?;
            x.enable_flow_control().map_err(e)?;
            x.wait_for_link(o.link_timeout).map_err(e)?;
            // Its rings only: the buffers are the frames' (one left over in its own pool).
            let mut mem = QueueMemory::<RING>::allocate(1).map_err(e)?;
            let QueueParts { rx, tx, .. } = mem.parts().map_err(e)?;
            let mut pool_o = pool_2;
            let mut rx_o = ixgbe::queues::RxQueue::<RING>::new(&x, rx, &mut pool_o).map_err(e)?;
            let mut tx_o = ixgbe::queues::TxQueue::<RING>::new(&x, tx).map_err(e)?;
            let mut outcome = with_xdp_port(
                o,
                filter.as_mut(),
                &spec,
                xdp_is_input,
                umem,
                pool_1,
                pool_o,
                &mut rx_o,
                &mut tx_o,
                &|| None,
            )?;
            outcome.run.malformed += rx_o.refused.total();
            outcome
        }
        PortKind::Virtio => {
            let spec = PortSpec::parse(x_arg)?;
            let v = VirtioDevice::open_with(&o.sysfs, o_arg, o.virtio_interface).map_err(e)?;
            let mut mem = VirtioMemory::<QUEUE>::allocate(1).map_err(e)?;
            let parts = mem.parts().map_err(e)?;
            let mut pool_o = pool_2;
            let mut rx_o = virtio::queues::RxQueue::<QUEUE>::new(&v, parts.rx, &mut pool_o).map_err(e)?;
            let mut tx_o = virtio::queues::TxQueue::<QUEUE>::new(&v, parts.tx).map_err(e)?;
            let _ctrl = v.start::<QUEUE>(parts.ctrl).map_err(e)?;
            let mut outcome = with_xdp_port(
                o,
                filter.as_mut(),
                &spec,
                xdp_is_input,
                umem,
                pool_1,
                pool_o,
                &mut rx_o,
                &mut tx_o,
                &|| v.broken(),
            )?;
            outcome.run.malformed += rx_o.refused;
            outcome
        }
    };
    for line in &outcome.ports {
        cli::outln!("{line}")?;
    }
    outcome.run.report(o, filter.as_ref(), start.elapsed().as_secs_f64(), "AF_XDP")
}
