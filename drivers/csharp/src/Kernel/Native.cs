// The C library calls the kernel needs: files, mappings, locks and CPU affinity. Only this
// assembly (compiled with -unsafe) may call them; the driver's assembly cannot declare them.
using System;
using System.Runtime.InteropServices;

namespace Safenic.Kernel
{
    internal static unsafe class Libc
    {
        // The versioned name: "libc.so" is a linker script that dlopen cannot load.
        private const string C = "libc.so.6";

        public const int O_RDONLY = 0, O_RDWR = 2, O_CREAT = 0x40, O_EXCL = 0x80, O_CLOEXEC = 0x80000;
        public const int PROT_READ = 1, PROT_WRITE = 2, MAP_SHARED = 1, MAP_POPULATE = 0x8000;
        public const int LOCK_EX = 2, LOCK_NB = 4;
        public const int EPERM = 1, ENOENT = 2, EACCES = 13, ENOMEM = 12, EINVAL = 22, ENOSPC = 28, EWOULDBLOCK = 11;

        [DllImport(C, SetLastError = true)] public static extern int open(string path, int flags, int mode);
        [DllImport(C, SetLastError = true)] public static extern int close(int fd);
        [DllImport(C, SetLastError = true)] public static extern long pread(int fd, void* buf, ulong count, long offset);
        [DllImport(C, SetLastError = true)] public static extern long pwrite(int fd, void* buf, ulong count, long offset);
        [DllImport(C, SetLastError = true)] public static extern IntPtr mmap(IntPtr addr, ulong len, int prot, int flags, int fd, long offset);
        [DllImport(C, SetLastError = true)] public static extern int ftruncate(int fd, long len);
        [DllImport(C, SetLastError = true)] public static extern int unlink(string path);
        [DllImport(C, SetLastError = true)] public static extern int flock(int fd, int operation);
        [DllImport(C, SetLastError = true)] public static extern int sched_setaffinity(int pid, ulong size, byte* mask);
        [DllImport(C)] public static extern int getpid();
        [DllImport(C)] public static extern int isatty(int fd);
        [DllImport(C)] public static extern void _exit(int status);
        [DllImport(C)] private static extern IntPtr strerror(int errnum);

        public static int Errno => Marshal.GetLastWin32Error();

        // open(2), or the program ends: "needs root" (naming `rootFor`) when permission is
        // refused, else "<verb> <path>: <reason>".
        public static int OpenOrDie(string path, int flags, int mode, string rootFor, string verb)
        {
            int fd = open(path, flags, mode);
            if (fd < 0)
            {
                int e = Errno;
                if (e == EACCES || e == EPERM)
                {
                    throw Fail.NotRoot(rootFor);
                }
                throw Fail.Die(verb + " " + path + ": " + Describe(e));
            }
            return fd;
        }

        public static string Describe(int errnum) => Marshal.PtrToStringAnsi(strerror(errnum));

        public static readonly IntPtr MapFailed = new IntPtr(-1);
    }
}
