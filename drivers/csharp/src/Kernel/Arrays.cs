// Ranged arrays of the models' own state, in memory of the kernel's that is never freed:
// indexed by a RingIndex (512 slots) or a byte (256 slots, the trick of the paper's Rust and C#
// drivers: the index type's range is the array's length), so no access needs a check.
using System.Runtime.InteropServices;

namespace Safenic.Kernel
{
    internal static unsafe class Unmanaged
    {
        // Zeroed memory for the life of the process.
        public static void* Zeroed(int bytes)
        {
            byte* p = (byte*)Marshal.AllocHGlobal(bytes);
            for (int i = 0; i < bytes; i++)
            {
                p[i] = 0;
            }
            return p;
        }
    }

    // The buffer behind each descriptor slot of a flexible queue.
    public readonly unsafe struct BufferSlots
    {
        private readonly Buffer* slots;

        private BufferSlots(Buffer* slots)
        {
            this.slots = slots;
        }

        public static BufferSlots Allocate() => new BufferSlots((Buffer*)Unmanaged.Zeroed((int)RingIndex.Size * sizeof(Buffer)));

        public Buffer this[RingIndex i]
        {
            get => slots[i.Value];
            set => slots[i.Value] = value;
        }
    }

    // A burst of up to 256 buffers, indexed by a byte.
    public readonly unsafe struct Batch
    {
        private readonly Buffer* items;

        private Batch(Buffer* items)
        {
            this.items = items;
        }

        public static Batch Allocate() => new Batch((Buffer*)Unmanaged.Zeroed(256 * sizeof(Buffer)));

        public Buffer this[byte k]
        {
            get => items[k];
            set => items[k] = value;
        }
    }

    // A length per output, indexed by a byte: the agent's 64 outputs fit.
    public readonly unsafe struct Lengths
    {
        private readonly ushort* items;

        private Lengths(ushort* items)
        {
            this.items = items;
        }

        public static Lengths Allocate() => new Lengths((ushort*)Unmanaged.Zeroed(256 * sizeof(ushort)));

        public ushort this[byte o]
        {
            get => items[o];
            set => items[o] = value;
        }
    }

    // The free buffers of one direction: a stack whose count never leaves 0..Capacity, so that
    // Take and Give need no bounds check beyond the emptiness and fullness they must test anyway.
    public sealed unsafe class BufferPool
    {
        public readonly int Capacity;
        private readonly Buffer* free;
        private int available;

        internal BufferPool(int capacity)
        {
            Capacity = capacity;
            free = (Buffer*)Unmanaged.Zeroed(capacity * sizeof(Buffer));
        }

        public int Available => available;

        public bool TryTake(out Buffer b)
        {
            if (available == 0)
            {
                b = default(Buffer);
                return false;
            }
            available--;
            b = free[available];
            return true;
        }

        // A buffer beyond Capacity cannot be one of this pool's: it is not kept.
        public void Give(Buffer b)
        {
            if (available < Capacity)
            {
                free[available] = b;
                available++;
            }
        }
    }
}

namespace Safenic.Kernel
{
    // One output of a TinyNF agent: its TX ring, the head the device writes back, its TDT.
    public struct AgentOutput
    {
        public DescriptorRing Ring;
        public HeadWord Head;
        public Register Tail;
    }

    // An agent's outputs, indexed by a byte: the agent's 64 outputs fit.
    public readonly unsafe struct AgentOutputs
    {
        private readonly AgentOutput* items;

        private AgentOutputs(AgentOutput* items)
        {
            this.items = items;
        }

        public static AgentOutputs Allocate() => new AgentOutputs((AgentOutput*)Unmanaged.Zeroed(256 * sizeof(AgentOutput)));

        public AgentOutput this[byte o]
        {
            get => items[o];
            set => items[o] = value;
        }
    }
}
