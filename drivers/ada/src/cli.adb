with Ada.Command_Line; use Ada.Command_Line;
with Ada.Environment_Variables;
with Ada.Exceptions;
with Ada.Strings.Unbounded; use Ada.Strings.Unbounded;
with Ada.Text_IO;
with Fwd; use Fwd;
with Interfaces; use Interfaces;
with Ixgbe.Agents; use Ixgbe.Agents;
with Ixgbe.Devices; use Ixgbe.Devices;
with Ixgbe.Queues; use Ixgbe.Queues;
with Platform; use Platform;
with Platform.Pci; use type Platform.Pci.Bar0_Access;

package body Cli is

   Usage : constant String :=
     "usage: safenic-ada fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR]"
     & " [--mac-rewrite paper|none] [--outputs 1-64] [--seconds S] [--cpu N] [--flow-control]";

   Chosen : Model;
   Input, Output, Sysfs : Unbounded_String;
   Rewrite : Boolean := True;
   Outputs : Output_Count := 1;
   Outputs_Given : Boolean := False;
   Seconds : Long_Float := 0.0; -- 0: until a signal
   Cpu : Integer := -1;         -- -1: not pinned
   Flow_Control : Boolean := False;

   procedure Parse is
      I : Positive := 5;

      function Value_Of return String is
      begin
         if I + 1 > Argument_Count then
            Die (Argument (I) & " needs a value");
         end if;
         I := I + 1;
         return Argument (I);
      end Value_Of;
   begin
      Sysfs := To_Unbounded_String
        (if Ada.Environment_Variables.Exists ("SAFENIC_SYSFS")
           and then Ada.Environment_Variables.Value ("SAFENIC_SYSFS") /= ""
         then Ada.Environment_Variables.Value ("SAFENIC_SYSFS") else "/sys/bus/pci/devices");
      if Argument_Count < 4 or else Argument (1) /= "fwd" then
         Die (Usage);
      end if;
      if Argument (2) = "restricted" then
         Chosen := Restricted;
      elsif Argument (2) = "const" then
         Chosen := Const;
      elsif Argument (2) = "flexible" then
         Chosen := Flexible;
      else
         Die ("unknown model `" & Argument (2) & "`: use restricted, const or flexible");
      end if;
      Input := To_Unbounded_String (Argument (3));
      Output := To_Unbounded_String (Argument (4));
      while I <= Argument_Count loop
         declare
            Arg : constant String := Argument (I);
         begin
            if Arg = "--sysfs" then
               Sysfs := To_Unbounded_String (Value_Of);
            elsif Arg = "--mac-rewrite" then
               declare
                  V : constant String := Value_Of;
               begin
                  if V /= "paper" and then V /= "none" then
                     Die ("--mac-rewrite " & V & ": use paper or none");
                  end if;
                  Rewrite := V = "paper";
               end;
            elsif Arg = "--outputs" then
               declare
                  V : constant String := Value_Of;
               begin
                  Outputs := Output_Count'Value (V);
                  Outputs_Given := True;
               exception
                  when Constraint_Error =>
                     Die ("--outputs " & V & ": an agent has 1 to 64 outputs");
               end;
            elsif Arg = "--seconds" then
               declare
                  V : constant String := Value_Of;
               begin
                  Seconds := Long_Float'Value (V);
                  if not (Seconds > 0.0) then
                     Die ("--seconds " & V & ": give a positive number");
                  end if;
               exception
                  when Constraint_Error => Die ("--seconds " & V & ": give a positive number");
               end;
            elsif Arg = "--cpu" then
               declare
                  V : constant String := Value_Of;
               begin
                  Cpu := Natural'Value (V);
               exception
                  when Constraint_Error => Die ("--cpu " & V & ": give a CPU number");
               end;
            elsif Arg = "--flow-control" then
               Flow_Control := True;
            else
               Die ("unknown argument `" & Arg & "`");
            end if;
         end;
         I := I + 1;
      end loop;
      if Chosen /= Restricted and then Outputs_Given and then Outputs /= 1 then
         Die ("--outputs applies to the restricted model only (const has 1, flexible has 1 queue)");
      end if;
   end Parse;

   --  The ports whose queues are stopped when the program exits, however it exits.
   Opened : Device_Pair := (others => (Regs => null, Address => (others => ' ')));

   procedure Stop_Queues_At_Exit is
   begin
      for D of Opened loop
         if D.Regs /= null then
            Stop_Queues (D);
         end if;
      end loop;
   end Stop_Queues_At_Exit;

   Forwarded : Counts := (others => 0);
   Malformed, Dropped : Unsigned_64 := 0;
   M : Meter := (Devices => Opened, Gone_Device => A_To_B, Last_Total => 0, others => <>);

   procedure Run_Agents is
      To_B : constant Device_Array (0 .. Output_Index (Outputs - 1)) := (others => Opened (B_To_A));
      To_A : constant Device_Array (0 .. Output_Index (Outputs - 1)) := (others => Opened (A_To_B));
      AB : Agent := Create (Opened (A_To_B), To_B);
      BA : Agent := Create (Opened (B_To_A), To_A);
   begin
      if Chosen = Const then
         Forward_Const (AB, BA, Rewrite, M, Forwarded);
      else
         Forward_Restricted (AB, BA, Rewrite, M, Forwarded);
      end if;
      Malformed := AB.Malformed + BA.Malformed;
   end Run_Agents;

   procedure Run_Directions is
      --  "Pool inversion": the RX queue of one port and the TX queue of the other share a pool.
      AB : Direction := (Queues => Create (Opened (A_To_B), Opened (B_To_A)),
                         Items => (others => (0, 0)), Waiting => 0, Dropped => 0);
      BA : Direction := (Queues => Create (Opened (B_To_A), Opened (A_To_B)),
                         Items => (others => (0, 0)), Waiting => 0, Dropped => 0);
      Dropped_AB, Dropped_BA : Unsigned_64;
   begin
      Forward_Flexible (AB, BA, Rewrite, Flow_Control, M, Forwarded);
      Stop (AB, Dropped_AB);
      Stop (BA, Dropped_BA);
      Malformed := AB.Queues.Rx.Malformed + BA.Queues.Rx.Malformed;
      Dropped := Dropped_AB + Dropped_BA;
   end Run_Directions;

   procedure Main is
   begin
      Parse;
      Install_Termination_Handlers;
      if Cpu >= 0 then
         Pin_To_Cpu (Cpu);
      end if;
      Set_Exit_Hook (Stop_Queues_At_Exit'Access);
      Opened (A_To_B) := Open (To_String (Sysfs), To_String (Input));
      Opened (B_To_A) := Open (To_String (Sysfs), To_String (Output));
      if Opened (A_To_B).Address = Opened (B_To_A).Address then
         Die (To_String (Input) & " is both input and output: give two different"
              & " ports");
      end if;
      for D of Opened loop
         Init (D);
      end loop;
      if Flow_Control then
         for D of Opened loop
            Enable_Flow_Control (D);
         end loop;
      end if;
      for D of Opened loop
         Wait_For_Link (D, 10);
      end loop;
      declare
         Start : constant Long_Float := Now;
      begin
         M := (Start => Start, Last => Start, Deadline => Start + Seconds, Last_Presence => Start,
               Last_Total => 0, Progress => Stdout_Is_Terminal, Has_Deadline => Seconds > 0.0,
               Devices => Opened, Gone => False, Gone_Device => A_To_B);
         if Chosen = Flexible then
            Run_Directions;
         else
            Run_Agents;
         end if;
         Run_Exit_Hook;
         declare
            Elapsed : constant Long_Float := Now - Start;
         begin
            Ada.Text_IO.Put_Line
              ("safenic-ada fwd " & (case Chosen is when Restricted => "restricted",
                                                   when Const => "const", when Flexible => "flexible")
               & ": " & To_String (Input) & " -> " & To_String (Output) & " "
               & Image (Forwarded (A_To_B)) & " packets, " & To_String (Output) & " -> " & To_String (Input) & " "
               & Image (Forwarded (B_To_A)) & " packets, " & Fixed (Elapsed, 1) & " s, "
               & Fixed (Long_Float (Forwarded (A_To_B) + Forwarded (B_To_A))
                          / Long_Float'Max (Elapsed, 1.0E-9) / 1.0E6, 3)
               & " Mpps, " & Image (Malformed) & " malformed, " & Image (Dropped) & " dropped");
         end;
      end;
      if M.Gone then
         Die (Gone_Message (M.Devices (M.Gone_Device)));
      end if;
   exception
      when E : others =>
         --  No backtrace, one line: an exception here is a bug or an OS failure Die did not name.
         Die ("internal error: " & Ada.Exceptions.Exception_Name (E) & " "
              & Ada.Exceptions.Exception_Message (E));
   end Main;

end Cli;
