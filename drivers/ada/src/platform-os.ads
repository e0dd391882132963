--  The C library calls the platform packages make, in one place. Private: only Platform and
--  its children see them.
with Interfaces.C; use Interfaces.C;
with Interfaces.C.Strings;
with System;

private package Platform.Os is

   subtype Chars is Interfaces.C.Strings.chars_ptr;

   O_RDONLY : constant := 0;
   O_RDWR : constant := 2;
   O_CREAT : constant := 8#100#;
   O_EXCL : constant := 8#200#;
   O_CLOEXEC : constant := 8#2000000#;
   PROT_READ : constant := 1;
   PROT_WRITE : constant := 2;
   MAP_SHARED : constant := 1;
   MAP_POPULATE : constant := 16#8000#;
   LOCK_EX : constant := 2;
   LOCK_NB : constant := 4;
   EPERM : constant := 1;
   ENOENT : constant := 2;
   ENOMEM : constant := 12;
   EACCES : constant := 13;
   EINVAL : constant := 22;
   ENOSPC : constant := 28;
   EWOULDBLOCK : constant := 11;

   type Off_T is range -2 ** 63 .. 2 ** 63 - 1 with Size => 64;
   type Ssize_T is range -2 ** 63 .. 2 ** 63 - 1 with Size => 64;

   function Open (Path : char_array; Flags : int; Mode : unsigned := 8#600#) return int
     with Import, Convention => C, External_Name => "open";
   function Close (Fd : int) return int
     with Import, Convention => C, External_Name => "close";
   function Pread (Fd : int; Buf : System.Address; Count : size_t; Offset : Off_T) return Ssize_T
     with Import, Convention => C, External_Name => "pread";
   function Pwrite (Fd : int; Buf : System.Address; Count : size_t; Offset : Off_T) return Ssize_T
     with Import, Convention => C, External_Name => "pwrite";
   function Ftruncate (Fd : int; Length : Off_T) return int
     with Import, Convention => C, External_Name => "ftruncate";
   function Unlink (Path : char_array) return int
     with Import, Convention => C, External_Name => "unlink";
   function Mmap
     (Addr : System.Address; Length : size_t; Prot, Flags, Fd : int; Offset : Off_T)
      return System.Address
     with Import, Convention => C, External_Name => "mmap";
   function Flock (Fd : int; Operation : int) return int
     with Import, Convention => C, External_Name => "flock";
   function Readlink (Path : char_array; Buf : System.Address; Size : size_t) return Ssize_T
     with Import, Convention => C, External_Name => "readlink";
   function Getpid return int
     with Import, Convention => C, External_Name => "getpid";
   function Isatty (Fd : int) return int
     with Import, Convention => C, External_Name => "isatty";
   function Usleep (Microseconds : unsigned) return int
     with Import, Convention => C, External_Name => "usleep";
   function Sched_Setaffinity (Pid : int; Size : size_t; Mask : System.Address) return int
     with Import, Convention => C, External_Name => "sched_setaffinity";
   function Sysconf (Name : int) return long
     with Import, Convention => C, External_Name => "sysconf";
   SC_PAGESIZE : constant := 30;

   type Timespec is record
      Seconds : long;
      Nanoseconds : long;
   end record with Convention => C;
   function Clock_Gettime (Clock : int; Time : access Timespec) return int
     with Import, Convention => C, External_Name => "clock_gettime";
   CLOCK_MONOTONIC : constant := 1;

   --  struct stat of x86-64 Linux: st_dev and st_ino first, 144 bytes in all.
   type Stat_Buffer is record
      Device : Interfaces.Unsigned_64;
      Inode : Interfaces.Unsigned_64;
      Rest : char_array (1 .. 128);
   end record with Convention => C;
   function Fstat (Fd : int; Buf : access Stat_Buffer) return int
     with Import, Convention => C, External_Name => "fstat";

   type Signal_Handler is access procedure (Signal : int) with Convention => C;
   function Signal (Number : int; Handler : Signal_Handler) return Signal_Handler
     with Import, Convention => C, External_Name => "signal";
   SIGINT : constant := 2;
   SIGTERM : constant := 15;

end Platform.Os;
