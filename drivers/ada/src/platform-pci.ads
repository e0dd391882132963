--  PCI functions under a sysfs root, and BAR0 mapped as an array of volatile registers. The
--  same checks, order and one-line messages as the Rust and C drivers.
with Ada.Strings.Unbounded; use Ada.Strings.Unbounded;

package Platform.Pci is

   Bar0_Bytes : constant := 16#20000#;

   --  A 32-bit device register: every read and write of it reaches the device.
   type Register is mod 2 ** 32 with Volatile;
   type Register_Access is not null access all Register;
   type Register_Index is range 0 .. Bar0_Bytes / 4 - 1;
   type Bar0 is array (Register_Index) of aliased Register;
   --  Null only in a device record not yet opened.
   type Bar0_Access is access all Bar0;

   --  DDDD:BB:DD.F, lower case.
   subtype Function_Address is String (1 .. 12);

   type Pci_Function is record
      Address : Function_Address;
      Dir : Unbounded_String;
      Config : Integer;
   end record;

   --  Opens Address under Root: checks it is Vendor:Device, not bound to a kernel driver (never
   --  unbinds it), takes it for this process (an exclusive flock on its config file, held until
   --  exit), and enables memory space and bus mastering. Dies with a message naming the fix.
   function Open
     (Root, Address : String; Vendor, Device : Unsigned_16; Expected : String) return Pci_Function;

   --  Maps resource0 whole; dies unless it has exactly Bar0_Bytes bytes.
   function Map_Bar0 (F : Pci_Function) return not null Bar0_Access;

end Platform.Pci;
