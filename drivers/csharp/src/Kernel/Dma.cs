// DMA memory: a block of 2 MiB hugepages from a file on a hugetlbfs mount, zeroed and faulted
// in, with the physical address of each page from /proc/self/pagemap; and the views the driver
// places in it, each checked to lie inside the block and inside one hugepage (only memory
// within a page is physically contiguous). Blocks are never unmapped: the device may write to
// them until its queues are stopped, which the driver does at exit.
using System;
using System.IO;
using System.Threading;

namespace Safenic.Kernel
{
    public sealed unsafe class DmaBlock
    {
        public const long HugePage = 2L << 20;
        private static int counter;
        private readonly byte* virt;
        public readonly long Length;
        private readonly ulong[] pagePhys;

        private DmaBlock(byte* virt, long length, ulong[] pagePhys)
        {
            this.virt = virt;
            Length = length;
            this.pagePhys = pagePhys;
        }

        // Places an object of `size` bytes aligned to `align` at or after `end` so that it does
        // not cross a hugepage; returns its offset and moves `end` past it.
        public static long Place(ref long end, long size, long align)
        {
            long at = (end + align - 1) / align * align;
            if (at / HugePage != (at + size - 1) / HugePage)
            {
                at = (at + HugePage - 1) / HugePage * HugePage;
            }
            end = at + size;
            return at;
        }

        public static DmaBlock Allocate(long length)
        {
            length = (length + HugePage - 1) / HugePage * HugePage;
            string dir = HugetlbfsMount();
            if (dir == null)
            {
                throw Fail.Die("no hugetlbfs mount found: mount one with `mkdir -p /dev/hugepages && mount -t hugetlbfs nodev "
                    + "/dev/hugepages` (scripts/setup does this)");
            }
            string path = dir + "/dma-cs-" + Libc.getpid() + "-" + counter++;
            int fd = Libc.OpenOrDie(path, Libc.O_RDWR | Libc.O_CREAT | Libc.O_EXCL | Libc.O_CLOEXEC, Convert.ToInt32("600", 8),
                "creating a hugepage file", "creating");
            if (Libc.ftruncate(fd, length) != 0)
            {
                int e = Libc.Errno;
                Libc.unlink(path);
                throw HugepageError(e, length);
            }
            IntPtr mapped = Libc.mmap(IntPtr.Zero, (ulong)length, Libc.PROT_READ | Libc.PROT_WRITE, Libc.MAP_SHARED | Libc.MAP_POPULATE, fd, 0);
            int err = Libc.Errno;
            // The mapping keeps the pages alive; the name is not needed once mapped.
            Libc.unlink(path);
            Libc.close(fd);
            if (mapped == Libc.MapFailed)
            {
                throw HugepageError(err, length);
            }
            byte* virt = (byte*)mapped;
            return new DmaBlock(virt, length, PhysicalPages(virt, length));
        }

        private static ulong[] PhysicalPages(byte* virt, long length)
        {
            var phys = new ulong[length / HugePage];
            int pagemap = Libc.open("/proc/self/pagemap", Libc.O_RDONLY | Libc.O_CLOEXEC, 0);
            if (pagemap < 0)
            {
                throw Fail.Die("opening /proc/self/pagemap: " + Libc.Describe(Libc.Errno));
            }
            const ulong basePage = 4096;
            for (long page = 0; page < phys.Length; page++)
            {
                byte* p = virt + page * HugePage;
                Volatile.Write(ref *p, (byte)0); // touch: present in our page tables
                ulong vaddr = (ulong)p, entry;
                if (Libc.pread(pagemap, &entry, 8, (long)(vaddr / basePage * 8)) != 8)
                {
                    throw Fail.Die("reading pagemap: " + Libc.Describe(Libc.Errno));
                }
                if ((entry >> 63) == 0)
                {
                    throw Fail.Die("hugepage not present after touching it: pagemap");
                }
                ulong pfn = entry & ((1UL << 55) - 1);
                if (pfn == 0)
                {
                    throw Fail.NotRoot("reading physical addresses from /proc/self/pagemap");
                }
                phys[page] = pfn * basePage + vaddr % basePage;
            }
            Libc.close(pagemap);
            return phys;
        }

        private static Exception HugepageError(int e, long length)
        {
            if (e == Libc.ENOMEM || e == Libc.ENOSPC || e == Libc.EINVAL)
            {
                return Fail.Die("not enough 2 MiB hugepages for " + ((length + (1 << 20) - 1) >> 20) + " MiB of DMA memory: reserve more with "
                    + "`echo 1024 > /proc/sys/vm/nr_hugepages` (scripts/setup does this)");
            }
            if (e == Libc.EPERM || e == Libc.EACCES)
            {
                return Fail.NotRoot("allocating hugepages");
            }
            return Fail.Die("allocating hugepage memory: " + Libc.Describe(e));
        }

        // The first hugetlbfs mount with 2 MiB pages, from /proc/mounts.
        private static string HugetlbfsMount()
        {
            foreach (string line in File.ReadAllLines("/proc/mounts"))
            {
                string[] w = line.Split(' ');
                if (w.Length >= 4 && w[2] == "hugetlbfs")
                {
                    int size = w[3].IndexOf("pagesize=", StringComparison.Ordinal);
                    if (size < 0 || w[3].Substring(size).StartsWith("pagesize=2M", StringComparison.Ordinal))
                    {
                        return w[1];
                    }
                }
            }
            return null;
        }

        // Checks that [offset, offset + size) lies in the block, in one hugepage, aligned.
        private byte* Span(long offset, long size, long align)
        {
            if (offset < 0 || size <= 0 || offset > Length - size || offset % align != 0 || offset / HugePage != (offset + size - 1) / HugePage)
            {
                throw Fail.Die("DMA object of 0x" + size.ToString("x") + " bytes at 0x" + offset.ToString("x")
                    + " does not fit the block of 0x" + Length.ToString("x") + " bytes");
            }
            return virt + offset;
        }

        public ulong Phys(long offset)
        {
            Span(offset, 1, 1);
            return pagePhys[offset / HugePage] + (ulong)(offset % HugePage);
        }

        // Rings 128-byte aligned [82599 DS 8.2.3.8.1, 8.2.3.9.5].
        public DescriptorRing Ring(long offset) => new DescriptorRing((ulong*)Span(offset, DescriptorRing.Bytes, 128));

        // Head write-back in its own cache line [82599 DS 7.2.3.5.2].
        public HeadWord Head(long offset) => new HeadWord((uint*)Span(offset, 64, 64));

        public Buffer Buffer(long offset) => new Buffer(new Packet(Span(offset, Packet.Size, Packet.Size)), Phys(offset), 0);

        // RingIndex.Size buffers in a row; they may span hugepages, each buffer lies in one.
        public PacketArray Packets(long offset)
        {
            for (uint i = 0; i < RingIndex.Size; i++)
            {
                Span(offset + i * Packet.Size, Packet.Size, Packet.Size);
            }
            return new PacketArray(virt + offset);
        }

        public BufferPool Pool(long offset, int count)
        {
            var pool = new BufferPool(count);
            for (int i = 0; i < count; i++)
            {
                pool.Give(Buffer(offset + i * Packet.Size));
            }
            return pool;
        }
    }
}
