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
     & " [--mac-rewrite paper|none] [--outputs 1-64] [--seconds S] [--cpu N] [--flow-control]"
     & " [--queues 1-16] [--cores LIST]";

   Chosen : Model;
   Input, Output, Sysfs : Unbounded_String;
   Rewrite : Boolean := True;
   Outputs : Output_Count := 1;
   Outputs_Given : Boolean := False;
   Seconds : Long_Float := 0.0; -- 0: until a signal
   Cpu : Integer := -1;         -- -1: not pinned
   Flow_Control : Boolean := False;
   --  Queue pairs RSS spreads the flows over, and the CPU of each forwarding thread.
   Queues : Rss_Queue_Count := 1;
   Cores : array (1 .. Rss_Queues) of Natural := (others => 0);
   Core_Count : Natural := 0;

   --  Reads --cores' comma-separated CPU numbers into Cores.
   procedure Parse_Cores (V : String) is
      From : Positive := V'First;
      Cpu : Natural;
   begin
      loop
         declare
            Comma : Natural := From;
         begin
            while Comma <= V'Last and then V (Comma) /= ',' loop
               Comma := Comma + 1;
            end loop;
            begin
               Cpu := Natural'Value (V (From .. Comma - 1));
            exception
               when Constraint_Error => Die ("--cores " & V & ": give CPU numbers, comma-separated");
            end;
            for K in 1 .. Core_Count loop
               if Cores (K) = Cpu then
                  Die ("--cores: a CPU is listed twice: give each core once");
               end if;
            end loop;
            if Core_Count = Cores'Last then
               Die ("--cores " & V & ": give at most" & Natural'Image (Cores'Last) & " cores");
            end if;
            Core_Count := Core_Count + 1;
            Cores (Core_Count) := Cpu;
            exit when Comma > V'Last;
            From := Comma + 1;
         end;
      end loop;
   end Parse_Cores;

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
            elsif Arg = "--queues" then
               declare
                  V : constant String := Value_Of;
               begin
                  Queues := Rss_Queue_Count'Value (V);
               exception
                  when Constraint_Error =>
                     Die ("--queues " & V & ": give 1 to 16 queue pairs (RSS spreads over 16)");
               end;
            elsif Arg = "--cores" then
               Parse_Cores (Value_Of);
            else
               Die ("unknown argument `" & Arg & "`");
            end if;
         end;
         I := I + 1;
      end loop;
      if Chosen /= Restricted and then Outputs_Given and then Outputs /= 1 then
         Die ("--outputs applies to the restricted model only (const has 1, flexible has 1 queue)");
      end if;
      if Cpu >= 0 and then Core_Count > 0 then
         Die ("give --cpu or --cores, not both");
      end if;
      if Core_Count > Queues then
         Die ("--cores lists" & Natural'Image (Core_Count) & " cores for" & Natural'Image (Queues)
              & " queue pairs: give at most as many cores as --queues");
      end if;
      if Queues * Outputs > 64 then
         Die ("--queues" & Natural'Image (Queues) & " with --outputs" & Natural'Image (Outputs) & " needs"
              & Natural'Image (Queues * Outputs) & " TX queues per port; a port has 64: give fewer");
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

   Last_Pair : Pair_Index;

   --  The queue pairs on this thread (no --cores), or each core's even share on a task of its
   --  own, pinned there, as the Rust driver's serve_on_cores; counts and a gone device are added up.
   --  Forward runs the model over the pairs First .. Last with meter M, adding to Forwarded.
   generic
      with procedure Forward (First, Last : Pair_Index; M : in out Meter; Forwarded : in out Counts);
   procedure Serve_On_Cores;

   procedure Serve_On_Cores is
   begin
      if Core_Count <= 1 then
         if Core_Count = 1 then
            Pin_To_Cpu (Cores (1));
         end if;
         Forward (0, Last_Pair, M, Forwarded);
         return;
      end if;
      declare
         type Share is record
            First, Last : Pair_Index;
            Cpu : Natural;
            M : Meter;
            Forwarded : Counts;
         end record;
         Shares : array (1 .. Core_Count) of Share;
         Each : constant Natural := Queues / Core_Count;
         More : constant Natural := Queues mod Core_Count;
         First : Natural := 0;
      begin
         for T in Shares'Range loop
            declare
               N : constant Natural := Each + (if T <= More then 1 else 0);
            begin
               Shares (T) := (First => Pair_Index (First), Last => Pair_Index (First + N - 1),
                              Cpu => Cores (T), M => M, Forwarded => (others => 0));
               Shares (T).M.Progress := M.Progress and then T = 1;
               First := First + N;
            end;
         end loop;
         declare
            task type Server is
               entry Start (Share_Index : Positive);
            end Server;
            task body Server is
               T : Positive;
            begin
               accept Start (Share_Index : Positive) do
                  T := Share_Index;
               end Start;
               Pin_To_Cpu (Shares (T).Cpu);
               Forward (Shares (T).First, Shares (T).Last, Shares (T).M, Shares (T).Forwarded);
            exception
               when E : others =>
                  Die ("internal error in a forwarding task: " & Ada.Exceptions.Exception_Name (E) & " "
                       & Ada.Exceptions.Exception_Message (E));
            end Server;
            Servers : array (Shares'Range) of Server;
         begin
            for T in Servers'Range loop
               Servers (T).Start (T);
            end loop;
         end; -- waits for every task
         for S of Shares loop
            for D in Direction_Id loop
               Forwarded (D) := Forwarded (D) + S.Forwarded (D);
            end loop;
            if S.M.Gone and then not M.Gone then
               M.Gone := True;
               M.Gone_Device := S.M.Gone_Device;
            end if;
         end loop;
      end;
   end Serve_On_Cores;

   procedure Run_Agents is
      To_B : constant Device_Array (0 .. Output_Index (Outputs - 1)) := (others => Opened (B_To_A));
      To_A : constant Device_Array (0 .. Output_Index (Outputs - 1)) := (others => Opened (A_To_B));
      --  The aggregate creates each pair's agents in turn: each takes the next free RX queue.
      Pairs : Agent_Pairs (0 .. Last_Pair) :=
        (others => (AB => Create (Opened (A_To_B), To_B), BA => Create (Opened (B_To_A), To_A)));

      procedure Forward (First, Last : Pair_Index; M : in out Meter; Forwarded : in out Counts) is
      begin
         if Chosen = Const then
            Forward_Const (Pairs (First .. Last), Rewrite, M, Forwarded);
         else
            Forward_Restricted (Pairs (First .. Last), Output_Index (Outputs - 1), Rewrite, M, Forwarded);
         end if;
      end Forward;

      procedure Serve is new Serve_On_Cores (Forward);
   begin
      Serve;
      for P of Pairs loop
         Malformed := Malformed + P.AB.Malformed + P.BA.Malformed;
      end loop;
   end Run_Agents;

   procedure Run_Directions is
      --  "Pool inversion": the RX queue of one port and the TX queue of the other share a pool.
      Pairs : Direction_Pairs (0 .. Last_Pair) :=
        (others => (AB => (Queues => Create (Opened (A_To_B), Opened (B_To_A)),
                           Items => (others => (0, 0)), Waiting => 0, Dropped => 0),
                    BA => (Queues => Create (Opened (B_To_A), Opened (A_To_B)),
                           Items => (others => (0, 0)), Waiting => 0, Dropped => 0)));
      Dropped_AB, Dropped_BA : Unsigned_64;

      procedure Forward (First, Last : Pair_Index; M : in out Meter; Forwarded : in out Counts) is
      begin
         Forward_Flexible (Pairs (First .. Last), Rewrite, Flow_Control, M, Forwarded);
      end Forward;

      procedure Serve is new Serve_On_Cores (Forward);
   begin
      Serve;
      for P of Pairs loop
         Stop (P.AB, Dropped_AB);
         Stop (P.BA, Dropped_BA);
         Malformed := Malformed + P.AB.Queues.Rx.Malformed + P.BA.Queues.Rx.Malformed;
         Dropped := Dropped + Dropped_AB + Dropped_BA;
      end loop;
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
      --  One queue pair needs no RSS: every frame reaches queue 0.
      if Queues > 1 then
         for D of Opened loop
            Enable_Rss (D, Queues);
         end loop;
      end if;
      Last_Pair := Pair_Index (Queues - 1);
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
