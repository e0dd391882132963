--  Device bring-up and queue set-up, in the order of the Rust and C drivers (the datasheet's,
--  as TinyNF does it). Register offsets and bits cite the 82599 datasheet.
with Platform.Pci; use Platform.Pci;

package Ixgbe.Devices is

   type Device is record
      Regs : Bar0_Access;
      Address : Function_Address;
   end record;

   --  Opens the 82599 function Address under the sysfs root Root and maps its BAR0.
   function Open (Root, Address : String) return Device;

   procedure Init (D : Device);

   --  IEEE 802.3x flow control [82599 datasheet 3.7.7, 8.2.3.3]: XOFF when packet buffer 0 is
   --  within Flow_Control_Headroom bytes of full, XON below half of that mark, a pause of
   --  Flow_Control_Pause quanta refreshed at half of it; queues set up afterwards wait instead
   --  of dropping (no SRRCTL.DROP_EN).
   Flow_Control_Headroom : constant := 16#6000#;
   Flow_Control_Pause : constant := 16#680#;
   procedure Enable_Flow_Control (D : Device);

   procedure Wait_For_Link (D : Device; Seconds : Positive);

   --  Whether the device still answers (one register read, for slow paths), and the one-line
   --  message for one that does not.
   function Present (D : Device) return Boolean;
   function Gone_Message (D : Device) return String;

   --  Disables every enabled RX and TX queue and waits until the device confirms (at most a
   --  second per queue, without dying): call it before the rings' and buffers' memory goes.
   procedure Stop_Queues (D : Device);

   --  RSS spreads flows over at most this many RX queues [82599 datasheet 7.1.2.8].
   Rss_Queues : constant := 16;
   subtype Rss_Queue_Count is Positive range 1 .. Rss_Queues;

   --  Receive-side scaling over RX queues 0 .. Queues - 1 [7.1.2.8]: the datasheet's
   --  verification key, redirection table entry I naming queue I mod Queues, queue Q counted in
   --  QPRC (Q), the hash reported in the write-back, over IPv4 and IPv6 with TCP and UDP ports.
   --  Call it before the queues are set up.
   procedure Enable_Rss (D : Device; Queues : Rss_Queue_Count);

   --  The first disabled RX queue of the RSS range (queue 0 first) on the ring at Ring_Phys,
   --  with RDT = Tail; returns RDT.
   function Set_Input (D : Device; Ring_Phys : Unsigned_64; Tail : Ring_Index) return Register_Access;

   --  The first disabled TX queue on the ring at Ring_Phys, writing its head back to Head_Phys;
   --  returns TDT.
   function Add_Output (D : Device; Ring_Phys, Head_Phys : Unsigned_64) return Register_Access;

end Ixgbe.Devices;
