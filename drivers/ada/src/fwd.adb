with Ada.Text_IO;
with Ixgbe; use Ixgbe;
with Platform; use Platform;

package body Fwd is

   --  Loop iterations between looks at the clock and the signal flag.
   Check_Every : constant := 1024;
   --  How long a removed device can go unnoticed: a register read costs a PCIe round trip.
   Presence_Period : constant := 0.1;

   function Tick (M : in out Meter; Forwarded : Counts) return Boolean is
      Now_Is : Long_Float;
   begin
      if Termination_Requested then
         return False;
      end if;
      Now_Is := Now;
      if Now_Is - M.Last_Presence >= Presence_Period then
         M.Last_Presence := Now_Is;
         for D in Direction_Id loop
            if not Present (M.Devices (D)) then
               M.Gone := True;
               M.Gone_Device := D;
               return False;
            end if;
         end loop;
      end if;
      if M.Progress and then Now_Is - M.Last >= 1.0 then
         declare
            Total : constant Unsigned_64 := Forwarded (A_To_B) + Forwarded (B_To_A);
         begin
            Ada.Text_IO.Put_Line
              (Fixed (Now_Is - M.Start, 1) & " s  "
               & Fixed (Long_Float (Total - M.Last_Total) / (Now_Is - M.Last) / 1.0E6, 3) & " Mpps  ("
               & Image (Forwarded (A_To_B)) & " in->out, " & Image (Forwarded (B_To_A)) & " out->in)");
            Ada.Text_IO.Flush;
            M.Last := Now_Is;
            M.Last_Total := Total;
         end;
      end if;
      return not M.Has_Deadline or else Now_Is < M.Deadline;
   end Tick;

   --  The agents' loop for one model (Last_Output) and one choice of rewrite: each instance is
   --  its own loop, as the Rust driver's const generics and the C driver's constant arguments.
   --  Every agent has Last + 1 outputs.
   generic
      Rewrite : Boolean;
      with function Last_Output (A : Agent) return Output_Index;
   procedure Forward_Agents (Pairs : in out Agent_Pairs; Last : Output_Index; M : in out Meter;
                             Forwarded : in out Counts)
     with Inline_Always;

   procedure Forward_Agents (Pairs : in out Agent_Pairs; Last : Output_Index; M : in out Meter;
                             Forwarded : in out Counts) is
      --  Each packet goes to the next output in turn, across the thread's pairs.
      Next_AB, Next_BA : Output_Index := 0;

      procedure Handle_AB (Packet : in out Packet_Buffer; Length : Frame_Length;
                           Lengths : in out Length_Array) with Inline_Always;
      procedure Handle_AB (Packet : in out Packet_Buffer; Length : Frame_Length;
                           Lengths : in out Length_Array) is
      begin
         if Rewrite then
            Rewrite_Macs (Packet);
         end if;
         Lengths (Next_AB and Output_Index'Last) := Length; -- masked: see Ixgbe.Agents.Run
         Next_AB := (if Next_AB = Last then 0 else Next_AB + 1);
      end Handle_AB;

      procedure Handle_BA (Packet : in out Packet_Buffer; Length : Frame_Length;
                           Lengths : in out Length_Array) with Inline_Always;
      procedure Handle_BA (Packet : in out Packet_Buffer; Length : Frame_Length;
                           Lengths : in out Length_Array) is
      begin
         if Rewrite then
            Rewrite_Macs (Packet);
         end if;
         Lengths (Next_BA and Output_Index'Last) := Length; -- masked: see Ixgbe.Agents.Run
         Next_BA := (if Next_BA = Last then 0 else Next_BA + 1);
      end Handle_BA;

      procedure Run_AB is new Run (Last_Output, Handle_AB);
      procedure Run_BA is new Run (Last_Output, Handle_BA);
      N : Processed_Count;
   begin
      loop
         for K in 1 .. Check_Every loop
            for P of Pairs loop
               Run_AB (P.AB, N);
               Forwarded (A_To_B) := Forwarded (A_To_B) + Unsigned_64 (N);
               Run_BA (P.BA, N);
               Forwarded (B_To_A) := Forwarded (B_To_A) + Unsigned_64 (N);
            end loop;
         end loop;
         exit when not Tick (M, Forwarded);
      end loop;
   end Forward_Agents;

   --  The restricted model: the output count is the agent's, known at run time.
   function Run_Time_Last (A : Agent) return Output_Index is (A.Last_Output) with Inline_Always;
   --  The const model: one output, a compile-time constant.
   function Constant_Last (A : Agent) return Output_Index with Inline_Always;
   function Constant_Last (A : Agent) return Output_Index is
      pragma Unreferenced (A);
   begin
      return 0;
   end Constant_Last;

   procedure Restricted_Rewrite is new Forward_Agents (True, Run_Time_Last);
   procedure Restricted_Plain is new Forward_Agents (False, Run_Time_Last);
   procedure Const_Rewrite is new Forward_Agents (True, Constant_Last);
   procedure Const_Plain is new Forward_Agents (False, Constant_Last);

   procedure Forward_Restricted (Pairs : in out Agent_Pairs; Last : Output_Index; Rewrite : Boolean;
                                 M : in out Meter; Forwarded : in out Counts) is
   begin
      if Rewrite then
         Restricted_Rewrite (Pairs, Last, M, Forwarded);
      else
         Restricted_Plain (Pairs, Last, M, Forwarded);
      end if;
   end Forward_Restricted;

   procedure Forward_Const (Pairs : in out Agent_Pairs; Rewrite : Boolean; M : in out Meter;
                            Forwarded : in out Counts) is
   begin
      if Rewrite then
         Const_Rewrite (Pairs, 0, M, Forwarded);
      else
         Const_Plain (Pairs, 0, M, Forwarded);
      end if;
   end Forward_Const;

   --  Receive into the batch's free room, rewrite what arrived, transmit. What did not fit into
   --  the TX ring goes back to the pool and is counted (DPDK's usual policy); with Lossless it
   --  stays at the front of the batch for the next burst, so a full TX ring backs up into the RX
   --  ring and the packet buffer, whose XOFF pauses the link partner.
   generic
      Rewrite, Lossless : Boolean;
   procedure Burst (D : in out Direction; Sent : out Batch_Count) with Inline_Always;

   procedure Burst (D : in out Direction; Sent : out Batch_Count) is
      Q : Direction_Queues renames D.Queues.all;
      First : constant Batch_Count := (if Lossless then D.Waiting else 0);
      Fill : Batch_Count := First;
      K : Batch_Count;
   begin
      Receive (Q.Rx, Q.Pool_Of, D.Items, Fill);
      Sent := 0;
      if Fill = 0 then
         return;
      end if;
      if Rewrite then
         K := First;
         while K < Fill loop
            --  Masked, as in Ixgbe.Agents.Run: an index read from memory is not known valid.
            Rewrite_Macs (Q.Pool_Of.Data (D.Items (K).Index and Buffer_Index'Last));
            K := K + 1;
         end loop;
      end if;
      Transmit (Q.Tx, Q.Pool_Of, D.Items, Fill, Sent);
      K := Sent;
      if Lossless then
         while K < Fill loop
            D.Items (K - Sent) := D.Items (K);
            K := K + 1;
         end loop;
         D.Waiting := Fill - Sent;
      else
         while K < Fill loop
            Give (Q.Pool_Of, D.Items (K).Index);
            K := K + 1;
         end loop;
         D.Dropped := D.Dropped + Unsigned_64 (Fill - Sent);
      end if;
   end Burst;

   generic
      Rewrite, Lossless : Boolean;
   procedure Forward_Directions (Pairs : in out Direction_Pairs; M : in out Meter;
                                 Forwarded : in out Counts) with Inline_Always;

   procedure Forward_Directions (Pairs : in out Direction_Pairs; M : in out Meter;
                                 Forwarded : in out Counts) is
      procedure Burst_Once is new Burst (Rewrite, Lossless);
      Sent : Batch_Count;
   begin
      loop
         for K in 1 .. Check_Every loop
            for P of Pairs loop
               Burst_Once (P.AB, Sent);
               Forwarded (A_To_B) := Forwarded (A_To_B) + Unsigned_64 (Sent);
               Burst_Once (P.BA, Sent);
               Forwarded (B_To_A) := Forwarded (B_To_A) + Unsigned_64 (Sent);
            end loop;
         end loop;
         exit when not Tick (M, Forwarded);
      end loop;
   end Forward_Directions;

   procedure Rewrite_Lossy is new Forward_Directions (True, False);
   procedure Plain_Lossy is new Forward_Directions (False, False);
   procedure Rewrite_Lossless is new Forward_Directions (True, True);
   procedure Plain_Lossless is new Forward_Directions (False, True);

   procedure Forward_Flexible (Pairs : in out Direction_Pairs; Rewrite, Lossless : Boolean;
                               M : in out Meter; Forwarded : in out Counts) is
   begin
      if Rewrite and not Lossless then
         Rewrite_Lossy (Pairs, M, Forwarded);
      elsif not Lossless then
         Plain_Lossy (Pairs, M, Forwarded);
      elsif Rewrite then
         Rewrite_Lossless (Pairs, M, Forwarded);
      else
         Plain_Lossless (Pairs, M, Forwarded);
      end if;
   end Forward_Flexible;

   procedure Stop (D : in out Direction; Dropped : out Unsigned_64) is
   begin
      for K in 1 .. D.Waiting loop
         Give (D.Queues.Pool_Of, D.Items (K - 1).Index);
      end loop;
      D.Dropped := D.Dropped + Unsigned_64 (D.Waiting);
      D.Waiting := 0;
      Dropped := D.Dropped;
   end Stop;

end Fwd;
