with Platform.Dma; use Platform.Dma;

package body Ixgbe.Queues is

   package Buffers_Views is new Views (Pool_Buffers, Pool_Buffers_Access);
   function Buffers_View (B : Block; Offset : Byte_Offset) return Pool_Buffers_Access renames Buffers_Views.View;
   package Ring_Views is new Views (Ring, Ring_Access);
   function Ring_View (B : Block; Offset : Byte_Offset) return Ring_Access renames Ring_Views.View;
   package Head_Views is new Views (Head_Word, Head_Access);
   function Head_View (B : Block; Offset : Byte_Offset) return Head_Access renames Head_Views.View;

   --  Flexible TX recycles when this many descriptors wait (twice the RS period).
   Recycle_Threshold : constant := 2 * TX_RS_Period;

   function Take (P : in out Pool; B : out Buffer_Index) return Boolean with Inline_Always;
   function Take (P : in out Pool; B : out Buffer_Index) return Boolean is
      Top : constant Pool_Count := P.Available - 1; -- wraps when empty: one compare for both
   begin
      if Top >= Pool_Size then
         B := 0;
         return False;
      end if;
      P.Available := Top;
      B := P.Free (Top);
      return True;
   end Take;

   procedure Give (P : in out Pool; B : Buffer_Index) is
   begin
      if P.Available < Pool_Size then
         P.Free (P.Available) := B;
         P.Available := P.Available + 1;
      end if;
   end Give;

   function Create (Input, Output : Device) return Direction_Queues_Access is
      Last_End, Rx_Ring, Tx_Ring, Head, Buffers : Byte_Offset := 0;
   begin
      Place (Last_End, Ring'Size / 8, 128, Rx_Ring);
      Place (Last_End, Ring'Size / 8, 128, Tx_Ring);
      Place (Last_End, 64, 64, Head);
      Place (Last_End, Pool_Buffers'Size / 8, Buffer_Bytes, Buffers);
      declare
         Memory : constant Block := Allocate (Last_End);
         Rx : constant Ring_Access := Ring_View (Memory, Rx_Ring);
         Tx : constant Ring_Access := Ring_View (Memory, Tx_Ring);
         H : constant Head_Access := Head_View (Memory, Head);
         D : constant Direction_Queues_Access := new Direction_Queues'
           (Pool_Of => (Data => Buffers_View (Memory, Buffers),
                        Phys => (others => 0), Free => (others => 0), Available => Pool_Size),
            Rx => (Ring => Rx, Held => (others => 0), Tail => Input.Regs (0)'Access, Next => 0,
                   Malformed => 0),
            Tx => (Ring => Tx, Held => (others => 0), Head => H, Tail => Output.Regs (0)'Access,
                   Next => 0, Recycled => 0));
      begin
         for B in Buffer_Index loop
            D.Pool_Of.Phys (B) := Phys (Memory, Buffers + Byte_Offset (B) * Buffer_Bytes);
            D.Pool_Of.Free (Pool_Count (B)) := B;
         end loop;
         for I in Ring_Index loop
            if not Take (D.Pool_Of, D.Rx.Held (I)) then
               raise Program_Error with "a pool smaller than a ring";
            end if;
            Rx (I).Address := D.Pool_Of.Phys (D.Rx.Held (I));
            Rx (I).Meta := 0;
         end loop;
         H.all := 0;
         D.Rx.Tail := Set_Input (Input, Phys (Memory, Rx_Ring), Ring_Index'Last);
         D.Tx.Tail := Add_Output (Output, Phys (Memory, Tx_Ring), Phys (Memory, Head));
         return D;
      end;
   end Create;

   procedure Receive (Q : in out Rx_Queue; P : in out Pool; Into : in out Batch;
                      Fill : in out Batch_Count)
   is
      --  Masked, as in Ixgbe.Agents.Run: an index read from memory is not known valid.
      Start : constant Ring_Index := Q.Next and Ring_Index'Last;
      I : Ring_Index := Start;
      Status : Unsigned_64;
      Fresh, Old : Buffer_Index;
      Length : Unsigned_16;
   begin
      while Fill < Batch_Size loop
         Status := Q.Ring (I).Meta;
         exit when (Status and RX_DD) = 0;
         exit when not Take (P, Fresh);
         Q.Ring (I).Address := P.Phys (Fresh);
         Q.Ring (I).Meta := 0;
         Old := Q.Held (I);
         Q.Held (I) := Fresh;
         I := I + 1;
         --  The written-back length is untrusted: a frame that does not fit its buffer (or
         --  spans several) is dropped [82599 datasheet 7.1.5].
         Length := Unsigned_16'Mod (Status);
         if Length <= Buffer_Bytes and then (Status and RX_EOP) /= 0 then
            Into (Fill) := (Index => Old, Length => Length);
            Fill := Fill + 1;
         else
            Q.Malformed := Q.Malformed + 1;
            Give (P, Old);
         end if;
      end loop;
      if I /= Start then
         Q.Next := I;
         Q.Tail.all := Register (I - 1); -- RDT = last descriptor handed back [7.1.9]
      end if;
   end Receive;

   --  Gives back to P every buffer the device has sent, per the written-back head.
   procedure Recycle (Q : in out Tx_Queue; P : in out Pool) with Inline_Always;
   procedure Recycle (Q : in out Tx_Queue; P : in out Pool) is
      Head : constant Ring_Index := Ring_Index'Mod (Q.Head.all);
   begin
      if Head - Q.Recycled > Q.Next - Q.Recycled then
         return; -- never past what was queued
      end if;
      while Q.Recycled /= Head loop
         Give (P, Q.Held (Q.Recycled));
         Q.Recycled := Q.Recycled + 1;
      end loop;
   end Recycle;

   procedure Transmit (Q : in out Tx_Queue; P : in out Pool; Items : Batch; Count : Batch_Count;
                       Sent : out Batch_Count)
   is
      Queued : Ring_Index := Q.Next - Q.Recycled;
      Room : Ring_Index;
      --  Masked, as in Ixgbe.Agents.Run: an index read from memory is not known valid.
      I : Ring_Index := Q.Next and Ring_Index'Last;
      K : Batch_Count := 0;
      RS : Unsigned_64;
   begin
      if Queued >= Recycle_Threshold or else Ring_Index'Last - Queued < Ring_Index (Count) then
         Recycle (Q, P);
         Queued := Q.Next - Q.Recycled;
      end if;
      Room := Ring_Index'Last - Queued;
      Sent := (if Room < Ring_Index (Count) then Batch_Count (Room) else Count);
      while K < Sent loop
         RS := (if I mod TX_RS_Period = TX_RS_Period - 1 then TX_RS else 0);
         Q.Ring (I).Address := P.Phys (Items (K).Index);
         Q.Ring (I).Meta := Unsigned_64 (Items (K).Length) or TX_EOP or TX_IFCS or RS;
         Q.Held (I) := Items (K).Index;
         I := I + 1;
         K := K + 1;
      end loop;
      if Sent > 0 then
         Q.Next := I;
         Q.Tail.all := Register (I);
      end if;
   end Transmit;

end Ixgbe.Queues;
