with Platform; use Platform;
with Platform.Dma; use Platform.Dma;

package body Ixgbe.Agents is

   package Buffers_Views is new Views (Agent_Buffers, Agent_Buffers_Access);
   function Buffers_View (B : Block; Offset : Byte_Offset) return Agent_Buffers_Access renames Buffers_Views.View;
   package Ring_Views is new Views (Ring, Ring_Access);
   function Ring_View (B : Block; Offset : Byte_Offset) return Ring_Access renames Ring_Views.View;
   package Head_Views is new Views (Head_Word, Head_Access);
   function Head_View (B : Block; Offset : Byte_Offset) return Head_Access renames Head_Views.View;

   function Create (Input : Device; Outputs : Device_Array) return Agent is
      Last : constant Output_Index := Output_Index (Outputs'Length - 1);
      Last_End, Buffers : Byte_Offset := 0;
      Rings, Heads : array (Output_Index range 0 .. Last) of Byte_Offset;
   begin
      Place (Last_End, Agent_Buffers'Size / 8, Buffer_Bytes, Buffers);
      --  Rings 128-byte aligned [82599 datasheet 8.2.3.8.1]; heads in their own cache line
      --  [7.2.3.5.2].
      for O in Rings'Range loop
         Place (Last_End, Ring'Size / 8, 128, Rings (O));
      end loop;
      for O in Heads'Range loop
         Place (Last_End, 64, 64, Heads (O));
      end loop;
      declare
         Memory : constant Block := Allocate (Last_End);
         First_Ring : constant Ring_Access := Ring_View (Memory, Rings (0));
         A : Agent :=
           (Buffers => Buffers_View (Memory, Buffers),
            Shared_Ring => First_Ring,
            --  Filled in below, once each output's TX queue is set up.
            Outputs => (others => (Ring => First_Ring,
                                   Head => Head_View (Memory, Heads (0)),
                                   Tail => Input.Regs (0)'Access)),
            Lengths => (others => 0),
            Last_Output => Last,
            Receive_Tail => Input.Regs (0)'Access,
            Receive_Tail_Value => Ring_Index'Last,
            Processed => 0,
            Malformed => 0);
      begin
         for O in Rings'Range loop
            declare
               R : constant Ring_Access := Ring_View (Memory, Rings (O));
               H : constant Head_Access := Head_View (Memory, Heads (O));
            begin
               for I in Ring_Index loop
                  R (I).Address := Phys (Memory, Buffers + Byte_Offset (I) * Buffer_Bytes);
                  R (I).Meta := 0;
               end loop;
               H.all := 0;
               A.Outputs (O) := (Ring => R, Head => H,
                                 Tail => Add_Output (Outputs (O), Phys (Memory, Rings (O)),
                                                     Phys (Memory, Heads (O))));
            end;
         end loop;
         --  Outputs past the last are never used; each is a copy of the first, not a dangling one.
         if Last < Output_Index'Last then
            for O in Last + 1 .. Output_Index'Last loop
               A.Outputs (O) := A.Outputs (0);
            end loop;
         end if;
         --  The device may fill every slot but one: RDT = N - 1 [7.1.9].
         A.Receive_Tail := Set_Input (Input, Phys (Memory, Rings (0)), Ring_Index'Last);
         return A;
      end;
   end Create;

   --  Gives the receive side every slot that all outputs have sent: RDT = the head of the output
   --  furthest behind, minus one [82599 datasheet 7.1.9]. Device-written heads are reduced
   --  modulo the ring by the type.
   procedure Recycle (A : in out Agent; Last : Output_Index) with Inline_Always;
   procedure Recycle (A : in out Agent; Last : Output_Index) is
      Earliest : Ring_Index := A.Processed;
      Behind : Ring_Index := 0;
      Head, Pending, Tail : Ring_Index;
   begin
      for O in 0 .. Last loop
         Head := Ring_Index'Mod (A.Outputs (O).Head.all);
         Pending := A.Processed - Head;
         if Pending > Behind then
            Behind := Pending;
            Earliest := Head;
         end if;
      end loop;
      Tail := Earliest - 1;
      if Tail /= A.Receive_Tail_Value then
         A.Receive_Tail.all := Register (Tail);
         A.Receive_Tail_Value := Tail;
      end if;
   end Recycle;

   procedure Run (A : in out Agent; Count : out Processed_Count) is
      --  A function's result is known valid, so the loops over 0 .. Last need no check. An index
      --  read from memory is masked with its type's last value before anything is stored
      --  through it: GNAT checks its validity otherwise (RM 13.9.1, kept by its default
      --  -gnatVd). The mask proves it for one AND per call.
      Last : constant Output_Index := Last_Output (A);
      I : Ring_Index := A.Processed and Ring_Index'Last;
      N : Processed_Count := 0;
      Status, RS : Unsigned_64;
      Length : Unsigned_16;
   begin
      while N < Flush_Period loop
         Status := A.Shared_Ring (I).Meta;
         if (Status and RX_DD) = 0 then
            if N = 0 then
               Recycle (A, Last);
            end if;
            exit;
         end if;
         --  The written-back length is untrusted: a frame that does not fit its buffer (or
         --  spans several) is sent nowhere [82599 datasheet 7.1.5].
         Length := Unsigned_16'Mod (Status);
         if Length <= Buffer_Bytes and then (Status and RX_EOP) /= 0 then
            Handle (A.Buffers (I), Length, A.Lengths);
         else
            A.Malformed := A.Malformed + 1;
         end if;
         RS := (if I mod Recycle_Period = Recycle_Period - 1 then TX_RS else 0);
         for O in 0 .. Last loop
            --  Length 0 is a null descriptor; bit 32 = 0 also clears RX DD [7.2.3.2.2].
            A.Outputs (O).Ring (I).Meta := Unsigned_64 (A.Lengths (O)) or RS or TX_IFCS or TX_EOP;
            A.Lengths (O) := 0;
         end loop;
         I := I + 1;
         A.Processed := I;
         if RS /= 0 then
            Recycle (A, Last);
         end if;
         N := N + 1;
      end loop;
      if N > 0 then
         for O in 0 .. Last loop
            A.Outputs (O).Tail.all := Register (I);
         end loop;
      end if;
      Count := N;
   end Run;

end Ixgbe.Agents;
