// The kernel's views of device and DMA memory, and the ranged index that makes them safe to use
// without run-time checks: the paper's ranged arrays, written once here with unsafe code so
// that the driver's models index them with proofs instead of bounds checks. Each view is made
// only by Bar or DmaBlock, after a check that the memory behind it is whole; none is ever
// unmapped, so every view stays valid for the life of the process.
using System.Threading;

namespace Safenic.Kernel
{
    // A descriptor's slot: always below Size, because every way to make one reduces modulo Size.
    public readonly struct RingIndex
    {
        public const uint Size = 512;
        public const uint Mask = Size - 1;
        public readonly uint Value;

        private RingIndex(uint value)
        {
            Value = value;
        }

        public static RingIndex Wrap(uint value) => new RingIndex(value & Mask);

        public RingIndex Next => new RingIndex((Value + 1) & Mask);

        public RingIndex Previous => new RingIndex((Value - 1) & Mask);

        // Slots from `from` forward to this one, modulo the ring.
        public uint Since(RingIndex from) => (Value - from.Value) & Mask;
    }

    // One 32-bit device register, read and written with volatile accesses.
    public readonly unsafe struct Register
    {
        private readonly uint* at;

        internal Register(uint* at)
        {
            this.at = at;
        }

        public uint Read() => Volatile.Read(ref *at);

        public void Write(uint value) => Volatile.Write(ref *at, value);
    }

    // A ring of RingIndex.Size legacy descriptors [82599 DS 7.1.5, 7.2.3.2.2]: an address and a
    // word of length, command and status.
    public readonly unsafe struct DescriptorRing
    {
        public const uint Bytes = RingIndex.Size * 16;
        private readonly ulong* words;

        internal DescriptorRing(ulong* words)
        {
            this.words = words;
        }

        public ulong Meta(RingIndex i) => Volatile.Read(ref words[2 * i.Value + 1]);

        public void SetMeta(RingIndex i, ulong value) => Volatile.Write(ref words[2 * i.Value + 1], value);

        public void SetAddress(RingIndex i, ulong value) => Volatile.Write(ref words[2 * i.Value], value);
    }

    // The word the device writes a TX queue's head into [82599 DS 7.2.3.5.2].
    public readonly unsafe struct HeadWord
    {
        private readonly uint* at;

        internal HeadWord(uint* at)
        {
            this.at = at;
        }

        public RingIndex Read() => RingIndex.Wrap(Volatile.Read(ref *at));

        public void Clear() => Volatile.Write(ref *at, 0);
    }

    // The start of one packet buffer of Size bytes.
    public readonly unsafe struct Packet
    {
        public const uint Size = 2048;
        private readonly byte* data;

        internal Packet(byte* data)
        {
            this.data = data;
        }

        // The paper's rewrite: destination 00:00:00:00:00:01, source 00:00:00:00:00:00, as one
        // 8-byte and one 4-byte volatile store (buffers are 2 KiB aligned), so that they happen
        // before the descriptor hands the packet to the device.
        public void RewriteMacs()
        {
            Volatile.Write(ref *(ulong*)data, 1UL << 40);
            Volatile.Write(ref *(uint*)(data + 8), 0u);
        }
    }

    // RingIndex.Size packet buffers in a row: the agent's, one per descriptor slot.
    public readonly unsafe struct PacketArray
    {
        private readonly byte* first;

        internal PacketArray(byte* first)
        {
            this.first = first;
        }

        public Packet this[RingIndex i] => new Packet(first + i.Value * Packet.Size);
    }

    // A packet buffer of the flexible model: where it is for the CPU and for the device, and the
    // length of what it holds.
    public readonly struct Buffer
    {
        public readonly Packet Packet;
        public readonly ulong Phys;
        public readonly ushort Length;

        internal Buffer(Packet packet, ulong phys, ushort length)
        {
            Packet = packet;
            Phys = phys;
            Length = length;
        }

        public Buffer WithLength(ushort length) => new Buffer(Packet, Phys, length);
    }
}
