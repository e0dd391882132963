// What System.IO of the runtimes here cannot tell: a symbolic link's target, and a file's
// device and inode in the form /proc/locks prints them.
using System;
using System.Text;

namespace Safenic.Kernel
{
    internal static unsafe class Files
    {
        [System.Runtime.InteropServices.DllImport("libc.so.6", SetLastError = true)]
        private static extern long readlink(string path, byte* buf, ulong size);

        [System.Runtime.InteropServices.DllImport("libc.so.6", SetLastError = true)]
        private static extern int stat(string path, byte* buf);

        // The target of the link at `path`, or null if it is not a link.
        public static string LinkTarget(string path)
        {
            byte* buf = stackalloc byte[4096];
            long n = readlink(path, buf, 4095);
            return n > 0 ? Encoding.UTF8.GetString(buf, (int)n) : null;
        }

        // "MAJ:MIN:INODE" (hex, hex, decimal) of `path`, or null if it cannot be read.
        public static string LockId(string path)
        {
            // struct stat of x86-64 Linux: st_dev at 0, st_ino at 8; 144 bytes in all.
            byte* buf = stackalloc byte[256];
            if (stat(path, buf) != 0)
            {
                return null;
            }
            ulong dev = *(ulong*)buf, ino = *(ulong*)(buf + 8);
            ulong major = ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFFUL);
            ulong minor = (dev & 0xFF) | ((dev >> 12) & ~0xFFUL);
            return major.ToString("x2") + ":" + minor.ToString("x2") + ":" + ino;
        }
    }
}
