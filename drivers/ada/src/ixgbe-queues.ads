--  DPDK's shape [the paper, 4.2]: RX and TX queues that exchange buffers with a pool, in
--  batches. A buffer is its index in the pool's memory. Every array is indexed by a type that
--  holds only its valid positions, or by a count whose every bit pattern is a position: a
--  batch of 32 is an array of 256 indexed by an 8-bit count (the paper's trick for Rust), so
--  no access needs a check and no count needs a validity check (RM 13.9.1).
with Ixgbe.Devices; use Ixgbe.Devices;

package Ixgbe.Queues is

   --  Buffers per direction's pool and packets per batch, as the Rust and C drivers.
   Pool_Size : constant := 4096;
   Batch_Size : constant := 32;
   --  Flexible TX: RS once per this many descriptors; recycled from the head then.
   TX_RS_Period : constant := 32;

   type Buffer_Index is mod Pool_Size;
   --  16 bits, every pattern valid; a pool never holds more than Pool_Size.
   type Pool_Count is mod 2 ** 16;

   type Buffer is record
      Index : Buffer_Index;
      Length : Frame_Length;
   end record;

   type Pool_Buffers is array (Buffer_Index) of Packet_Buffer;
   type Pool_Buffers_Access is not null access all Pool_Buffers;
   type Phys_Table is array (Buffer_Index) of Unsigned_64;
   type Free_Stack is array (Pool_Count range 0 .. Pool_Size - 1) of Buffer_Index;

   type Pool is record
      Data : Pool_Buffers_Access;
      Phys : Phys_Table;
      Free : Free_Stack;
      Available : Pool_Count;
   end record;

   type Held_Array is array (Ring_Index) of Buffer_Index;

   type Rx_Queue is record
      Ring : Ring_Access;
      Held : Held_Array; -- the buffer each descriptor points to
      Tail : Register_Access;
      Next : Ring_Index;
      Malformed : Unsigned_64;
   end record;

   type Tx_Queue is record
      Ring : Ring_Access;
      Held : Held_Array; -- valid from Recycled up to Next
      Head : Head_Access;
      Tail : Register_Access;
      Next : Ring_Index;
      Recycled : Ring_Index;
   end record;

   --  8 bits, every pattern valid; a batch never holds more than Batch_Size.
   type Batch_Count is mod 2 ** 8;
   type Batch is array (Batch_Count) of Buffer;

   --  One direction's memory: an RX ring on the input, a TX ring on the output, and the pool
   --  they share ("pool inversion"). The queues start on it at once.
   type Direction_Queues is record
      Pool_Of : Pool;
      Rx : Rx_Queue;
      Tx : Tx_Queue;
   end record;
   type Direction_Queues_Access is not null access Direction_Queues;
   function Create (Input, Output : Device) return Direction_Queues_Access;

   procedure Give (P : in out Pool; B : Buffer_Index) with Inline_Always;

   --  Appends received packets to Into from Fill on, while there is room, refilling the ring from
   --  P; Fill ends past the last one.
   procedure Receive (Q : in out Rx_Queue; P : in out Pool; Into : in out Batch;
                      Fill : in out Batch_Count)
     with Inline_Always;

   --  Queues packets Items (0 .. Count - 1) from the front until the ring is full; Sent says
   --  how many. The caller keeps Items (Sent .. Count - 1) (DPDK's burst contract).
   procedure Transmit (Q : in out Tx_Queue; P : in out Pool; Items : Batch; Count : Batch_Count;
                       Sent : out Batch_Count)
     with Inline_Always;

end Ixgbe.Queues;
