--  The forwarder: both directions of two ports, in one of the paper's three models, until a
--  signal, a deadline or a device that goes away. The main loops are Forward_Restricted,
--  Forward_Const and Forward_Flexible, never inlined: the bench counts the instructions inside
--  them (callgrind --toggle-collect) and the audit proves them free of checks.
with Interfaces; use Interfaces;
with Ixgbe.Agents; use Ixgbe.Agents;
with Ixgbe.Devices; use Ixgbe.Devices;
with Ixgbe.Queues; use Ixgbe.Queues;

package Fwd is

   type Model is (Restricted, Const, Flexible);

   --  Packets forwarded: A to B, then B to A.
   type Direction_Id is (A_To_B, B_To_A);
   type Counts is array (Direction_Id) of Unsigned_64;

   type Device_Pair is array (Direction_Id) of Device;

   --  Stop conditions (time, signal, a device gone) and the per-second throughput line (on a
   --  terminal).
   type Meter is record
      Start, Last, Deadline, Last_Presence : Long_Float;
      Last_Total : Unsigned_64;
      Progress, Has_Deadline : Boolean;
      Devices : Device_Pair;
      Gone : Boolean;
      Gone_Device : Direction_Id;
   end record;

   --  Whether to go on; called every Check_Every loop iterations, outside the per-packet code.
   function Tick (M : in out Meter; Forwarded : Counts) return Boolean with No_Inline;

   --  One direction of the flexible model: its queues, the batch, and the frames at the front of
   --  the batch still to send (lossless only).
   type Direction is record
      Queues : Direction_Queues_Access;
      Items : Batch;
      Waiting : Batch_Count;
      Dropped : Unsigned_64;
   end record;

   --  Both directions of one RSS queue: RX queue Q of the first port to the second, and back.
   --  A thread serves a slice of the pairs (--queues, --cores).
   type Pair_Index is range 0 .. Rss_Queues - 1;
   type Agent_Pair is record
      AB, BA : Agent;
   end record;
   type Agent_Pairs is array (Pair_Index range <>) of Agent_Pair;
   type Direction_Pair is record
      AB, BA : Direction;
   end record;
   type Direction_Pairs is array (Pair_Index range <>) of Direction_Pair;

   --  The agents' loops; Last is the agents' output count minus one (the restricted model).
   procedure Forward_Restricted (Pairs : in out Agent_Pairs; Last : Output_Index; Rewrite : Boolean;
                                 M : in out Meter; Forwarded : in out Counts) with No_Inline;
   procedure Forward_Const (Pairs : in out Agent_Pairs; Rewrite : Boolean; M : in out Meter;
                            Forwarded : in out Counts) with No_Inline;
   procedure Forward_Flexible (Pairs : in out Direction_Pairs; Rewrite, Lossless : Boolean;
                               M : in out Meter; Forwarded : in out Counts) with No_Inline;

   --  Frames a direction dropped, counting those still waiting in its batch, which go back to
   --  the pool now that forwarding has stopped.
   procedure Stop (D : in out Direction; Dropped : out Unsigned_64);

end Fwd;
