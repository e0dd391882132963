//! Times the engine's slow and fast paths in isolation (no driver, no DMA).
use nicsim::device::Port;
use nicsim::dma::FlatDmaSpace;
use nicsim::engine::Engine;
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::regs::BAR0_LEN;
use platform::MappedRegion;
use std::time::Instant;

fn main() {
    let ports: Vec<Port> = (0..2)
        .map(|i| Port::new(i, MappedRegion::anonymous(BAR0_LEN).unwrap(), PciConfig::new(MappedRegion::anonymous(CONFIG_LEN).unwrap(), 0), i as u32, 10.0))
        .collect();
    let dma = FlatDmaSpace { region: MappedRegion::anonymous(1 << 21).unwrap(), base: 1 << 30 };
    let mut e = Engine::new(ports, dma, 10.0, &[], serde_json::json!({}));
    let t = Instant::now();
    for _ in 0..1000 {
        e.scan();
    }
    println!("slow path (2 ports): {:?} per call", t.elapsed() / 1000);
    let t = Instant::now();
    for _ in 0..100_000 {
        let n = e.now_ps();
        e.step(n);
    }
    println!("idle fast path: {:?} per iteration", t.elapsed() / 100_000);
}
