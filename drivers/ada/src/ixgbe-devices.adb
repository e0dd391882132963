with Platform; use Platform;

package body Ixgbe.Devices is

   type Offset is range 0 .. Bar0_Bytes - 4;
   Max_Queues : constant := 64;
   type Queue is range 0 .. Max_Queues - 1;

   --  Registers [82599 datasheet 8.2.3], as byte offsets.
   CTRL : constant Offset := 16#00000#; -- [8.2.3.1.1]
   CTRL_MASTER_DISABLE : constant Unsigned_32 := 2 ** 2;
   CTRL_RST : constant Unsigned_32 := 2 ** 26;
   STATUS : constant Offset := 16#00008#; -- [8.2.3.1.2]
   STATUS_MASTER_ENABLE : constant Unsigned_32 := 2 ** 19;
   CTRL_EXT : constant Offset := 16#00018#; -- [8.2.3.1.3]
   CTRL_EXT_NS_DIS : constant Unsigned_32 := 2 ** 16;
   EIMC : constant Offset := 16#00888#; -- [8.2.3.5.4]
   EEC : constant Offset := 16#10010#; -- [8.2.3.2.1]
   EEC_PRES : constant Unsigned_32 := 2 ** 8;
   EEC_AUTO_RD : constant Unsigned_32 := 2 ** 9;
   FWSM : constant Offset := 16#10148#;
   FWSM_EXT_ERR_IND : constant Unsigned_32 := 16#3F# * 2 ** 19;
   RDRXCTL : constant Offset := 16#02F00#; -- [8.2.3.8.8]
   RDRXCTL_CRCSTRIP : constant Unsigned_32 := 2 ** 1;
   RDRXCTL_DMAIDONE : constant Unsigned_32 := 2 ** 3;
   RDRXCTL_RSCFRSTSIZE : constant Unsigned_32 := 16#1F# * 2 ** 17;
   RDRXCTL_RSCACKC : constant Unsigned_32 := 2 ** 25;
   RDRXCTL_FCOE_WRFIX : constant Unsigned_32 := 2 ** 26;
   RXCTRL : constant Offset := 16#03000#; -- [8.2.3.8.10]
   RXCTRL_RXEN : constant Unsigned_32 := 1;
   FCTRL : constant Offset := 16#05080#; -- [8.2.3.7.1]
   FCTRL_MPE : constant Unsigned_32 := 2 ** 8;
   FCTRL_UPE : constant Unsigned_32 := 2 ** 9;
   FCTRL_BAM : constant Unsigned_32 := 2 ** 10;
   HLREG0 : constant Offset := 16#04240#; -- [8.2.3.22.8]
   HLREG0_TXCRCEN : constant Unsigned_32 := 2 ** 0;
   HLREG0_RXCRCSTRP : constant Unsigned_32 := 2 ** 1;
   HLREG0_TXPADEN : constant Unsigned_32 := 2 ** 10;
   LINKS : constant Offset := 16#042A4#; -- [8.2.3.22.20]
   LINKS_UP : constant Unsigned_32 := 2 ** 30;
   SECRXCTRL : constant Offset := 16#08D00#; -- [8.2.3.12.1]
   SECRXCTRL_RX_DIS : constant Unsigned_32 := 2 ** 1;
   SECRXSTAT : constant Offset := 16#08D04#;
   SECRXSTAT_RDY : constant Unsigned_32 := 1;
   DMATXCTL : constant Offset := 16#04A80#; -- [8.2.3.9.2]
   DMATXCTL_TE : constant Unsigned_32 := 1;
   DTXMXSZRQ : constant Offset := 16#08100#;
   RTTDCS : constant Offset := 16#04900#; -- [8.2.3.10.2]
   RTTDCS_ARBDIS : constant Unsigned_32 := 2 ** 6;
   RTTDQSEL : constant Offset := 16#04904#;
   RTTDT1C : constant Offset := 16#04908#;
   MFLCN : constant Offset := 16#04294#; -- [8.2.3.22.34]
   MFLCN_RFCE : constant Unsigned_32 := 2 ** 3;
   FCCFG : constant Offset := 16#03D00#; -- [8.2.3.3.7]
   FCCFG_TFCE_MASK : constant Unsigned_32 := 3 * 2 ** 3;
   FCCFG_TFCE_802_3X : constant Unsigned_32 := 2 ** 3;
   TXPBTHRESH0 : constant Offset := 16#04950#;
   FCTTV0 : constant Offset := 16#03200#; -- [8.2.3.3.2]
   FCRTL0 : constant Offset := 16#03220#; -- [8.2.3.3.3]
   FCRTL_XONE : constant Unsigned_32 := 2 ** 31;
   FCRTH0 : constant Offset := 16#03260#; -- [8.2.3.3.4]
   FCRTH_FCEN : constant Unsigned_32 := 2 ** 31;
   FCRTV : constant Offset := 16#032A0#; -- [8.2.3.3.5]
   SRRCTL_BSIZEPACKET_MASK : constant Unsigned_32 := 16#1F#;
   SRRCTL_DROP_EN : constant Unsigned_32 := 2 ** 28;
   RXDCTL_ENABLE : constant Unsigned_32 := 2 ** 25;
   TXDCTL_ENABLE : constant Unsigned_32 := 2 ** 25;
   RXCSUM : constant Offset := 16#05000#; -- [8.2.3.7.5]
   RXCSUM_PCSD : constant Unsigned_32 := 2 ** 13;
   MRQC : constant Offset := 16#05818#; -- [8.2.3.7.12]
   MRQC_RSS : constant Unsigned_32 := 1;
   --  Hash IPv4 TCP, IPv4, IPv6, IPv6 TCP, IPv4 UDP and IPv6 UDP.
   MRQC_FIELDS : constant Unsigned_32 := 2 ** 16 or 2 ** 17 or 2 ** 20 or 2 ** 21 or 2 ** 22 or 2 ** 23;
   DCA_RXCTRL_RELAXED_WRITE : constant Unsigned_32 := 2 ** 12;
   DCA_TXCTRL_RELAXED_WRITE : constant Unsigned_32 := 2 ** 11;
   TDWBAL_HEAD_WB_EN : constant Unsigned_32 := 1;

   function EIMC_EX (N : Offset) return Offset is (16#00AB0# + 4 * N);
   function RXPBSIZE (N : Offset) return Offset is (16#03C00# + 4 * N);
   function TXPBSIZE (N : Offset) return Offset is (16#0CC00# + 4 * N);
   function PFUTA (N : Offset) return Offset is (16#0F400# + 4 * N);
   function PFVLVFB (N : Offset) return Offset is (16#0F200# + 4 * N);
   function MTA (N : Offset) return Offset is (16#05200# + 4 * N);
   function FTQF (N : Offset) return Offset is (16#0E600# + 4 * N);
   function PFVLVF (N : Offset) return Offset is (16#0F100# + 4 * N);
   function MPSAR (N : Offset) return Offset is (16#0A600# + 4 * N);
   function RETA (N : Offset) return Offset is (16#05C00# + 4 * N); -- [8.2.3.7.14]
   function RSSRK (N : Offset) return Offset is (16#05C80# + 4 * N); -- [8.2.3.7.15]
   function RQSMR (N : Offset) return Offset is (16#02300# + 4 * N); -- [8.2.3.8.9]
   --  Queue registers for queues 0-63 [82599 datasheet 8.2.3.8, 8.2.3.9].
   function RDBAL (Q : Queue) return Offset is (16#01000# + 16#40# * Offset (Q));
   function RDBAH (Q : Queue) return Offset is (16#01004# + 16#40# * Offset (Q));
   function RDLEN (Q : Queue) return Offset is (16#01008# + 16#40# * Offset (Q));
   function DCA_RXCTRL (Q : Queue) return Offset is (16#0100C# + 16#40# * Offset (Q));
   function SRRCTL (Q : Queue) return Offset is (16#01014# + 16#40# * Offset (Q));
   function RDT (Q : Queue) return Offset is (16#01018# + 16#40# * Offset (Q));
   function RXDCTL (Q : Queue) return Offset is (16#01028# + 16#40# * Offset (Q));
   function TDBAL (Q : Queue) return Offset is (16#06000# + 16#40# * Offset (Q));
   function TDBAH (Q : Queue) return Offset is (16#06004# + 16#40# * Offset (Q));
   function TDLEN (Q : Queue) return Offset is (16#06008# + 16#40# * Offset (Q));
   function DCA_TXCTRL (Q : Queue) return Offset is (16#0600C# + 16#40# * Offset (Q));
   function TDT (Q : Queue) return Offset is (16#06018# + 16#40# * Offset (Q));
   function TXDCTL (Q : Queue) return Offset is (16#06028# + 16#40# * Offset (Q));
   function TDWBAL (Q : Queue) return Offset is (16#06038# + 16#40# * Offset (Q));
   function TDWBAH (Q : Queue) return Offset is (16#0603C# + 16#40# * Offset (Q));

   --  What every register of a removed device reads.
   All_Ones : constant Unsigned_32 := 16#FFFF_FFFF#;

   function Index (At_Offset : Offset) return Register_Index is (Register_Index (At_Offset / 4));

   function Read (D : Device; At_Offset : Offset) return Unsigned_32 is
     (Unsigned_32 (D.Regs (Index (At_Offset))));

   procedure Write (D : Device; At_Offset : Offset; Value : Unsigned_32) is
   begin
      D.Regs (Index (At_Offset)) := Register (Value);
   end Write;

   procedure Set (D : Device; At_Offset : Offset; Bits : Unsigned_32) is
   begin
      Write (D, At_Offset, Read (D, At_Offset) or Bits);
   end Set;

   procedure Clear (D : Device; At_Offset : Offset; Bits : Unsigned_32) is
   begin
      Write (D, At_Offset, Read (D, At_Offset) and not Bits);
   end Clear;

   function Open (Root, Address : String) return Device is
      F : constant Pci_Function := Platform.Pci.Open (Root, Address, 16#8086#, 16#10FB#,
                                                      "an Intel 82599ES (8086:10fb)");
   begin
      return (Regs => Map_Bar0 (F), Address => F.Address);
   end Open;

   --  STATUS never reads all-ones from a present 82599 (its reserved bits read 0 [8.2.3.1.2]); a
   --  removed device returns all-ones for every read.
   function Present (D : Device) return Boolean is (Read (D, STATUS) /= All_Ones);

   function Gone_Message (D : Device) return String is
     (D.Address & ": the device is gone (its registers read all-ones): it was removed, or nicsim"
      & " stopped; start the driver again once it is back");

   --  Waits until (register and Mask) = Want, polling every 10 us, for at most Timeout seconds.
   procedure Wait (D : Device; At_Offset : Offset; Mask, Want : Unsigned_32; What : String;
                   Timeout : Long_Float := 1.0)
   is
      Deadline : constant Long_Float := Now + Timeout;
      Value : Unsigned_32;
   begin
      loop
         Value := Read (D, At_Offset);
         exit when (Value and Mask) = Want;
         if Value = All_Ones and then not Present (D) then
            Die (Gone_Message (D));
         end if;
         if Now > Deadline then
            Die (D.Address & ": timed out waiting for " & What & ": check the cable and that no other"
                 & " program drives this port");
         end if;
         Sleep_Microseconds (10);
      end loop;
   end Wait;

   --  Clears ENABLE in Control and polls until it reads 0, for at most a second; never dies (it
   --  runs while the program exits).
   procedure Stop_Queue (D : Device; Control : Offset) is
      Deadline : constant Long_Float := Now + 1.0;
   begin
      Clear (D, Control, RXDCTL_ENABLE); -- the same bit as TXDCTL.ENABLE
      while (Read (D, Control) and RXDCTL_ENABLE) /= 0 loop
         if Now > Deadline then
            Warn (D.Address & ": a queue did not stop within 1 s");
            return;
         end if;
         Sleep_Microseconds (10);
      end loop;
   end Stop_Queue;

   procedure Stop_Queues (D : Device) is
   begin
      --  Disable every enabled queue and wait until the device confirms, before the memory its
      --  rings and buffers are in can go [4.6.7.1.2, 4.6.8]. A device that is gone DMAs nothing.
      if not Present (D) then
         return;
      end if;
      for Q in Queue loop
         if (Read (D, RXDCTL (Q)) and RXDCTL_ENABLE) /= 0 then
            Stop_Queue (D, RXDCTL (Q));
         end if;
         if (Read (D, TXDCTL (Q)) and TXDCTL_ENABLE) /= 0 then
            Stop_Queue (D, TXDCTL (Q));
         end if;
      end loop;
   end Stop_Queues;

   procedure Init (D : Device) is
   begin
      --  Stop receive queues before master disable [4.6.7.1.2].
      for Q in Queue loop
         Clear (D, RXDCTL (Q), RXDCTL_ENABLE);
         Wait (D, RXDCTL (Q), RXDCTL_ENABLE, 0, "RXDCTL.ENABLE to clear");
      end loop;
      Sleep_Microseconds (100);
      --  Master disable, then wait for outstanding requests [5.2.5.3.2].
      Set (D, CTRL, CTRL_MASTER_DISABLE);
      Wait (D, STATUS, STATUS_MASTER_ENABLE, 0, "STATUS.PCIe master enable to clear");
      --  Software reset [4.2.1.6.1]; wait at least 1 ms, then 10 ms more [4.6.3.2].
      Set (D, CTRL, CTRL_RST);
      Wait (D, CTRL, CTRL_RST, 0, "CTRL.RST to clear");
      Sleep_Microseconds (10_000);
      --  Interrupts off [4.6.3.1].
      Write (D, EIMC, 16#7FFF_FFFF#);
      Write (D, EIMC_EX (0), All_Ones);
      Write (D, EIMC_EX (1), All_Ones);
      --  Flow-control high water mark so it can be enabled [4.6.11.3.4].
      Write (D, FCRTH0, ((512 * 1024 - 16#6000#) / 32) * 2 ** 5);
      --  EEPROM auto-read done and valid [4.6.3].
      Wait (D, EEC, EEC_AUTO_RD, EEC_AUTO_RD, "EEC.AUTO_RD (EEPROM read done)");
      if (Read (D, EEC) and EEC_PRES) = 0 or else (Read (D, FWSM) and FWSM_EXT_ERR_IND) /= 0 then
         Die (D.Address & ": the EEPROM is missing or invalid: this port cannot be used without"
              & " firmware repair");
      end if;
      --  DMA init done [4.6.3].
      Wait (D, RDRXCTL, RDRXCTL_DMAIDONE, RDRXCTL_DMAIDONE, "RDRXCTL.DMAIDONE");
      --  Receive filters and tables to a known state [4.6.10].
      for N in Offset range 0 .. 127 loop
         Write (D, PFUTA (N), 0);
         Write (D, PFVLVFB (N), 0);
         Write (D, MTA (N), 0);
         Clear (D, FTQF (N), 2 ** 31);
      end loop;
      for N in Offset range 0 .. 63 loop
         Write (D, PFVLVF (N), 0);
      end loop;
      for N in Offset range 0 .. 255 loop
         Write (D, MPSAR (N), (if N = 0 then 1 else 0));
      end loop;
      --  CRC strip in both places, RSC off, FCoE write fix [4.6.7, 8.2.3.8.8].
      Write (D, RDRXCTL, (Read (D, RDRXCTL) or RDRXCTL_CRCSTRIP or RDRXCTL_RSCACKC
                          or RDRXCTL_FCOE_WRFIX) and not RDRXCTL_RSCFRSTSIZE);
      Set (D, HLREG0, HLREG0_RXCRCSTRP or HLREG0_TXCRCEN or HLREG0_TXPADEN);
      --  DCB and VT off: one packet buffer [4.6.11.3.4].
      for N in Offset range 1 .. 7 loop
         Write (D, RXPBSIZE (N), 0);
         Write (D, TXPBSIZE (N), 0);
      end loop;
      Set (D, MFLCN, MFLCN_RFCE);
      Write (D, FCCFG, (Read (D, FCCFG) and not FCCFG_TFCE_MASK) or FCCFG_TFCE_802_3X);
      for Q in Unsigned_32 range 0 .. 127 loop
         Write (D, RTTDQSEL, Q);
         Write (D, RTTDT1C, 0);
      end loop;
      --  TX global settings [4.6.11.3.4, 8.2.3.9.16].
      Write (D, TXPBTHRESH0, (Read (D, TXPBTHRESH0) and not 16#3FF#) or (16#A0# - 2));
      Write (D, DTXMXSZRQ, 16#FFF#);
      Clear (D, RTTDCS, RTTDCS_ARBDIS);
      Set (D, CTRL_EXT, CTRL_EXT_NS_DIS);
      --  Promiscuous: change filters only with receive off [8.2.3.7.1].
      declare
         Receiving : constant Unsigned_32 := Read (D, RXCTRL) and RXCTRL_RXEN;
      begin
         Clear (D, RXCTRL, RXCTRL_RXEN);
         Set (D, FCTRL, FCTRL_UPE or FCTRL_MPE or FCTRL_BAM);
         Set (D, RXCTRL, Receiving);
      end;
   end Init;

   procedure Enable_Flow_Control (D : Device) is
      Buffer : constant Unsigned_32 := (Shift_Right (Read (D, RXPBSIZE (0)), 10) and 16#3FF#) * 1024;
      High : constant Unsigned_32 :=
        (if Buffer > Flow_Control_Headroom then Buffer - Flow_Control_Headroom else 0) and not 16#1F#;
   begin
      Write (D, FCRTL0, ((High / 2) and not 16#1F#) or FCRTL_XONE);
      Write (D, FCRTH0, High or FCRTH_FCEN);
      --  Pause time in quanta of 512 bit times, refreshed at half of it, as DPDK and Linux do.
      Write (D, FCTTV0, Flow_Control_Pause);
      Write (D, FCRTV, Flow_Control_Pause / 2);
      Set (D, MFLCN, MFLCN_RFCE);
      Write (D, FCCFG, (Read (D, FCCFG) and not FCCFG_TFCE_MASK) or FCCFG_TFCE_802_3X);
   end Enable_Flow_Control;

   procedure Wait_For_Link (D : Device; Seconds : Positive) is
   begin
      Wait (D, LINKS, LINKS_UP, LINKS_UP, "link up", Long_Float (Seconds));
   end Wait_For_Link;

   --  Enables the receive path once a queue is ready [4.6.7, 8.2.3.12.1].
   procedure Start_Receive (D : Device) is
   begin
      if (Read (D, RXCTRL) and RXCTRL_RXEN) /= 0 then
         return;
      end if;
      Set (D, SECRXCTRL, SECRXCTRL_RX_DIS);
      Wait (D, SECRXSTAT, SECRXSTAT_RDY, SECRXSTAT_RDY, "SECRXSTAT.SECRX_RDY");
      Set (D, RXCTRL, RXCTRL_RXEN);
      Clear (D, SECRXCTRL, SECRXCTRL_RX_DIS);
   end Start_Receive;

   --  The RSS key: the datasheet's verification key [7.1.2.8.1], as the Rust and C drivers.
   type Key_Bytes is array (Offset range 0 .. 39) of Unsigned_8;
   Rss_Key : constant Key_Bytes :=
     (16#6d#, 16#5a#, 16#56#, 16#da#, 16#25#, 16#5b#, 16#0e#, 16#c2#, 16#41#, 16#67#, 16#25#, 16#3d#,
      16#43#, 16#a3#, 16#8f#, 16#b0#, 16#d0#, 16#ca#, 16#2b#, 16#cb#, 16#ae#, 16#7b#, 16#30#, 16#b4#,
      16#77#, 16#cb#, 16#2d#, 16#a3#, 16#80#, 16#30#, 16#f2#, 16#0c#, 16#6a#, 16#42#, 16#b7#, 16#3b#,
      16#be#, 16#ac#, 16#01#, 16#fa#);

   procedure Enable_Rss (D : Device; Queues : Rss_Queue_Count) is
      Word : Unsigned_32;
   begin
      --  RSSRK (N) holds key bytes 4N .. 4N + 3, the first in its low byte.
      for N in Offset range 0 .. 9 loop
         Word := 0;
         for K in Offset range 0 .. 3 loop
            Word := Word or Shift_Left (Unsigned_32 (Rss_Key (4 * N + K)), Natural (8 * K));
         end loop;
         Write (D, RSSRK (N), Word);
      end loop;
      --  RETA (N) holds entries 4N .. 4N + 3, the first in its low byte.
      for N in Offset range 0 .. 31 loop
         Word := 0;
         for K in Offset range 0 .. 3 loop
            Word := Word or Shift_Left (Unsigned_32 ((4 * N + K) mod Offset (Queues)), Natural (8 * K));
         end loop;
         Write (D, RETA (N), Word);
      end loop;
      --  Queue Q counts in QPRC (Q).
      for N in Offset range 0 .. Rss_Queues / 4 - 1 loop
         Word := Unsigned_32 (4 * N);
         Write (D, RQSMR (N), Word or Shift_Left (Word + 1, 8) or Shift_Left (Word + 2, 16)
                              or Shift_Left (Word + 3, 24));
      end loop;
      Set (D, RXCSUM, RXCSUM_PCSD);
      Write (D, MRQC, MRQC_RSS or MRQC_FIELDS);
   end Enable_Rss;

   function Free_Rx_Queue (D : Device) return Queue is
   begin
      for Q in Queue range 0 .. Rss_Queues - 1 loop
         if (Read (D, RXDCTL (Q)) and RXDCTL_ENABLE) = 0 then
            return Q;
         end if;
      end loop;
      Die (D.Address & ": no free RX queue left (RSS spreads over" & Natural'Image (Rss_Queues)
           & "): use fewer queue pairs");
   end Free_Rx_Queue;

   function Set_Input (D : Device; Ring_Phys : Unsigned_64; Tail : Ring_Index) return Register_Access is
      Q : constant Queue := Free_Rx_Queue (D);
      Drop_En : Unsigned_32;
   begin
      Write (D, RDBAH (Q), Unsigned_32 (Shift_Right (Ring_Phys, 32)));
      Write (D, RDBAL (Q), Unsigned_32 (Ring_Phys and 16#FFFF_FFFF#));
      Write (D, RDLEN (Q), Ring_Size * 16);
      --  Drop when no descriptor is free, unless flow control makes frames wait instead.
      Drop_En := (if (Read (D, FCRTH0) and FCRTH_FCEN) /= 0 then 0 else SRRCTL_DROP_EN);
      Write (D, SRRCTL (Q), (Read (D, SRRCTL (Q)) and not (SRRCTL_BSIZEPACKET_MASK or SRRCTL_DROP_EN))
                            or Buffer_Bytes / 1024 or Drop_En);
      Set (D, RXDCTL (Q), RXDCTL_ENABLE);
      Wait (D, RXDCTL (Q), RXDCTL_ENABLE, RXDCTL_ENABLE, "RXDCTL.ENABLE");
      Write (D, RDT (Q), Unsigned_32 (Tail));
      Start_Receive (D);
      --  No relaxed ordering of descriptor write-back [8.2.3.11.1].
      Clear (D, DCA_RXCTRL (Q), DCA_RXCTRL_RELAXED_WRITE);
      return D.Regs (Index (RDT (Q)))'Access;
   end Set_Input;

   function Add_Output (D : Device; Ring_Phys, Head_Phys : Unsigned_64) return Register_Access is
   begin
      for Q in Queue loop
         if (Read (D, TXDCTL (Q)) and TXDCTL_ENABLE) = 0 then
            Write (D, TDBAH (Q), Unsigned_32 (Shift_Right (Ring_Phys, 32)));
            Write (D, TDBAL (Q), Unsigned_32 (Ring_Phys and 16#FFFF_FFFF#));
            Write (D, TDLEN (Q), Ring_Size * 16);
            --  PTHRESH 60, HTHRESH 4 as TinyNF [8.2.3.9.10].
            Write (D, TXDCTL (Q), (Read (D, TXDCTL (Q)) and not 16#7F7F#) or 60 or 4 * 2 ** 8);
            Write (D, TDWBAH (Q), Unsigned_32 (Shift_Right (Head_Phys, 32)));
            Write (D, TDWBAL (Q), Unsigned_32 (Head_Phys and 16#FFFF_FFFF#) or TDWBAL_HEAD_WB_EN);
            Clear (D, DCA_TXCTRL (Q), DCA_TXCTRL_RELAXED_WRITE);
            Set (D, DMATXCTL, DMATXCTL_TE);
            Set (D, TXDCTL (Q), TXDCTL_ENABLE);
            Wait (D, TXDCTL (Q), TXDCTL_ENABLE, TXDCTL_ENABLE, "TXDCTL.ENABLE");
            return D.Regs (Index (TDT (Q)))'Access;
         end if;
      end loop;
      Die (D.Address & ": no free TX queue left: use fewer outputs");
   end Add_Output;

end Ixgbe.Devices;
