--  The 82599 driver of the Ada version: the types the device shares with the driver. Their
--  ranges carry the proofs: a ring is indexed by a modular type, so every index is in range;
--  lengths and output counts are range subtypes; device memory is reached only through access
--  types to volatile objects, which Platform.Dma.View makes. With GNAT's checks on, the
--  compiler can then show that none is needed in the per-packet code (the audit confirms it).
with Interfaces; use Interfaces;
with Platform.Pci;

package Ixgbe is

   --  Descriptors per ring, as the Rust and C drivers (RING = 512).
   Ring_Size : constant := 512;
   type Ring_Index is mod Ring_Size;

   Buffer_Bytes : constant := 2048;
   subtype Frame_Length is Unsigned_16 range 0 .. Buffer_Bytes;

   --  Legacy descriptors [82599 datasheet 7.1.5, 7.2.3.2.2]: the buffer's address, then the
   --  length and status (RX, written back by the device) or length and command (TX).
   type Descriptor is record
      Address : Unsigned_64;
      Meta : Unsigned_64;
   end record;
   for Descriptor use record
      Address at 0 range 0 .. 63;
      Meta at 8 range 0 .. 63;
   end record;
   for Descriptor'Size use 128;

   type Ring is array (Ring_Index) of Descriptor with Volatile_Components;
   type Ring_Access is not null access all Ring;

   RX_DD : constant Unsigned_64 := 2 ** 32;
   RX_EOP : constant Unsigned_64 := 2 ** 33;
   TX_EOP : constant Unsigned_64 := 2 ** 24;
   TX_IFCS : constant Unsigned_64 := 2 ** 25;
   TX_RS : constant Unsigned_64 := 2 ** 27;

   --  The TX head the device writes back to memory [82599 datasheet 7.2.3.5.2].
   type Head_Word is mod 2 ** 32 with Volatile;
   type Head_Access is not null access all Head_Word;

   --  A packet buffer: the two MAC addresses the forwarder rewrites, then the rest.
   type Byte_Array is array (Natural range <>) of Unsigned_8;
   type Packet_Buffer is record
      Destination_And_Source : Unsigned_64;
      Source_End : Unsigned_32;
      Rest : Byte_Array (12 .. Buffer_Bytes - 1);
   end record with Volatile;
   for Packet_Buffer use record
      Destination_And_Source at 0 range 0 .. 63;
      Source_End at 8 range 0 .. 31;
      Rest at 12 range 0 .. (Buffer_Bytes - 12) * 8 - 1;
   end record;
   for Packet_Buffer'Size use Buffer_Bytes * 8;
   for Packet_Buffer'Alignment use 64;

   --  The paper's rewrite: destination 00:00:00:00:00:01, source 00:00:00:00:00:00, as one 8-byte
   --  and one 4-byte store, volatile like the descriptor writes that follow.
   procedure Rewrite_Macs (Packet : in out Packet_Buffer) with Inline_Always;

   subtype Register is Platform.Pci.Register;
   subtype Register_Access is Platform.Pci.Register_Access;

end Ixgbe;
