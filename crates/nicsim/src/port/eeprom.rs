//! The NVM behind EERD and behind EEC's bit-banged serial interface: one image, read either
//! way [DS 5.2.3 (EEPROM), 8.2.3.2.1 (EEC), 8.2.3.2.2 (EERD)].

/// Words in the image. The card's is larger; words past these read 0xFFFF (erased).
pub const WORDS: usize = 128;
/// Word 0x2B: pointer to the SFP+ module init-sequence list (the `PHY_INIT_OFFSET_NL` that
/// Linux and DPDK read), word 0x2C: device capabilities (0: only Intel modules).
const SFP_LIST_POINTER: usize = 0x2B;
const SFP_LIST: usize = 0x60;
const SFP_DATA: usize = 0x70;

/// The image: firmware pointers that pass DPDK's version check, an SFP+ init-sequence list
/// whose entries (SR/LR for LAN 0 and LAN 1, the IDs Linux and DPDK look up) point at an
/// empty sequence, and a valid checksum (word 0x3F = 0xBABA − sum of words 0x00–0x3E).
pub fn image() -> [u16; WORDS] {
    let mut e = [0xFFFFu16; WORDS];
    e[..0x40].fill(0);
    e[0x0F] = 0x0040;
    e[0x40] = 0;
    e[0x44] = 0x004B;
    e[0x52] = 0x0006;
    e[SFP_LIST_POINTER] = SFP_LIST as u16;
    // Header word, then (module type, data pointer) pairs, then the end mark.
    let list = [0x0002, SFP_TYPE_SRLR_CORE0, SFP_DATA as u16, SFP_TYPE_SRLR_CORE1, SFP_DATA as u16, 0xFFFF];
    e[SFP_LIST..SFP_LIST + list.len()].copy_from_slice(&list);
    // Header word, then CORECTL values up to the end mark: none (nicsim has no analog core).
    e[SFP_DATA] = 0x0000;
    e[SFP_DATA + 1] = 0xFFFF;
    let sum = e[..0x3F].iter().fold(0u16, |a, &w| a.wrapping_add(w));
    e[0x3F] = 0xBABAu16.wrapping_sub(sum);
    e
}
/// The module types of the init-sequence list (`ixgbe_sfp_type_srlr_core0/1`).
const SFP_TYPE_SRLR_CORE0: u16 = 5;
const SFP_TYPE_SRLR_CORE1: u16 = 6;

/// SPI instructions a software bit-banger sends [DS 5.2.3; the EEPROM's own data sheet].
const READ: u8 = 0x03;
const READ_A8: u8 = 0x0B;
const RDSR: u8 = 0x05;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Instruction,
    Address,
    Read,
    Status,
    /// An instruction nicsim does not act on (writes: the image is read-only), until CS rises.
    Ignore,
}

/// The serial EEPROM as EEC's SK, CS and DI pins drive it: mode 0 (DI sampled on SK's rising
/// edge, DO changed on its falling edge), CS active low, 16-bit byte addresses (EEC.EE_ADDR_SIZE).
#[derive(Debug, Clone)]
pub struct SpiEeprom {
    sk: bool,
    phase: Phase,
    shift: u32,
    bits: u32,
    address: usize,
    out: u8,
    out_bits: u32,
    dout: bool,
}

impl Default for SpiEeprom {
    fn default() -> Self {
        SpiEeprom {
            sk: false,
            phase: Phase::Instruction,
            shift: 0,
            bits: 0,
            address: 0,
            out: 0,
            out_bits: 0,
            dout: false,
        }
    }
}

fn byte_of(image: &[u16; WORDS], address: usize) -> u8 {
    let word = image.get(address / 2).copied().unwrap_or(0xFFFF);
    // Words are stored low byte first.
    (word >> (8 * (address % 2))) as u8
}

impl SpiEeprom {
    /// The pins as the driver left them; returns DO.
    pub fn drive(&mut self, image: &[u16; WORDS], sk: bool, cs_high: bool, di: bool) -> bool {
        let (rising, falling) = (sk && !self.sk, !sk && self.sk);
        self.sk = sk;
        if cs_high {
            *self = SpiEeprom { sk, ..SpiEeprom::default() };
            return false;
        }
        if rising {
            self.sample(image, di);
        } else if falling && matches!(self.phase, Phase::Read | Phase::Status) {
            if self.out_bits == 8 {
                self.out_bits = 0;
                if self.phase == Phase::Read {
                    self.address = (self.address + 1) % (WORDS * 2);
                    self.out = byte_of(image, self.address);
                }
            }
            self.dout = self.out & (0x80 >> self.out_bits) != 0;
            self.out_bits += 1;
        }
        self.dout
    }

    fn sample(&mut self, image: &[u16; WORDS], di: bool) {
        if !matches!(self.phase, Phase::Instruction | Phase::Address) {
            return;
        }
        self.shift = (self.shift << 1) | u32::from(di);
        self.bits += 1;
        match (self.phase, self.bits) {
            (Phase::Instruction, 8) => {
                self.phase = match self.shift as u8 {
                    READ | READ_A8 => Phase::Address,
                    RDSR => {
                        // Status register: WIP (bit 0) clear, never write-enabled.
                        self.out = 0;
                        Phase::Status
                    }
                    _ => Phase::Ignore,
                };
                (self.shift, self.bits) = (0, 0);
            }
            (Phase::Address, 16) => {
                self.address = self.shift as usize % (WORDS * 2);
                self.phase = Phase::Read;
                self.out_bits = 0;
                self.out = byte_of(image, self.address);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bit-banger as Linux's and DPDK's `ixgbe_read_eeprom_bit_bang_generic`: status
    /// poll, then READ, a 16-bit byte address and 16 bits in, low byte first.
    fn read_word(e: &mut SpiEeprom, image: &[u16; WORDS], word: u16) -> (u8, u16) {
        let mut pins = |e: &mut SpiEeprom, sk, cs, di| e.drive(image, sk, cs, di);
        let out =
            |e: &mut SpiEeprom, pins: &mut dyn FnMut(&mut SpiEeprom, bool, bool, bool) -> bool, v: u32, n: u32| {
                for i in (0..n).rev() {
                    let di = v >> i & 1 != 0;
                    pins(e, false, false, di);
                    pins(e, true, false, di);
                    pins(e, false, false, di);
                }
            };
        let input = |e: &mut SpiEeprom, pins: &mut dyn FnMut(&mut SpiEeprom, bool, bool, bool) -> bool, n: u32| {
            let mut v = 0u32;
            for _ in 0..n {
                v = v << 1 | u32::from(pins(e, true, false, false));
                pins(e, false, false, false);
            }
            v
        };
        pins(e, false, true, false);
        pins(e, false, false, false);
        out(e, &mut pins, u32::from(RDSR), 8);
        let status = input(e, &mut pins, 8) as u8;
        pins(e, false, true, false);
        pins(e, false, false, false);
        out(e, &mut pins, u32::from(READ), 8);
        out(e, &mut pins, u32::from(word) * 2, 16);
        let w = input(e, &mut pins, 16) as u16;
        pins(e, false, true, false);
        (status, w.swap_bytes())
    }

    #[test]
    fn bit_banged_reads_return_the_words_eerd_returns() {
        let image = image();
        let mut e = SpiEeprom::default();
        for word in [0x00, 0x0F, 0x2B, 0x3F, 0x61, 0x7F] {
            assert_eq!(read_word(&mut e, &image, word), (0, image[word as usize]), "word {word:#x}");
        }
    }

    #[test]
    fn the_image_checksum_and_sfp_list_are_what_drivers_look_for() {
        let e = image();
        let sum = e[..0x40].iter().fold(0u16, |a, &w| a.wrapping_add(w));
        assert_eq!(sum, 0xBABA);
        let list = e[SFP_LIST_POINTER] as usize;
        assert_eq!(&e[list + 1..list + 6], &[5, SFP_DATA as u16, 6, SFP_DATA as u16, 0xFFFF]);
        assert_eq!(e[SFP_DATA + 1], 0xFFFF, "an empty CORECTL sequence");
    }
}
