with Ada.Directories;
with Ada.Text_IO; use Ada.Text_IO;
with Interfaces.C; use Interfaces.C;
with Platform.Os;
with System.Address_To_Access_Conversions;

package body Platform.Pci is

   use type Os.Ssize_T;

   package Bar0_Conversions is new System.Address_To_Access_Conversions (Bar0);
   use type Ada.Directories.File_Size;

   procedure Not_Root (What : String) with No_Return;
   procedure Not_Root (What : String) is
   begin
      Die (What & " needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo");
   end Not_Root;

   --  The value of Text read as hexadecimal, if it has 1 to Width digits and is at most Max.
   function Parse_Hex (Text : String; Width : Positive; Max : Unsigned_64; Value : out Unsigned_64)
      return Boolean
   is
      D : Unsigned_64;
   begin
      Value := 0;
      if Text'Length = 0 or else Text'Length > Width then
         return False;
      end if;
      for C of Text loop
         case C is
            when '0' .. '9' => D := Character'Pos (C) - Character'Pos ('0');
            when 'a' .. 'f' => D := Character'Pos (C) - Character'Pos ('a') + 10;
            when 'A' .. 'F' => D := Character'Pos (C) - Character'Pos ('A') + 10;
            when others => return False;
         end case;
         Value := Value * 16 + D;
      end loop;
      return Value <= Max;
   end Parse_Hex;

   function Find (Text : String; C : Character; From : Natural) return Natural is
   begin
      for I in From .. Text'Last loop
         if Text (I) = C then
            return I;
         end if;
      end loop;
      return 0;
   end Find;

   --  DDDD:BB:DD.F or BB:DD.F to DDDD:BB:DD.F in lower case.
   function Normalize (Address : String) return Function_Address is
      First : constant Natural := Find (Address, ':', Address'First);
      Second : constant Natural := (if First = 0 then 0 else Find (Address, ':', First + 1));
      Dot : constant Natural := Find (Address, '.', (if Second /= 0 then Second else First) + 1);
      Domain, Bus, Dev, Fn : Unsigned_64 := 0;
      Ok : Boolean;
   begin
      if First = 0 or else Dot = 0 or else (Second /= 0 and then Find (Address, ':', Second + 1) /= 0)
      then
         Ok := False;
      elsif Second /= 0 then
         Ok := Parse_Hex (Address (Address'First .. First - 1), 4, 16#FFFF#, Domain)
           and then Parse_Hex (Address (First + 1 .. Second - 1), 2, 16#FF#, Bus)
           and then Parse_Hex (Address (Second + 1 .. Dot - 1), 2, 16#1F#, Dev)
           and then Parse_Hex (Address (Dot + 1 .. Address'Last), 1, 7, Fn);
      else
         Ok := Parse_Hex (Address (Address'First .. First - 1), 2, 16#FF#, Bus)
           and then Parse_Hex (Address (First + 1 .. Dot - 1), 2, 16#1F#, Dev)
           and then Parse_Hex (Address (Dot + 1 .. Address'Last), 1, 7, Fn);
      end if;
      if not Ok then
         Die ("`" & Address & "` is not a PCI address: write it as DDDD:BB:DD.F (e.g. 0000:5e:00.0)"
              & " or BB:DD.F");
      end if;
      return Hex (Domain, 4) & ":" & Hex (Bus, 2) & ":" & Hex (Dev, 2) & "." & Hex (Fn, 1);
   end Normalize;

   --  The first line of the file at Path ("" if it is empty); Name_Error or Use_Error if it
   --  cannot be read.
   function Line_Of (Path : String) return String is
      F : File_Type;
   begin
      Open (F, In_File, Path);
      declare
         Line : constant String := (if End_Of_File (F) then "" else Get_Line (F));
      begin
         Close (F);
         return Line;
      end;
   end Line_Of;

   function First_Line (Path : String) return String is
   begin
      return Line_Of (Path);
   exception
      when Name_Error | Use_Error =>
         Die ("reading " & Path & ": " & Last_Error);
   end First_Line;

   function First_Line_Or_Empty (Path : String) return String is
   begin
      return Line_Of (Path);
   exception
      when Name_Error | Use_Error | End_Error => return "";
   end First_Line_Or_Empty;

   function Read_Hex_File (F : Pci_Function; Name : String) return Unsigned_64 is
      Path : constant String := To_String (F.Dir) & "/" & Name;
      Line : constant String := First_Line (Path);
      Start : constant Natural :=
        (if Line'Length >= 2 and then Line (Line'First .. Line'First + 1) = "0x"
         then Line'First + 2 else Line'First);
      Value : Unsigned_64;
   begin
      if not Parse_Hex (Line (Start .. Line'Last), 16, Unsigned_64'Last, Value) then
         Die ("parsing " & Path & ": not a hexadecimal number");
      end if;
      return Value;
   end Read_Hex_File;

   function Config_Read_16 (F : Pci_Function; Offset : Os.Off_T) return Unsigned_16 is
      V : aliased Unsigned_16 := 0;
   begin
      if Os.Pread (int (F.Config), V'Address, 2, Offset) /= 2 then
         Die ("reading " & To_String (F.Dir) & "/config: " & Last_Error);
      end if;
      return V;
   end Config_Read_16;

   procedure Config_Write_16 (F : Pci_Function; Offset : Os.Off_T; Value : Unsigned_16) is
      V : aliased Unsigned_16 := Value;
   begin
      if Os.Pwrite (int (F.Config), V'Address, 2, Offset) /= 2 then
         Die ("writing " & To_String (F.Dir) & "/config: " & Last_Error);
      end if;
   end Config_Write_16;

   --  The process holding a flock on Fd, from /proc/locks, whose lines read
   --  `1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF` (device in hex, inode in decimal); 0 if
   --  unknown. Waiters read `1: -> FLOCK …` and are not owners.
   function Lock_Owner (Fd : int) return Natural is
      St : aliased Os.Stat_Buffer;
      Locks : File_Type;
      Owner : Natural := 0;
   begin
      if Os.Fstat (Fd, St'Access) /= 0 then
         return 0;
      end if;
      declare
         --  glibc's major () and minor () of a dev_t.
         Major : constant Unsigned_64 :=
           (Shift_Right (St.Device, 8) and 16#FFF#) or (Shift_Right (St.Device, 32) and not 16#FFF#);
         Minor : constant Unsigned_64 :=
           (St.Device and 16#FF#) or (Shift_Right (St.Device, 12) and not 16#FF#);
         Want : constant String :=
           (if Major > 16#FF# then Image (Major) else Hex (Major, 2)) & ":"
           & (if Minor > 16#FF# then Image (Minor) else Hex (Minor, 2)) & ":" & Image (St.Inode);
      begin
         Open (Locks, In_File, "/proc/locks");
         while Owner = 0 and then not End_Of_File (Locks) loop
            declare
               Line : constant String := Get_Line (Locks);
            begin
               if Field (Line, 2) = "FLOCK" and then Field (Line, 6) = Want then
                  Owner := Natural'Value (Field (Line, 5));
               end if;
            exception
               when Constraint_Error => null;
            end;
         end loop;
         Close (Locks);
      end;
      return Owner;
   exception
      when Name_Error | Use_Error => return 0;
   end Lock_Owner;

   --  An exclusive flock on the config file, held until exit, so that a second driver refuses a
   --  device another one runs instead of resetting it under it.
   procedure Claim (F : Pci_Function) is
      Owner : Natural;
   begin
      if Os.Flock (int (F.Config), Os.LOCK_EX + Os.LOCK_NB) = 0 then
         return;
      end if;
      if Last_Errno /= Os.EWOULDBLOCK then
         Die ("locking " & To_String (F.Dir) & "/config: " & Last_Error);
      end if;
      Owner := Lock_Owner (int (F.Config));
      if Owner = 0 then
         Die ("PCI function " & F.Address & " is in use by another process: stop that driver first,"
              & " or give another port");
      end if;
      declare
         Pid : constant String := Image (Unsigned_64 (Owner));
         Name : constant String := First_Line_Or_Empty ("/proc/" & Pid & "/comm");
      begin
         Die ("PCI function " & F.Address & " is in use by process " & Pid & " (" & Name
              & "): stop that driver first, or give another port");
      end;
   end Claim;

   function Open
     (Root, Address : String; Vendor, Device : Unsigned_16; Expected : String) return Pci_Function
   is
      use Ada.Directories;
      Normal : constant Function_Address := Normalize (Address);
      Dir : constant String := Root & "/" & Normal;
      F : Pci_Function := (Address => Normal, Dir => To_Unbounded_String (Dir), Config => -1);
   begin
      if not Exists (Dir) or else Kind (Dir) /= Directory then
         Die ("PCI function " & Normal & " not found under " & Root & ": list the functions with `ls "
              & Root & "` (for nicsim's devices pass --sysfs <nicsim root>/devices or use `nicsim"
              & " exec`)");
      end if;
      F.Config := Integer (Os.Open (To_C (Dir & "/config"), Os.O_RDWR + Os.O_CLOEXEC));
      if F.Config < 0 then
         if Last_Errno = Os.EACCES or else Last_Errno = Os.EPERM then
            Not_Root ("writing PCI configuration space");
         end if;
         Die ("opening " & Dir & "/config: " & Last_Error);
      end if;
      declare
         V : constant Unsigned_64 := Read_Hex_File (F, "vendor");
         D : constant Unsigned_64 := Read_Hex_File (F, "device");
      begin
         if V /= Unsigned_64 (Vendor) or else D /= Unsigned_64 (Device) then
            Die ("PCI function " & Normal & " is " & Hex (V, 4) & ":" & Hex (D, 4) & ", not "
                 & Expected & ": pass the address of " & Expected);
         end if;
      end;
      declare
         Target : char_array (1 .. 4096);
         N : constant Os.Ssize_T := Os.Readlink (To_C (Dir & "/driver"), Target'Address, 4095);
      begin
         if N > 0 then
            declare
               Link : constant String := To_Ada (Target (1 .. size_t (N)), Trim_Nul => False);
               Slash : Natural := 0;
            begin
               for I in Link'Range loop
                  if Link (I) = '/' then
                     Slash := I;
                  end if;
               end loop;
               Die ("PCI function " & Normal & " is bound to the kernel driver `"
                    & Link (Slash + 1 .. Link'Last) & "`: if it is yours to take, unbind it with `echo "
                    & Normal & " > " & Root & "/" & Normal & "/driver/unbind` (we never unbind"
                    & " automatically)");
            end;
         end if;
      end;
      Claim (F);
      --  COMMAND register (config 0x04): memory space (bit 1) and bus master (bit 2)
      --  [82599 datasheet 9.3.3.3].
      Config_Write_16 (F, 4, Config_Read_16 (F, 4) or 2#110#);
      return F;
   end Open;

   function Map_Bar0 (F : Pci_Function) return not null Bar0_Access is
      use type System.Address;
      Path : constant String := To_String (F.Dir) & "/resource0";
      Fd : constant int := Os.Open (To_C (Path), Os.O_RDWR + Os.O_CLOEXEC);
      Size : Ada.Directories.File_Size;
      Map : System.Address;
      Map_Failed : constant System.Address := System'To_Address (Unsigned_64'Last);
   begin
      if Fd < 0 then
         if Last_Errno = Os.EACCES or else Last_Errno = Os.EPERM then
            Not_Root ("mapping a PCI BAR");
         end if;
         Die ("opening " & Path & ": " & Last_Error);
      end if;
      Size := Ada.Directories.Size (Path);
      if Size /= Bar0_Bytes then
         Die (Path & " has 0x" & Hex (Unsigned_64 (Size), 1) & " bytes, expected 0x"
              & Hex (Bar0_Bytes, 1) & ": BAR0 size mismatch");
      end if;
      Map := Os.Mmap (System.Null_Address, Bar0_Bytes, Os.PROT_READ + Os.PROT_WRITE, Os.MAP_SHARED,
                      Fd, 0);
      if Map = Map_Failed or else Map = System.Null_Address then
         Die ("mapping " & Path & ": " & Last_Error);
      end if;
      if Os.Close (Fd) /= 0 then
         Die ("closing " & Path & ": " & Last_Error);
      end if;
      --  The mapping is exactly one Bar0 (its size is checked above) and lives until the
      --  process exits.
      return Bar0_Access (Bar0_Conversions.To_Pointer (Map));
   end Map_Bar0;

end Platform.Pci;
