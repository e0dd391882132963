with Ada.Text_IO; use Ada.Text_IO;
with System.Address_To_Access_Conversions;
with Interfaces.C; use Interfaces.C;
with Platform.Os;
with System.Storage_Elements; use System.Storage_Elements;

package body Platform.Dma is

   use type System.Address;
   use type Os.Ssize_T;

   --  The mount point of the first hugetlbfs mount with 2 MiB pages, from /proc/mounts; "" if none.
   function Hugetlbfs_Mount return String is
      Mounts : File_Type;
   begin
      Open (Mounts, In_File, "/proc/mounts");
      while not End_Of_File (Mounts) loop
         declare
            Line : constant String := Get_Line (Mounts);
         begin
            if Field (Line, 3) = "hugetlbfs" then
               declare
                  Options : constant String := Field (Line, 4);
                  Size_At : Natural := 0;
               begin
                  for J in Options'First .. Options'Last - 8 loop
                     if Options (J .. J + 8) = "pagesize=" then
                        Size_At := J + 9;
                     end if;
                  end loop;
                  if Size_At = 0
                    or else (Size_At + 1 <= Options'Last and then Options (Size_At .. Size_At + 1) = "2M")
                  then
                     Close (Mounts);
                     return Field (Line, 2);
                  end if;
               end;
            end if;
         end;
      end loop;
      Close (Mounts);
      return "";
   exception
      when Name_Error | Use_Error => return "";
   end Hugetlbfs_Mount;

   procedure Hugepage_Error (Error : Integer; Length : Byte_Offset) with No_Return;
   procedure Hugepage_Error (Error : Integer; Length : Byte_Offset) is
   begin
      if Error = Os.ENOMEM or else Error = Os.ENOSPC or else Error = Os.EINVAL then
         Die ("not enough 2 MiB hugepages for " & Image (Unsigned_64 ((Length + 2 ** 20 - 1) / 2 ** 20))
              & " MiB of DMA memory: reserve more with `echo 1024 > /proc/sys/vm/nr_hugepages`"
              & " (scripts/setup does this)");
      end if;
      if Error = Os.EPERM or else Error = Os.EACCES then
         Die ("allocating hugepages needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo");
      end if;
      Die ("allocating hugepage memory: error" & Integer'Image (Error));
   end Hugepage_Error;

   procedure Find_Physical_Addresses (B : Block);

   Counter : Natural := 0;

   function Allocate (Length : Byte_Offset) return Block is
      Rounded : constant Byte_Offset := (Length + Hugepage_Bytes - 1) / Hugepage_Bytes * Hugepage_Bytes;
      Mount : constant String := Hugetlbfs_Mount;
      Map_Failed : constant System.Address := System'To_Address (Unsigned_64'Last);
   begin
      if Mount = "" then
         Die ("no hugetlbfs mount found: mount one with `mkdir -p /dev/hugepages && mount -t hugetlbfs"
              & " nodev /dev/hugepages` (scripts/setup does this)");
      end if;
      Counter := Counter + 1;
      declare
         Path : constant String :=
           Mount & "/dma-ada-" & Image (Unsigned_64 (Process_Id)) & "-" & Image (Unsigned_64 (Counter));
         Fd : constant int := Os.Open (To_C (Path), Os.O_RDWR + Os.O_CREAT + Os.O_EXCL + Os.O_CLOEXEC);
         Base : System.Address;
         Error : Integer;
         Ignored : int;
      begin
         if Fd < 0 then
            if Last_Errno = Os.EACCES or else Last_Errno = Os.EPERM then
               Die ("creating a hugepage file needs root (CAP_SYS_ADMIN): run the command as root, e.g."
                    & " with sudo");
            end if;
            Die ("creating " & Path & ": " & Last_Error);
         end if;
         if Os.Ftruncate (Fd, Os.Off_T (Rounded)) /= 0 then
            Error := Last_Errno;
            Ignored := Os.Unlink (To_C (Path));
            Hugepage_Error (Error, Rounded);
         end if;
         Base := Os.Mmap (System.Null_Address, size_t (Rounded), Os.PROT_READ + Os.PROT_WRITE,
                          Os.MAP_SHARED + Os.MAP_POPULATE, Fd, 0);
         Error := Last_Errno;
         --  The mapping keeps the pages; the name is not needed once mapped.
         Ignored := Os.Unlink (To_C (Path));
         Ignored := Os.Close (Fd);
         if Base = Map_Failed then
            Hugepage_Error (Error, Rounded);
         end if;
         return B : constant Block :=
           (Base => Base, Length => Rounded,
            Pages => new Page_Table (0 .. Natural (Rounded / Hugepage_Bytes) - 1))
         do
            Find_Physical_Addresses (B);
         end return;
      end;
   end Allocate;

   --  Each page's physical address from /proc/self/pagemap: 64-bit entries per base page, bit
   --  63 present, bits 0-54 the frame number (0 without CAP_SYS_ADMIN) [kernel pagemap docs].
   procedure Find_Physical_Addresses (B : Block) is
      Pagemap : constant int := Os.Open (To_C ("/proc/self/pagemap"), Os.O_RDONLY + Os.O_CLOEXEC);
      Base_Page : constant Unsigned_64 := Unsigned_64 (Os.Sysconf (Os.SC_PAGESIZE));
      Entry_Value : aliased Unsigned_64;
      Ignored : int;
   begin
      if Pagemap < 0 then
         Die ("opening /proc/self/pagemap: " & Last_Error);
      end if;
      for Page in B.Pages'Range loop
         declare
            Address : constant System.Address := B.Base + Storage_Offset (Page) * Hugepage_Bytes;
            Touch : Unsigned_8 with Import, Volatile, Address => Address;
            Virtual : constant Unsigned_64 := Unsigned_64 (To_Integer (Address));
         begin
            Touch := 0; -- present in our page tables
            if Os.Pread (Pagemap, Entry_Value'Address, 8, Os.Off_T (Virtual / Base_Page * 8)) /= 8 then
               Die ("reading pagemap: " & Last_Error);
            end if;
            if Shift_Right (Entry_Value, 63) = 0 then
               Die ("hugepage not present after touching it: pagemap");
            end if;
            if (Entry_Value and (2 ** 55 - 1)) = 0 then
               Die ("reading physical addresses from /proc/self/pagemap needs root (CAP_SYS_ADMIN): run"
                    & " the command as root, e.g. with sudo");
            end if;
            B.Pages (Page) := (Entry_Value and (2 ** 55 - 1)) * Base_Page + Virtual mod Base_Page;
         end;
      end loop;
      Ignored := Os.Close (Pagemap);
   end Find_Physical_Addresses;

   function Phys (B : Block; Offset : Byte_Offset) return Unsigned_64 is
   begin
      if Offset >= B.Length then
         Die ("offset 0x" & Hex (Unsigned_64 (Offset), 1) & " outside a DMA block of 0x"
              & Hex (Unsigned_64 (B.Length), 1) & " bytes");
      end if;
      return B.Pages (Natural (Offset / Hugepage_Bytes)) + Unsigned_64 (Offset mod Hugepage_Bytes);
   end Phys;

   procedure Place (Last_End : in out Byte_Offset; Size, Align : Byte_Offset; At_Offset : out Byte_Offset) is
   begin
      At_Offset := (Last_End + Align - 1) / Align * Align;
      if At_Offset / Hugepage_Bytes /= (At_Offset + Size - 1) / Hugepage_Bytes then
         At_Offset := (At_Offset + Hugepage_Bytes - 1) / Hugepage_Bytes * Hugepage_Bytes;
      end if;
      Last_End := At_Offset + Size;
   end Place;

   package body Views is

      package Conversions is new System.Address_To_Access_Conversions (Object);

      function View (B : Block; Offset : Byte_Offset) return Object_Access is
         --  Safe because of the checks below: the object lies wholly inside the mapping, which
         --  lives until the process exits, and is aligned for its type. (What the device reaches
         --  through one physical address, a ring, is kept on one hugepage by Place.)
         Size : constant Byte_Offset := Byte_Offset (Object'Max_Size_In_Storage_Elements);
         Address : constant System.Address := B.Base + Storage_Offset (Offset);
      begin
         if Size = 0 or else Offset + Size > B.Length
           or else To_Integer (Address) mod Integer_Address (Object'Alignment) /= 0
         then
            Die ("a DMA view of" & Byte_Offset'Image (Size) & " bytes at offset" & Byte_Offset'Image (Offset)
                 & " does not fit its block: a layout bug in the driver");
         end if;
         return Object_Access (Conversions.To_Pointer (Address));
      end View;

   end Views;

end Platform.Dma;
