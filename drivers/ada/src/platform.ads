--  The OS boundary of the Ada driver: one-line errors, the clock, signals, CPU pinning. With
--  its children Platform.Pci (PCI functions, BAR0) and Platform.Dma (hugepage memory with
--  physical addresses) it is the only part of the driver allowed Ada's unsafe features
--  (imported C, unchecked conversions, address overlays); the audit counts them.
with Interfaces; use Interfaces;

package Platform is

   Program_Name : constant String := "safenic-ada";

   --  Runs the exit hook, prints "safenic-ada: <Message>" on one line to stderr and exits 1.
   --  Every setup failure ends here.
   procedure Die (Message : String) with No_Return;

   --  Prints "safenic-ada: <Message>" on one line to stderr and goes on.
   procedure Warn (Message : String);

   --  What Die (and a normal exit) runs first: stopping the device's queues before the memory
   --  they point into goes with the process.
   type Exit_Hook is access procedure;
   procedure Set_Exit_Hook (Hook : Exit_Hook);
   procedure Run_Exit_Hook;

   --  Seconds on the monotonic clock.
   function Now return Long_Float;
   procedure Sleep_Microseconds (N : Natural);

   --  SIGINT and SIGTERM set a flag that Termination_Requested reads.
   procedure Install_Termination_Handlers;
   function Termination_Requested return Boolean with Inline;

   procedure Pin_To_Cpu (Cpu : Natural);
   function Stdout_Is_Terminal return Boolean;
   function Process_Id return Integer;

   --  The text of errno for the last failed call.
   function Last_Error return String;
   function Last_Errno return Integer;

   --  Hexadecimal image, lower case, zero-padded to at least Width digits.
   function Hex (Value : Unsigned_64; Width : Positive) return String;
   --  Decimal image without the leading blank.
   function Image (Value : Unsigned_64) return String;
   --  Word N of Line, words separated by blanks (as in /proc/mounts and /proc/locks); "" if the
   --  line has fewer.
   function Field (Line : String; N : Positive) return String;
   --  Fixed-point image with Decimals digits after the point.
   function Fixed (Value : Long_Float; Decimals : Natural) return String;

end Platform;
