//! The API on DPDK's `net_ring` virtual devices, with no hardware and no hugepages: ports whose
//! transmit ring is their own receive ring (1023 frames deep). EAL initialises once per process,
//! so this binary has one test.

use dpdk::{Batch, Eal, Error, Mempool, PortConfig};

const POOL: u32 = 4095;

fn frame_number(m: &dpdk::Mbuf<'_>) -> u32 {
    u32::from_le_bytes(m.data()[..4].try_into().unwrap())
}

#[test]
fn a_ring_port_returns_every_frame_once_and_every_mbuf_to_its_pool() {
    let eal = Eal::builder("net_ring")
        .lcores("0")
        .no_pci()
        .no_huge(256)
        .no_shconf()
        .vdev("net_ring0")
        .vdev("net_ring1")
        .log_level("lib.eal:error")
        .init()
        .unwrap();
    assert_eq!(Eal::builder("again").no_pci().init().unwrap_err(), Error::AlreadyInitialised);
    assert_eq!(eal.ports(), [0, 1]);
    let pool = Mempool::new(&eal, "frames", POOL, 0, Mempool::DEFAULT_DATA_ROOM).unwrap();
    {
        let port = PortConfig::new(0).start(&pool).unwrap();
        assert_eq!(PortConfig::new(0).start(&pool).unwrap_err(), Error::PortInUse(0));
        assert_eq!(PortConfig::new(7).start(&pool).unwrap_err(), Error::NoSuchPort(7));
        let (mut rxs, mut txs) = port.queues();
        assert!(port.queues().0.is_empty(), "each queue is handed out once");
        let (rx, tx) = (&mut rxs[0], &mut txs[0]);

        // More frames than the ring holds, in one batch: the ring takes 1023 and the rest
        // stay in the batch, in order, at its front.
        let mut out: Batch<'_, 2048> = Batch::new();
        for n in 0..2048u32 {
            let mut m = pool.alloc().unwrap();
            let bytes = m.append(64).unwrap();
            bytes.fill(0xab);
            bytes[..4].copy_from_slice(&n.to_le_bytes());
            assert!(out.push(m).is_ok());
        }
        let mut received = 0u32;
        let mut back: Batch<'_, 32> = Batch::new();
        while !out.is_empty() {
            let before = out.len();
            let sent = tx.tx_burst(&mut out) as usize;
            assert_eq!(out.len(), before - sent);
            if let Some(first) = out.as_slice().first() {
                assert_eq!(frame_number(first), received + sent as u32, "the unsent stay in order");
            }
            while rx.rx_burst(&mut back) > 0 {
                for m in back.iter() {
                    assert_eq!((frame_number(m), m.len(), m.data()[63]), (received, 64, 0xab));
                    received += 1;
                }
                back.clear();
            }
        }
        assert_eq!(received, 2048);
        assert_eq!(rx.rx_burst(&mut back), 0, "nothing more");
        let stats = port.stats().unwrap();
        assert_eq!((stats.rx_packets, stats.tx_packets), (2048, 2048));

        // `retain` keeps the chosen mbufs in order and frees the rest.
        let mut some: Batch<'_, 8> = Batch::new();
        for n in 0..8u8 {
            let mut m = pool.alloc().unwrap();
            m.append(u16::from(n) + 1).unwrap().fill(n);
            assert!(some.push(m).is_ok());
        }
        some.retain(|m| m.len() % 2 == 0);
        let kept: Vec<usize> = some.iter().map(|m| m.len()).collect();
        assert_eq!(kept, [2, 4, 6, 8]);
        assert_eq!(pool.in_use(), 4, "the others went back to the pool");
        drop(some);

        // Checked head and tail room.
        let mut m = pool.alloc().unwrap();
        assert_eq!(m.adj(1), Err(Error::NoRoom { operation: "adj", bytes: 1 }));
        assert_eq!(m.trim(1), Err(Error::NoRoom { operation: "trim", bytes: 1 }));
        m.append(10).unwrap().fill(1);
        m.prepend(14).unwrap().fill(2);
        assert_eq!(m.data(), [[2u8; 14].as_slice(), &[1u8; 10]].concat());
        assert!(m.prepend(4096).is_err() && m.append(u16::MAX).is_err());
        m.adj(14).unwrap();
        m.trim(5).unwrap();
        assert_eq!(m.data(), [1u8; 5]);
    }
    assert_eq!((pool.in_use(), pool.available()), (0, POOL), "every mbuf is back in its pool");
    drop(pool);
    let pool = Mempool::new(&eal, "frames", POOL, 0, Mempool::DEFAULT_DATA_ROOM).expect("the first was freed");

    assert_eq!(PortConfig::new(0).start(&pool).unwrap_err(), Error::NoSuchPort(0), "closed: DPDK released it");

    // A port leaked with its queues set up: its pool must not be freed (the device could still
    // write into it), so the pool's name stays taken.
    std::mem::forget(PortConfig::new(1).start(&pool).unwrap());
    drop(pool);
    let again = Mempool::new(&eal, "frames", POOL, 0, Mempool::DEFAULT_DATA_ROOM).err();
    assert!(matches!(again, Some(Error::Call { call: "rte_pktmbuf_pool_create", errno: 17 })), "{again:?}");
    // A leaked mbuf keeps its pool too.
    let pool = Mempool::new(&eal, "other", 63, 0, Mempool::DEFAULT_DATA_ROOM).unwrap();
    std::mem::forget(pool.alloc().unwrap());
    drop(pool);
    assert!(Mempool::new(&eal, "other", 63, 0, Mempool::DEFAULT_DATA_ROOM).is_err());
}
