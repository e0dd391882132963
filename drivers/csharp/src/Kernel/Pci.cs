// A PCI function under a sysfs root: the checks, order and messages of the C and Rust drivers'
// platform, so that every driver fails alike. Config space writes and the BAR0 mapping are the
// only unsafe steps.
using System;
using System.Globalization;
using System.IO;

namespace Safenic.Kernel
{
    public sealed unsafe class PciFunction
    {
        public readonly string Address;
        private readonly string dir;
        private readonly int configFd;

        private PciFunction(string address, string dir, int configFd)
        {
            Address = address;
            this.dir = dir;
            this.configFd = configFd;
        }

        // Opens `address` under `root`: it must be vendor:device and bound to no kernel driver
        // (never unbound here); takes it for this process, then enables memory space and bus
        // mastering.
        public static PciFunction Open(string root, string address, ushort vendor, ushort device, string expected)
        {
            string normal = Normalize(address);
            string dir = root + "/" + normal;
            if (!Directory.Exists(dir))
            {
                throw Fail.Die("PCI function " + normal + " not found under " + root + ": list the functions with `ls " + root
                    + "` (for nicsim's devices pass --sysfs <nicsim root>/devices or use `nicsim exec`)");
            }
            string config = dir + "/config";
            int fd = Libc.OpenOrDie(config, Libc.O_RDWR | Libc.O_CLOEXEC, 0, "writing PCI configuration space", "opening");
            var f = new PciFunction(normal, dir, fd);
            uint v = f.ReadHexFile("vendor"), d = f.ReadHexFile("device");
            if (v != vendor || d != device)
            {
                throw Fail.Die("PCI function " + normal + " is " + v.ToString("x4") + ":" + d.ToString("x4") + ", not " + expected
                    + ": pass the address of " + expected);
            }
            string bound = Files.LinkTarget(dir + "/driver");
            if (bound != null)
            {
                bound = bound.Substring(bound.LastIndexOf('/') + 1);
                throw Fail.Die("PCI function " + normal + " is bound to the kernel driver `" + bound + "`: if it is yours to take, unbind it with `echo "
                    + normal + " > " + root + "/" + normal + "/driver/unbind` (we never unbind automatically)");
            }
            f.Claim();
            // COMMAND register (config 0x04): memory space (bit 1) and bus master (bit 2) [82599 DS 9.3.3.3].
            f.WriteConfig16(0x04, (ushort)(f.ReadConfig16(0x04) | (1 << 1) | (1 << 2)));
            return f;
        }

        // DDDD:BB:DD.F or BB:DD.F into DDDD:BB:DD.F in lower case.
        public static string Normalize(string address)
        {
            string[] parts = address.Split(':');
            int dot = address.LastIndexOf('.');
            bool ok = (parts.Length == 2 || parts.Length == 3) && dot > address.LastIndexOf(':');
            uint domain = 0, bus = 0, dev = 0, fn = 0;
            if (ok)
            {
                string last = parts[parts.Length - 1];
                int d = last.IndexOf('.');
                ok = (parts.Length == 2 || Hex(parts[0], 4, 0xFFFF, out domain))
                    && Hex(parts[parts.Length - 2], 2, 0xFF, out bus)
                    && Hex(last.Substring(0, d), 2, 0x1F, out dev)
                    && Hex(last.Substring(d + 1), 1, 7, out fn);
            }
            if (!ok)
            {
                throw Fail.Die("`" + address + "` is not a PCI address: write it as DDDD:BB:DD.F (e.g. 0000:5e:00.0) or BB:DD.F");
            }
            return domain.ToString("x4") + ":" + bus.ToString("x2") + ":" + dev.ToString("x2") + "." + fn.ToString("x");
        }

        private static bool Hex(string s, int width, uint max, out uint value)
        {
            value = 0;
            return s.Length >= 1 && s.Length <= width
                && uint.TryParse(s, NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out value) && value <= max;
        }

        private uint ReadHexFile(string name)
        {
            string path = dir + "/" + name;
            string text;
            try
            {
                text = File.ReadAllText(path).Trim();
            }
            catch (Exception e)
            {
                throw Fail.Die("reading " + path + ": " + e.Message);
            }
            if (text.StartsWith("0x", StringComparison.Ordinal))
            {
                text = text.Substring(2);
            }
            uint v;
            if (!uint.TryParse(text, NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out v))
            {
                throw Fail.Die("parsing " + path + ": not a hexadecimal number");
            }
            return v;
        }

        private ushort ReadConfig16(long offset)
        {
            ushort v;
            if (Libc.pread(configFd, &v, 2, offset) != 2)
            {
                throw Fail.Die("reading " + dir + "/config: " + Libc.Describe(Libc.Errno));
            }
            return v;
        }

        private void WriteConfig16(long offset, ushort v)
        {
            if (Libc.pwrite(configFd, &v, 2, offset) != 2)
            {
                throw Fail.Die("writing " + dir + "/config: " + Libc.Describe(Libc.Errno));
            }
        }

        // An exclusive flock on the config file, held until exit, so that a second driver refuses
        // a device that another one runs instead of resetting it under it.
        private void Claim()
        {
            if (Libc.flock(configFd, Libc.LOCK_EX | Libc.LOCK_NB) == 0)
            {
                return;
            }
            int e = Libc.Errno;
            if (e != Libc.EWOULDBLOCK)
            {
                throw Fail.Die("locking " + dir + "/config: " + Libc.Describe(e));
            }
            int owner = LockOwner(dir + "/config");
            if (owner <= 0)
            {
                throw Fail.Die("PCI function " + Address + " is in use by another process: stop that driver first, or give another port");
            }
            string name = "";
            try
            {
                name = File.ReadAllText("/proc/" + owner + "/comm").Trim();
            }
            catch (IOException)
            {
            }
            throw Fail.Die("PCI function " + Address + " is in use by process " + owner + " (" + name
                + "): stop that driver first, or give another port");
        }

        // The holder of a flock on `path`, from /proc/locks lines such as
        // `1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF` (device in hex, inode in decimal).
        private static int LockOwner(string path)
        {
            string want = Files.LockId(path);
            if (want == null)
            {
                return 0;
            }
            try
            {
                foreach (string line in File.ReadAllLines("/proc/locks"))
                {
                    string[] w = line.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries);
                    // Waiters read `1: -> FLOCK …`: they are not owners.
                    int pid;
                    if (w.Length >= 6 && w[1] == "FLOCK" && w[5] == want && int.TryParse(w[4], out pid))
                    {
                        return pid;
                    }
                }
            }
            catch (IOException)
            {
            }
            return 0;
        }

        // BAR0 (resource0) mapped whole; the program ends unless it has exactly `length` bytes.
        public Bar MapBar0(uint length)
        {
            string path = dir + "/resource0";
            int fd = Libc.OpenOrDie(path, Libc.O_RDWR | Libc.O_CLOEXEC, 0, "mapping a PCI BAR", "opening");
            long size = new FileInfo(path).Length;
            if (size != length)
            {
                throw Fail.Die(path + " has 0x" + size.ToString("x") + " bytes, expected 0x" + length.ToString("x") + ": BAR0 size mismatch");
            }
            IntPtr bar = Libc.mmap(IntPtr.Zero, length, Libc.PROT_READ | Libc.PROT_WRITE, Libc.MAP_SHARED, fd, 0);
            if (bar == Libc.MapFailed)
            {
                throw Fail.Die("mapping " + path + ": " + Libc.Describe(Libc.Errno));
            }
            Libc.close(fd);
            // SAFETY: the mapping is `length` bytes, never unmapped: it outlives every view of it.
            return new Bar((uint*)bar, length);
        }
    }
}
