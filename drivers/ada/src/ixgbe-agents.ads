--  TinyNF's agent [the paper, 4.1]: one buffer per descriptor, one ring per output, the first
--  shared with the input's RX queue 0. Receiving a packet and sending it are one descriptor
--  write per output; the receive tail follows the slowest output's written-back head.
with Ixgbe.Devices; use Ixgbe.Devices;

package Ixgbe.Agents is

   Max_Outputs : constant := 64;
   --  Modular, so the round robin over outputs needs no check.
   type Output_Index is mod Max_Outputs;
   subtype Output_Count is Positive range 1 .. Max_Outputs;

   --  Agent periods, as the Rust and C drivers: the TX tails are written after at most
   --  Flush_Period packets, and RS (with receive-tail recycling) is asked once per
   --  Recycle_Period descriptors.
   Flush_Period : constant := 8;
   Recycle_Period : constant := 64;
   subtype Processed_Count is Natural range 0 .. Flush_Period;

   type Length_Array is array (Output_Index) of Frame_Length;

   type Agent_Buffers is array (Ring_Index) of Packet_Buffer;
   type Agent_Buffers_Access is not null access all Agent_Buffers;

   type Output is record
      Ring : Ring_Access;
      Head : Head_Access;
      Tail : Register_Access;
   end record;
   type Output_Array is array (Output_Index) of Output;

   type Agent is record
      Buffers : Agent_Buffers_Access;
      Shared_Ring : Ring_Access;
      Outputs : Output_Array;
      --  What the handler sets for each output: the length to send there, 0 for none.
      Lengths : Length_Array;
      Last_Output : Output_Index;
      Receive_Tail : Register_Access;
      Receive_Tail_Value : Ring_Index;
      Processed : Ring_Index;
      Malformed : Unsigned_64;
   end record;

   --  An agent from Input to Outputs (1 to 64 devices, one TX queue on each), in fresh DMA
   --  memory.
   type Device_Array is array (Output_Index range <>) of Device;
   function Create (Input : Device; Outputs : Device_Array) return Agent
     with Pre => Outputs'First = 0 and then Outputs'Length in Output_Count;

   --  Processes up to Flush_Period received packets and returns how many. Last_Output (A) is
   --  the number of outputs minus one: a run-time value for the restricted model, a constant
   --  for the const model. Handle sets Lengths (O) for each output O (0: not sent there).
   generic
      with function Last_Output (A : Agent) return Output_Index;
      with procedure Handle (Packet : in out Packet_Buffer; Length : Frame_Length;
                             Lengths : in out Length_Array);
   procedure Run (A : in out Agent; Count : out Processed_Count) with Inline_Always;

end Ixgbe.Agents;
