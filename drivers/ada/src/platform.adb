with Ada.Text_IO;
with GNAT.OS_Lib;
with Interfaces.C; use Interfaces.C;
with Platform.Os;

package body Platform is

   Hook : Exit_Hook := null;

   procedure Set_Exit_Hook (Hook : Exit_Hook) is
   begin
      Platform.Hook := Hook;
   end Set_Exit_Hook;

   procedure Run_Exit_Hook is
      Once : constant Exit_Hook := Hook;
   begin
      Hook := null;
      if Once /= null then
         Once.all;
      end if;
   end Run_Exit_Hook;

   procedure Die (Message : String) is
   begin
      Run_Exit_Hook;
      Ada.Text_IO.Flush (Ada.Text_IO.Standard_Output);
      Ada.Text_IO.Put_Line (Ada.Text_IO.Standard_Error, Program_Name & ": " & Message);
      Ada.Text_IO.Flush (Ada.Text_IO.Standard_Error);
      GNAT.OS_Lib.OS_Exit (1);
   end Die;

   procedure Warn (Message : String) is
   begin
      Ada.Text_IO.Put_Line (Ada.Text_IO.Standard_Error, Program_Name & ": " & Message);
   end Warn;

   function Now return Long_Float is
      T : aliased Os.Timespec;
   begin
      if Os.Clock_Gettime (Os.CLOCK_MONOTONIC, T'Access) /= 0 then
         Die ("reading the monotonic clock: " & Last_Error);
      end if;
      return Long_Float (T.Seconds) + Long_Float (T.Nanoseconds) / 1.0E9;
   end Now;

   procedure Sleep_Microseconds (N : Natural) is
      Ignored : constant int := Os.Usleep (unsigned (N));
   begin
      null;
   end Sleep_Microseconds;

   Requested : Boolean := False with Atomic;

   procedure On_Signal (Signal : int) with Convention => C;
   procedure On_Signal (Signal : int) is
      pragma Unreferenced (Signal);
   begin
      Requested := True;
   end On_Signal;

   procedure Install_Termination_Handlers is
      --  signal () fails only for an invalid number or SIGKILL/SIGSTOP [signal(2)].
      Previous_Int : constant Os.Signal_Handler := Os.Signal (Os.SIGINT, On_Signal'Access);
      Previous_Term : constant Os.Signal_Handler := Os.Signal (Os.SIGTERM, On_Signal'Access);
      pragma Unreferenced (Previous_Int, Previous_Term);
   begin
      null;
   end Install_Termination_Handlers;

   function Termination_Requested return Boolean is (Requested);

   procedure Pin_To_Cpu (Cpu : Natural) is
      type Cpu_Set is array (0 .. 1023) of Boolean with Pack, Convention => C;
      Set : aliased Cpu_Set := (others => False);
   begin
      if Cpu > Cpu_Set'Last then
         Die ("--cpu" & Natural'Image (Cpu) & ": give a CPU number below 1024");
      end if;
      Set (Cpu) := True;
      if Os.Sched_Setaffinity (0, Set'Size / 8, Set'Address) /= 0 then
         Die ("pinning to CPU" & Natural'Image (Cpu) & ": " & Last_Error);
      end if;
   end Pin_To_Cpu;

   function Stdout_Is_Terminal return Boolean is (Os.Isatty (1) = 1);

   function Process_Id return Integer is (Integer (Os.Getpid));

   function Last_Errno return Integer is (GNAT.OS_Lib.Errno);

   function Last_Error return String is (GNAT.OS_Lib.Errno_Message);

   function Hex (Value : Unsigned_64; Width : Positive) return String is
      Digits_Of : constant String := "0123456789abcdef";
      Needed : Positive := 1;
   begin
      while Needed < 16 and then Shift_Right (Value, 4 * Needed) /= 0 loop
         Needed := Needed + 1;
      end loop;
      declare
         Result : String (1 .. Positive'Max (Width, Needed));
         V : Unsigned_64 := Value;
      begin
         for I in reverse Result'Range loop
            Result (I) := Digits_Of (Integer (V mod 16) + 1);
            V := V / 16;
         end loop;
         return Result;
      end;
   end Hex;

   function Image (Value : Unsigned_64) return String is
      S : constant String := Unsigned_64'Image (Value);
   begin
      return S (S'First + 1 .. S'Last);
   end Image;

   function Field (Line : String; N : Positive) return String is
      Count : Natural := 0;
      I : Natural := Line'First;
      Start : Natural;
   begin
      while I <= Line'Last loop
         if Line (I) /= ' ' then
            Start := I;
            while I <= Line'Last and then Line (I) /= ' ' loop
               I := I + 1;
            end loop;
            Count := Count + 1;
            if Count = N then
               return Line (Start .. I - 1);
            end if;
         end if;
         I := I + 1;
      end loop;
      return "";
   end Field;

   function Fixed (Value : Long_Float; Decimals : Natural) return String is
      Scale : constant Long_Float := 10.0 ** Decimals;
      Scaled : constant Unsigned_64 :=
        (if Value <= 0.0 then 0
         elsif Value >= 1.0E15 then 10 ** 15
         else Unsigned_64 (Long_Float'Rounding (Value * Scale)));
      Whole : constant String := Image (Scaled / Unsigned_64 (Scale));
      Part : constant String := Image (Scaled mod Unsigned_64 (Scale));
   begin
      if Decimals = 0 then
         return Whole;
      end if;
      return Whole & "." & (1 .. Decimals - Part'Length => '0') & Part;
   end Fixed;

end Platform;
