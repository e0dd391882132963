--  DMA memory: blocks of 2 MiB hugepages from a hugetlbfs file, zeroed and faulted in, with the
--  physical address of each page, and typed views of places in them. View is the one way the
--  rest of the driver gets at device-shared memory: it checks that the object lies inside the
--  block and is aligned. Place keeps what the device reads through one physical address (a
--  ring) on one hugepage: only memory within a page is physically contiguous.
private with System;

package Platform.Dma is

   Hugepage_Bytes : constant := 2 * 1024 * 1024;

   type Byte_Offset is range 0 .. 2 ** 40;

   type Block is private;

   --  Length rounded up to whole hugepages.
   function Allocate (Length : Byte_Offset) return Block;

   --  The physical address of Offset, for the device.
   function Phys (B : Block; Offset : Byte_Offset) return Unsigned_64;

   --  Places an object of Size bytes aligned to Align after Last_End so that it does not cross
   --  a hugepage; returns its offset and moves Last_End past it.
   procedure Place (Last_End : in out Byte_Offset; Size, Align : Byte_Offset; At_Offset : out Byte_Offset);

   --  The object at Offset of B. Dies unless it lies inside B, aligned to Object'Alignment.
   generic
      type Object is limited private;
      type Object_Access is not null access all Object;
   package Views is
      function View (B : Block; Offset : Byte_Offset) return Object_Access;
   end Views;

private

   type Page_Table is array (Natural range <>) of Unsigned_64;
   type Page_Table_Access is access Page_Table;

   type Block is record
      Base : System.Address;
      Length : Byte_Offset;
      Pages : Page_Table_Access;
   end record;

end Platform.Dma;
