//! The SFP+ module in the port's cage, as software reaches it through I2CCTL's bit-banged
//! two-wire bus [DS 8.2.3.1.5]: the module's ID EEPROM at address 0xA0 and its diagnostics
//! page at 0xA2 [SFF-8472 4, 8]. The module is an Intel-branded 10GBASE-SR optic, the kind
//! shipped with 82599 SFP+ cards.

/// The 7-bit bus addresses of the two pages (0xA0 and 0xA2 as 8-bit write addresses).
const ID_PAGE: u8 = 0x50;
const DIAGNOSTICS_PAGE: u8 = 0x51;

/// The ID EEPROM [SFF-8472 table 4-1]: SFP (0x03), LC connector, 10GBASE-SR, 10.3 Gb/s,
/// vendor "Intel Corp" with Intel's OUI 00:1B:21, and both check codes.
pub fn id_page() -> [u8; 256] {
    let mut p = [0u8; 256];
    p[0] = 0x03; // identifier: SFP/SFP+
    p[1] = 0x04; // extended identifier: two-wire ID only
    p[2] = 0x07; // connector: LC
    p[3] = 0x10; // 10G Ethernet compliance: 10GBASE-SR
    p[11] = 0x06; // encoding: 64B/66B
    p[12] = 0x67; // nominal rate: 10.3 Gb/s in 100 Mb/s units
    p[16] = 0x08; // OM2 length, 10 m units
    p[17] = 0x03; // OM1 length, 10 m units
    p[20..36].copy_from_slice(b"Intel Corp      ");
    p[37..40].copy_from_slice(&[0x00, 0x1B, 0x21]);
    p[40..56].copy_from_slice(b"FTLX8571D3BCV-IT");
    p[56..60].copy_from_slice(b"A   ");
    p[60..62].copy_from_slice(&850u16.to_be_bytes()); // wavelength, nm
    p[63] = check_code(&p[0..63]);
    p[65] = 0x1A; // options: TX_DISABLE, TX_FAULT, LOS
    p[68..84].copy_from_slice(b"NICSIM0000000000");
    p[84..92].copy_from_slice(b"261124  ");
    p[92] = 0x68; // diagnostics implemented, internally calibrated, average power
    p[93] = 0xF0; // alarms, soft TX_DISABLE, TX_FAULT, RX_LOS
    p[94] = 0x03; // SFF-8472 rev 10.2
    p[95] = check_code(&p[64..95]);
    p
}

fn check_code(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |a, &b| a.wrapping_add(b))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not addressed: waits for a START.
    Idle,
    /// Receiving a byte (the bus address first, then an offset or data).
    Receive(Byte),
    /// Pulling SDA low for the ACK clock, then going on as `then` says.
    Ack(Then),
    /// Sending the byte at the pointer: `bits` already put on SDA.
    Send { bits: u32 },
    /// SDA released for the master's ACK (more) or NACK (done).
    MasterAck { acked: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Byte {
    Address,
    Offset,
    Data,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Send,
    ReceiveOffset,
    ReceiveData,
}

/// The module's two-wire slave. The master drives SCL and SDA through I2CCTL's outputs; the
/// lines read back in I2CCTL's inputs, SDA low whenever either side pulls it low.
#[derive(Debug, Clone)]
pub struct Sfp {
    id: [u8; 256],
    scl: bool,
    sda: bool,
    phase: Phase,
    shift: u8,
    bits: u32,
    page: u8,
    pointer: u8,
    pull_low: bool,
    /// False for an empty cage: nothing answers, the lines read back as driven.
    present: bool,
}

impl Default for Sfp {
    fn default() -> Self {
        Sfp {
            id: id_page(),
            scl: true,
            sda: true,
            phase: Phase::Idle,
            shift: 0,
            bits: 0,
            page: ID_PAGE,
            pointer: 0,
            pull_low: false,
            present: true,
        }
    }
}

impl Sfp {
    /// An empty cage.
    pub fn empty() -> Sfp {
        Sfp { present: false, ..Sfp::default() }
    }

    /// The master's outputs as it left them; returns (SCL, SDA) as the bus carries them.
    pub fn drive(&mut self, scl_out: bool, sda_out: bool) -> (bool, bool) {
        if !self.present {
            return (scl_out, sda_out);
        }
        let sda = sda_out && !self.pull_low;
        let (was_scl, was_sda) = (self.scl, self.sda);
        self.scl = scl_out;
        self.sda = sda;
        if was_scl && scl_out && was_sda != sda {
            // SDA changing while SCL is high: START (falling) or STOP (rising) [I2C 3.1.4].
            self.pull_low = false;
            self.phase = if sda { Phase::Idle } else { Phase::Receive(Byte::Address) };
            self.bits = 0;
        } else if scl_out && !was_scl {
            self.rising(sda);
        } else if !scl_out && was_scl {
            self.falling();
        }
        (scl_out, sda_out && !self.pull_low)
    }

    fn rising(&mut self, sda: bool) {
        match self.phase {
            Phase::Receive(_) => {
                self.shift = (self.shift << 1) | u8::from(sda);
                self.bits += 1;
            }
            Phase::MasterAck { .. } => self.phase = Phase::MasterAck { acked: !sda },
            _ => {}
        }
    }

    fn falling(&mut self) {
        match self.phase {
            Phase::Receive(byte) if self.bits == 8 => {
                self.bits = 0;
                let then = match byte {
                    Byte::Address => {
                        let (address, read) = (self.shift >> 1, self.shift & 1 != 0);
                        if address != ID_PAGE && address != DIAGNOSTICS_PAGE {
                            self.phase = Phase::Idle; // not ours: no ACK
                            return;
                        }
                        self.page = address;
                        if read {
                            Then::Send
                        } else {
                            Then::ReceiveOffset
                        }
                    }
                    Byte::Offset => {
                        self.pointer = self.shift;
                        Then::ReceiveData
                    }
                    // Writes are acknowledged and dropped: both pages are read-only here.
                    Byte::Data => {
                        self.pointer = self.pointer.wrapping_add(1);
                        Then::ReceiveData
                    }
                };
                self.pull_low = true;
                self.phase = Phase::Ack(then);
            }
            Phase::Ack(then) => {
                self.pull_low = false;
                match then {
                    Then::Send => self.send_next_bit(0),
                    Then::ReceiveOffset => self.phase = Phase::Receive(Byte::Offset),
                    Then::ReceiveData => self.phase = Phase::Receive(Byte::Data),
                }
            }
            Phase::Send { bits: 8 } => {
                self.pull_low = false;
                self.pointer = self.pointer.wrapping_add(1);
                self.phase = Phase::MasterAck { acked: false };
            }
            Phase::Send { bits } => self.send_next_bit(bits),
            Phase::MasterAck { acked: true } => self.send_next_bit(0),
            Phase::MasterAck { acked: false } => self.phase = Phase::Idle,
            _ => {}
        }
    }

    fn send_next_bit(&mut self, bits: u32) {
        let byte = if self.page == ID_PAGE { self.id[self.pointer as usize] } else { 0 };
        self.pull_low = byte & (0x80 >> bits) == 0;
        self.phase = Phase::Send { bits: bits + 1 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master as Linux's and DPDK's `ixgbe_read_i2c_byte_generic`: START, address+W, offset,
    /// repeated START, address+R, eight bits in, NACK, STOP. `None` where a byte is not ACKed.
    fn read_byte(m: &mut Sfp, address: u8, offset: u8) -> Option<u8> {
        let mut lines = (true, true);
        let mut set = |m: &mut Sfp, scl: bool, sda: bool| {
            lines = m.drive(scl, sda);
            lines
        };
        let start = |m: &mut Sfp, set: &mut dyn FnMut(&mut Sfp, bool, bool) -> (bool, bool)| {
            set(m, false, true);
            set(m, true, true);
            set(m, true, false);
            set(m, false, false);
        };
        let byte_out = |m: &mut Sfp, set: &mut dyn FnMut(&mut Sfp, bool, bool) -> (bool, bool), b: u8| {
            for i in (0..8).rev() {
                let bit = b >> i & 1 != 0;
                set(m, false, bit);
                set(m, true, bit);
                set(m, false, bit);
            }
            set(m, false, true);
            let ack = !set(m, true, true).1;
            set(m, false, true);
            ack
        };
        start(m, &mut set);
        if !byte_out(m, &mut set, address << 1) || !byte_out(m, &mut set, offset) {
            return None;
        }
        start(m, &mut set);
        if !byte_out(m, &mut set, address << 1 | 1) {
            return None;
        }
        let mut v = 0u8;
        for _ in 0..8 {
            v = v << 1 | u8::from(set(m, true, true).1);
            set(m, false, true);
        }
        set(m, false, true); // NACK
        set(m, true, true);
        set(m, false, true);
        set(m, false, false); // STOP
        set(m, true, false);
        set(m, true, true);
        Some(v)
    }

    #[test]
    fn a_bit_banged_read_returns_the_id_page() {
        let mut m = Sfp::default();
        let page = id_page();
        for offset in [0u8, 3, 8, 37, 38, 39, 63, 95] {
            assert_eq!(read_byte(&mut m, ID_PAGE, offset), Some(page[offset as usize]), "offset {offset}");
        }
        assert_eq!(read_byte(&mut m, 0x21, 0), None, "no device at another address");
        assert_eq!(read_byte(&mut m, ID_PAGE, 0), Some(0x03), "the bus is usable after a NACK");
        assert_eq!(read_byte(&mut Sfp::empty(), ID_PAGE, 0), None, "an empty cage never answers");
    }

    #[test]
    fn the_id_page_is_an_sr_module_with_valid_check_codes() {
        let p = id_page();
        assert_eq!((p[0], p[3]), (0x03, 0x10));
        assert_eq!(p[63], p[..63].iter().fold(0u8, |a, &b| a.wrapping_add(b)));
        assert_eq!(p[95], p[64..95].iter().fold(0u8, |a, &b| a.wrapping_add(b)));
    }
}
