// The TinyNF agent of the restricted and const models: one ring per output, the first shared
// with the input's RX queue 0, so a received packet is sent by rewriting its descriptor in
// place. Same algorithm and periods as the other drivers.
using Safenic.Kernel;

namespace Safenic.Driver
{
    // How many outputs the loops visit: the run-time count (restricted) or the constant 1
    // (const). A struct type argument, so that each model gets its own compiled loop.
    public interface IOutputCount
    {
        byte Of(byte runTime);
    }

    public struct RunTimeOutputs : IOutputCount
    {
        public byte Of(byte runTime) => runTime;
    }

    public struct OneOutput : IOutputCount
    {
        public byte Of(byte runTime) => 1;
    }

    // Sets lengths[o] for each output o that gets the packet (0: not sent there).
    public interface IPacketHandler
    {
        void Handle(Packet packet, ushort length, Lengths lengths);
    }

    public sealed class Agent
    {
        public const byte MaxOutputs = 64;
        public const uint FlushPeriod = 8;
        public const uint RecyclePeriod = 64;

        private readonly PacketArray packets;
        private readonly DescriptorRing shared;
        private readonly AgentOutputs outputs;
        public readonly byte OutputCount;
        private Lengths lengths = Lengths.Allocate(); // not readonly: mcs refuses indexer setters on readonly struct fields
        private readonly Register receiveTail;
        private RingIndex receiveTailValue;
        private RingIndex processed;
        public ulong Malformed;

        public Agent(Device input, Device[] to)
        {
            if (to.Length < 1 || to.Length > MaxOutputs)
            {
                throw Fail.Die(to.Length + " outputs: an agent has 1 to 64 outputs");
            }
            OutputCount = (byte)to.Length;
            long end = 0;
            long bufferAt = DmaBlock.Place(ref end, RingIndex.Size * Packet.Size, Packet.Size);
            var rings = new long[to.Length];
            var heads = new long[to.Length];
            for (int o = 0; o < to.Length; o++)
            {
                rings[o] = DmaBlock.Place(ref end, DescriptorRing.Bytes, 128);
            }
            for (int o = 0; o < to.Length; o++)
            {
                heads[o] = DmaBlock.Place(ref end, 64, 64);
            }
            DmaBlock mem = DmaBlock.Allocate(end);
            packets = mem.Packets(bufferAt);
            outputs = AgentOutputs.Allocate();
            for (int o = 0; o < to.Length; o++)
            {
                DescriptorRing ring = mem.Ring(rings[o]);
                for (uint i = 0; i < RingIndex.Size; i++)
                {
                    ring.SetAddress(RingIndex.Wrap(i), mem.Phys(bufferAt + i * Packet.Size));
                    ring.SetMeta(RingIndex.Wrap(i), 0);
                }
                HeadWord head = mem.Head(heads[o]);
                head.Clear();
                outputs[(byte)o] = new AgentOutput { Ring = ring, Head = head, Tail = to[o].AddOutput(mem.Phys(rings[o]), mem.Phys(heads[o])) };
            }
            shared = outputs[0].Ring;
            // The device may fill every slot but one: RDT = N - 1 [DS 7.1.9].
            receiveTailValue = RingIndex.Wrap(RingIndex.Size - 1);
            receiveTail = input.SetInput(mem.Phys(rings[0]), receiveTailValue);
            processed = RingIndex.Wrap(0);
        }

        // Gives the receive side every slot that all outputs have sent: RDT = the head of the
        // output furthest behind, minus one [DS 7.1.9]. Device-written heads are RingIndexes.
        private void Recycle(byte count)
        {
            RingIndex earliest = processed;
            uint behind = 0;
            for (byte o = 0; o < count; o++)
            {
                RingIndex head = outputs[o].Head.Read();
                uint pending = processed.Since(head);
                if (pending > behind)
                {
                    behind = pending;
                    earliest = head;
                }
            }
            RingIndex tail = earliest.Previous;
            if (tail.Value != receiveTailValue.Value)
            {
                receiveTail.Write(tail.Value);
                receiveTailValue = tail;
            }
        }

        // Processes up to FlushPeriod received packets; returns how many.
        public uint Run<TCount, THandler>(ref THandler handler)
            where TCount : struct, IOutputCount
            where THandler : struct, IPacketHandler
        {
            byte count = default(TCount).Of(OutputCount);
            uint n = 0;
            while (n < FlushPeriod)
            {
                RingIndex i = processed;
                ulong status = shared.Meta(i);
                if ((status & Descriptor.RxDone) == 0)
                {
                    if (n == 0)
                    {
                        Recycle(count);
                    }
                    break;
                }
                // The written-back length is untrusted: a frame that does not fit its buffer (or
                // spans several) is sent nowhere [DS 7.1.5].
                ushort length = (ushort)status;
                if (length <= Packet.Size && (status & Descriptor.RxEndOfPacket) != 0)
                {
                    handler.Handle(packets[i], length, lengths);
                }
                else
                {
                    Malformed++;
                }
                ulong rs = i.Value % RecyclePeriod == RecyclePeriod - 1 ? Descriptor.TxReportStatus : 0;
                for (byte o = 0; o < count; o++)
                {
                    // Length 0 is a null descriptor; bit 32 = 0 also clears RX DD [DS 7.2.3.2.2].
                    outputs[o].Ring.SetMeta(i, lengths[o] | rs | Descriptor.TxInsertFcs | Descriptor.TxEndOfPacket);
                    lengths[o] = 0;
                }
                processed = i.Next;
                if (rs != 0)
                {
                    Recycle(count);
                }
                n++;
            }
            if (n > 0)
            {
                for (byte o = 0; o < count; o++)
                {
                    outputs[o].Tail.Write(processed.Value);
                }
            }
            return n;
        }
    }

    // Legacy descriptor bits [DS 7.1.5, 7.2.3.2.2].
    public static class Descriptor
    {
        public const ulong RxDone = 1UL << 32;
        public const ulong RxEndOfPacket = 1UL << 33;
        public const ulong TxEndOfPacket = 1UL << 24;
        public const ulong TxInsertFcs = 1UL << 25;
        public const ulong TxReportStatus = 1UL << 27;
    }
}
