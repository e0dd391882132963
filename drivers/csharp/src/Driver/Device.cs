// Device bring-up and queue set-up, in the order of the other drivers (the datasheet's, as
// TinyNF does it). Register offsets and bits cite the 82599 datasheet.
using System.Threading;
using Safenic.Kernel;

namespace Safenic.Driver
{
    public sealed class Device
    {
        public const uint Bar0Length = 0x20000;
        public const int MaxQueues = 64;
        public const uint AllOnes = 0xFFFFFFFF;
        // Flow control: bytes kept free above the XOFF mark, and the pause time.
        public const uint FlowControlHeadroom = 0x6000;
        public const uint FlowControlPause = 0x680;

        // Registers [DS 8.2.3], as byte offsets.
        private const uint CTRL = 0x00000, CTRL_MASTER_DISABLE = 1u << 2, CTRL_RST = 1u << 26; // [DS 8.2.3.1.1]
        private const uint STATUS = 0x00008, STATUS_MASTER_ENABLE = 1u << 19; // [DS 8.2.3.1.2]
        private const uint CTRL_EXT = 0x00018, CTRL_EXT_NS_DIS = 1u << 16; // [DS 8.2.3.1.3]
        private const uint EIMC = 0x00888; // [DS 8.2.3.5.4]
        private const uint EEC = 0x10010, EEC_PRES = 1u << 8, EEC_AUTO_RD = 1u << 9; // [DS 8.2.3.2.1]
        private const uint FWSM = 0x10148, FWSM_EXT_ERR_IND = 0x3Fu << 19;
        private const uint RDRXCTL = 0x02F00, RDRXCTL_CRCSTRIP = 1u << 1, RDRXCTL_DMAIDONE = 1u << 3; // [DS 8.2.3.8.8]
        private const uint RDRXCTL_RSCFRSTSIZE = 0x1Fu << 17, RDRXCTL_RSCACKC = 1u << 25, RDRXCTL_FCOE_WRFIX = 1u << 26;
        private const uint RXCTRL = 0x03000, RXCTRL_RXEN = 1; // [DS 8.2.3.8.10]
        private const uint FCTRL = 0x05080, FCTRL_MPE = 1u << 8, FCTRL_UPE = 1u << 9, FCTRL_BAM = 1u << 10; // [DS 8.2.3.7.1]
        private const uint HLREG0 = 0x04240, HLREG0_TXCRCEN = 1, HLREG0_RXCRCSTRP = 1u << 1, HLREG0_TXPADEN = 1u << 10; // [DS 8.2.3.22.8]
        private const uint LINKS = 0x042A4, LINKS_UP = 1u << 30; // [DS 8.2.3.22.20]
        private const uint SECRXCTRL = 0x08D00, SECRXCTRL_RX_DIS = 1u << 1, SECRXSTAT = 0x08D04, SECRXSTAT_RDY = 1; // [DS 8.2.3.12.1]
        private const uint DMATXCTL = 0x04A80, DMATXCTL_TE = 1, DTXMXSZRQ = 0x08100; // [DS 8.2.3.9.2]
        private const uint RTTDCS = 0x04900, RTTDCS_ARBDIS = 1u << 6, RTTDQSEL = 0x04904, RTTDT1C = 0x04908; // [DS 8.2.3.10.2]
        private const uint MFLCN = 0x04294, MFLCN_RFCE = 1u << 3; // [DS 8.2.3.22.34]
        private const uint FCCFG = 0x03D00, FCCFG_TFCE_MASK = 0x3u << 3, FCCFG_TFCE_802_3X = 1u << 3; // [DS 8.2.3.3.7]
        private const uint TXPBTHRESH0 = 0x04950;
        private const uint FCTTV0 = 0x03200, FCRTL0 = 0x03220, FCRTL_XONE = 1u << 31; // [DS 8.2.3.3.2, 8.2.3.3.3]
        private const uint FCRTH0 = 0x03260, FCRTH_FCEN = 1u << 31, FCRTV = 0x032A0; // [DS 8.2.3.3.4, 8.2.3.3.5]
        private const uint RXDCTL_ENABLE = 1u << 25, TXDCTL_ENABLE = 1u << 25;
        private const uint SRRCTL_BSIZEPACKET_MASK = 0x1F, SRRCTL_DROP_EN = 1u << 28;
        private const uint DCA_RXCTRL_RELAXED_WRITE = 1u << 12, DCA_TXCTRL_RELAXED_WRITE = 1u << 11, TDWBAL_HEAD_WB_EN = 1;

        private static uint EIMC_EX(uint n) => 0x00AB0 + 4 * n;
        private static uint RXPBSIZE(uint n) => 0x03C00 + 4 * n;
        private static uint TXPBSIZE(uint n) => 0x0CC00 + 4 * n;
        private static uint PFUTA(uint n) => 0x0F400 + 4 * n;
        private static uint PFVLVFB(uint n) => 0x0F200 + 4 * n;
        private static uint MTA(uint n) => 0x05200 + 4 * n;
        private static uint FTQF(uint n) => 0x0E600 + 4 * n;
        private static uint PFVLVF(uint n) => 0x0F100 + 4 * n;
        private static uint MPSAR(uint n) => 0x0A600 + 4 * n;
        // Queue registers for queues 0-63 [DS 8.2.3.8, 8.2.3.9].
        private static uint RDBAL(uint q) => 0x01000 + 0x40 * q;
        private static uint RDBAH(uint q) => 0x01004 + 0x40 * q;
        private static uint RDLEN(uint q) => 0x01008 + 0x40 * q;
        private static uint DCA_RXCTRL(uint q) => 0x0100C + 0x40 * q;
        private static uint SRRCTL(uint q) => 0x01014 + 0x40 * q;
        private static uint RDT(uint q) => 0x01018 + 0x40 * q;
        private static uint RXDCTL(uint q) => 0x01028 + 0x40 * q;
        private static uint TDBAL(uint q) => 0x06000 + 0x40 * q;
        private static uint TDBAH(uint q) => 0x06004 + 0x40 * q;
        private static uint TDLEN(uint q) => 0x06008 + 0x40 * q;
        private static uint DCA_TXCTRL(uint q) => 0x0600C + 0x40 * q;
        private static uint TDT(uint q) => 0x06018 + 0x40 * q;
        private static uint TXDCTL(uint q) => 0x06028 + 0x40 * q;
        private static uint TDWBAL(uint q) => 0x06038 + 0x40 * q;
        private static uint TDWBAH(uint q) => 0x0603C + 0x40 * q;

        public readonly string Address;
        private readonly Bar regs;

        private Device(string address, Bar regs)
        {
            Address = address;
            this.regs = regs;
        }

        public static Device Open(string sysfs, string address)
        {
            PciFunction f = PciFunction.Open(sysfs, address, 0x8086, 0x10FB, "an Intel 82599ES (8086:10fb)");
            return new Device(f.Address, f.MapBar0(Bar0Length));
        }

        private uint Read(uint offset) => regs.Read(offset);

        private void Write(uint offset, uint value) => regs.Write(offset, value);

        private void Set(uint offset, uint bits) => Write(offset, Read(offset) | bits);

        private void Clear(uint offset, uint bits) => Write(offset, Read(offset) & ~bits);

        // STATUS never reads all-ones from a present 82599 (its reserved bits read 0
        // [DS 8.2.3.1.2]); a removed device returns all-ones for every read.
        public bool Present => Read(STATUS) != AllOnes;

        public string GoneMessage => Address + ": the device is gone (its registers read all-ones): it was removed, or nicsim stopped; "
            + "start the driver again once it is back";

        // Waits until (register & mask) == want, polling every 10 µs, for at most `seconds`.
        private void Wait(uint offset, uint mask, uint want, string what, double seconds)
        {
            double deadline = Host.Seconds + seconds;
            uint value;
            while (((value = Read(offset)) & mask) != want)
            {
                if (value == AllOnes && !Present)
                {
                    throw Fail.Die(GoneMessage);
                }
                if (Host.Seconds > deadline)
                {
                    throw Fail.Die(Address + ": timed out waiting for " + what + ": check the cable and that no other program drives this port");
                }
                Thread.Sleep(0);
            }
        }

        // Clears ENABLE in `control` and polls until it reads 0, for at most a second; never
        // ends the program (it runs while the program exits).
        private void StopQueue(uint control)
        {
            Clear(control, RXDCTL_ENABLE); // the same bit as TXDCTL.ENABLE
            double deadline = Host.Seconds + 1;
            while ((Read(control) & RXDCTL_ENABLE) != 0)
            {
                if (Host.Seconds > deadline)
                {
                    System.Console.Error.WriteLine(Address + ": a queue did not stop within 1 s");
                    return;
                }
                Thread.Sleep(0);
            }
        }

        // Disables every enabled queue and waits until the device confirms, before the memory its
        // rings and buffers are in can go [DS 4.6.7.1.2, 4.6.8]. A device that is gone DMAs nothing.
        public void StopQueues()
        {
            if (!Present)
            {
                return;
            }
            for (uint q = 0; q < MaxQueues; q++)
            {
                if ((Read(RXDCTL(q)) & RXDCTL_ENABLE) != 0)
                {
                    StopQueue(RXDCTL(q));
                }
                if ((Read(TXDCTL(q)) & TXDCTL_ENABLE) != 0)
                {
                    StopQueue(TXDCTL(q));
                }
            }
        }

        public void Init()
        {
            // Stop receive queues before master disable [DS 4.6.7.1.2].
            for (uint q = 0; q < MaxQueues; q++)
            {
                Clear(RXDCTL(q), RXDCTL_ENABLE);
                Wait(RXDCTL(q), RXDCTL_ENABLE, 0, "RXDCTL.ENABLE to clear", 1);
            }
            Thread.Sleep(1);
            // Master disable, then wait for outstanding requests [DS 5.2.5.3.2].
            Set(CTRL, CTRL_MASTER_DISABLE);
            Wait(STATUS, STATUS_MASTER_ENABLE, 0, "STATUS.PCIe master enable to clear", 1);
            // Software reset [DS 4.2.1.6.1]; wait at least 1 ms, then 10 ms more [DS 4.6.3.2].
            Set(CTRL, CTRL_RST);
            Wait(CTRL, CTRL_RST, 0, "CTRL.RST to clear", 1);
            Thread.Sleep(10);
            // Interrupts off [DS 4.6.3.1].
            Write(EIMC, 0x7FFFFFFF);
            Write(EIMC_EX(0), 0xFFFFFFFF);
            Write(EIMC_EX(1), 0xFFFFFFFF);
            // Flow-control high water mark so it can be enabled [DS 4.6.11.3.4].
            Write(FCRTH0, ((512u * 1024 - 0x6000) / 32) << 5);
            // EEPROM auto-read done and valid [DS 4.6.3].
            Wait(EEC, EEC_AUTO_RD, EEC_AUTO_RD, "EEC.AUTO_RD (EEPROM read done)", 1);
            if ((Read(EEC) & EEC_PRES) == 0 || (Read(FWSM) & FWSM_EXT_ERR_IND) != 0)
            {
                throw Fail.Die(Address + ": the EEPROM is missing or invalid: this port cannot be used without firmware repair");
            }
            // DMA init done [DS 4.6.3].
            Wait(RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE, "RDRXCTL.DMAIDONE", 1);
            // Receive filters and tables to a known state [DS 4.6.10].
            for (uint n = 0; n < 128; n++)
            {
                Write(PFUTA(n), 0);
                Write(PFVLVFB(n), 0);
                Write(MTA(n), 0);
                Clear(FTQF(n), 1u << 31);
            }
            for (uint n = 0; n < 64; n++)
            {
                Write(PFVLVF(n), 0);
            }
            for (uint n = 0; n < 256; n++)
            {
                Write(MPSAR(n), n == 0 ? 1u : 0u);
            }
            // CRC strip in both places, RSC off, FCoE write fix [DS 4.6.7, 8.2.3.8.8].
            Write(RDRXCTL, (Read(RDRXCTL) | RDRXCTL_CRCSTRIP | RDRXCTL_RSCACKC | RDRXCTL_FCOE_WRFIX) & ~RDRXCTL_RSCFRSTSIZE);
            Set(HLREG0, HLREG0_RXCRCSTRP | HLREG0_TXCRCEN | HLREG0_TXPADEN);
            // DCB and VT off: one packet buffer [DS 4.6.11.3.4].
            for (uint n = 1; n < 8; n++)
            {
                Write(RXPBSIZE(n), 0);
                Write(TXPBSIZE(n), 0);
            }
            Set(MFLCN, MFLCN_RFCE);
            Write(FCCFG, (Read(FCCFG) & ~FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
            for (uint q = 0; q < 128; q++)
            {
                Write(RTTDQSEL, q);
                Write(RTTDT1C, 0);
            }
            // TX global settings [DS 4.6.11.3.4, 8.2.3.9.16].
            Write(TXPBTHRESH0, (Read(TXPBTHRESH0) & ~0x3FFu) | (0xA0u - 2));
            Write(DTXMXSZRQ, 0xFFF);
            Clear(RTTDCS, RTTDCS_ARBDIS);
            Set(CTRL_EXT, CTRL_EXT_NS_DIS);
            // Promiscuous: change filters only with receive off [DS 8.2.3.7.1].
            uint rxen = Read(RXCTRL) & RXCTRL_RXEN;
            Clear(RXCTRL, RXCTRL_RXEN);
            Set(FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM);
            Set(RXCTRL, rxen);
        }

        // IEEE 802.3x flow control [DS 3.7.7, 8.2.3.3]: XOFF when packet buffer 0 is within
        // FlowControlHeadroom bytes of full, XON below half of that mark; receive queues set up
        // afterwards wait instead of dropping (no SRRCTL.DROP_EN).
        public void EnableFlowControl()
        {
            uint buffer = ((Read(RXPBSIZE(0)) >> 10) & 0x3FF) * 1024;
            uint high = (buffer > FlowControlHeadroom ? buffer - FlowControlHeadroom : 0) & ~0x1Fu;
            Write(FCRTL0, ((high / 2) & ~0x1Fu) | FCRTL_XONE);
            Write(FCRTH0, high | FCRTH_FCEN);
            // Pause time in quanta of 512 bit times, refreshed at half of it, as DPDK and Linux do.
            Write(FCTTV0, FlowControlPause);
            Write(FCRTV, FlowControlPause / 2);
            Set(MFLCN, MFLCN_RFCE);
            Write(FCCFG, (Read(FCCFG) & ~FCCFG_TFCE_MASK) | FCCFG_TFCE_802_3X);
        }

        public void WaitForLink(double seconds) => Wait(LINKS, LINKS_UP, LINKS_UP, "link up", seconds);

        // Enables the receive path once a queue is ready [DS 4.6.7, 8.2.3.12.1].
        private void StartReceive()
        {
            if ((Read(RXCTRL) & RXCTRL_RXEN) != 0)
            {
                return;
            }
            Set(SECRXCTRL, SECRXCTRL_RX_DIS);
            Wait(SECRXSTAT, SECRXSTAT_RDY, SECRXSTAT_RDY, "SECRXSTAT.SECRX_RDY", 1);
            Set(RXCTRL, RXCTRL_RXEN);
            Clear(SECRXCTRL, SECRXCTRL_RX_DIS);
        }

        // RX queue 0 on a ring of RingIndex.Size legacy descriptors; returns RDT.
        public Register SetInput(ulong ringPhys, RingIndex tail)
        {
            if ((Read(RXDCTL(0)) & RXDCTL_ENABLE) != 0)
            {
                throw Fail.Die(Address + ": no free RX queue 0 left: use fewer outputs");
            }
            Write(RDBAH(0), (uint)(ringPhys >> 32));
            Write(RDBAL(0), (uint)ringPhys);
            Write(RDLEN(0), DescriptorRing.Bytes);
            // Drop when no descriptor is free, unless flow control makes frames wait instead.
            uint dropEn = (Read(FCRTH0) & FCRTH_FCEN) != 0 ? 0 : SRRCTL_DROP_EN;
            Write(SRRCTL(0), (Read(SRRCTL(0)) & ~(SRRCTL_BSIZEPACKET_MASK | SRRCTL_DROP_EN)) | (Packet.Size / 1024) | dropEn);
            Set(RXDCTL(0), RXDCTL_ENABLE);
            Wait(RXDCTL(0), RXDCTL_ENABLE, RXDCTL_ENABLE, "RXDCTL.ENABLE", 1);
            Write(RDT(0), tail.Value);
            StartReceive();
            // No relaxed ordering of descriptor write-back [DS 8.2.3.11.1].
            Clear(DCA_RXCTRL(0), DCA_RXCTRL_RELAXED_WRITE);
            return regs.Register(RDT(0));
        }

        // The first disabled TX queue on a ring of RingIndex.Size descriptors; returns its TDT.
        public Register AddOutput(ulong ringPhys, ulong headPhys)
        {
            uint q = 0;
            while (q < MaxQueues && (Read(TXDCTL(q)) & TXDCTL_ENABLE) != 0)
            {
                q++;
            }
            if (q == MaxQueues)
            {
                throw Fail.Die(Address + ": no free TX queue left: use fewer outputs");
            }
            Write(TDBAH(q), (uint)(ringPhys >> 32));
            Write(TDBAL(q), (uint)ringPhys);
            Write(TDLEN(q), DescriptorRing.Bytes);
            // PTHRESH 60, HTHRESH 4 as TinyNF [DS 8.2.3.9.10].
            Write(TXDCTL(q), (Read(TXDCTL(q)) & ~0x7F7Fu) | 60u | (4u << 8));
            Write(TDWBAH(q), (uint)(headPhys >> 32));
            Write(TDWBAL(q), (uint)headPhys | TDWBAL_HEAD_WB_EN);
            Clear(DCA_TXCTRL(q), DCA_TXCTRL_RELAXED_WRITE);
            Set(DMATXCTL, DMATXCTL_TE);
            Set(TXDCTL(q), TXDCTL_ENABLE);
            Wait(TXDCTL(q), TXDCTL_ENABLE, TXDCTL_ENABLE, "TXDCTL.ENABLE", 1);
            return regs.Register(TDT(q));
        }
    }
}
