// The flexible model, DPDK's shape: RX and TX queues that exchange buffers with a pool, in
// bursts. Same algorithm and periods as the other drivers.
using Safenic.Kernel;

namespace Safenic.Driver
{
    // One direction's DMA memory: an RX ring, a TX ring, a head word and the pool's buffers.
    public sealed class QueueMemory
    {
        public readonly DmaBlock Block;
        public readonly long RxRing, TxRing, Head;
        public readonly BufferPool Pool;

        public QueueMemory(int poolSize)
        {
            long end = 0;
            RxRing = DmaBlock.Place(ref end, DescriptorRing.Bytes, 128);
            TxRing = DmaBlock.Place(ref end, DescriptorRing.Bytes, 128);
            Head = DmaBlock.Place(ref end, 64, 64);
            long buffers = DmaBlock.Place(ref end, Packet.Size, Packet.Size);
            Block = DmaBlock.Allocate(buffers + (long)poolSize * Packet.Size);
            Pool = Block.Pool(buffers, poolSize);
        }
    }

    public sealed class RxQueue
    {
        private readonly DescriptorRing ring;
        private BufferSlots held = BufferSlots.Allocate(); // the buffer each descriptor points to
        private readonly Register tail;
        private RingIndex next;
        public ulong Malformed;

        public RxQueue(Device d, QueueMemory m)
        {
            ring = m.Block.Ring(m.RxRing);
            for (uint k = 0; k < RingIndex.Size; k++)
            {
                RingIndex i = RingIndex.Wrap(k);
                Buffer b;
                if (!m.Pool.TryTake(out b))
                {
                    throw Fail.Die("a pool of at least " + RingIndex.Size + " buffers is needed to fill the RX ring");
                }
                held[i] = b;
                ring.SetAddress(i, b.Phys);
                ring.SetMeta(i, 0);
            }
            next = RingIndex.Wrap(0);
            tail = d.SetInput(m.Block.Phys(m.RxRing), RingIndex.Wrap(RingIndex.Size - 1));
        }

        // Appends up to `room` received packets to `batch` from index `at`, refilling the ring
        // from `pool`; returns how many.
        public byte Receive(BufferPool pool, Batch batch, byte at, byte room)
        {
            byte got = 0;
            RingIndex start = next;
            while (got < room)
            {
                RingIndex i = next;
                ulong status = ring.Meta(i);
                if ((status & Descriptor.RxDone) == 0)
                {
                    break;
                }
                Buffer fresh;
                if (!pool.TryTake(out fresh))
                {
                    break;
                }
                ring.SetAddress(i, fresh.Phys);
                ring.SetMeta(i, 0);
                next = i.Next;
                Buffer old = held[i];
                held[i] = fresh;
                ushort length = (ushort)status;
                if (length <= Packet.Size && (status & Descriptor.RxEndOfPacket) != 0)
                {
                    batch[(byte)(at + got)] = old.WithLength(length);
                    got++;
                }
                else
                {
                    Malformed++;
                    pool.Give(old);
                }
            }
            if (next.Value != start.Value)
            {
                tail.Write(next.Previous.Value); // RDT = last descriptor handed back [DS 7.1.9]
            }
            return got;
        }
    }

    public sealed class TxQueue
    {
        // RS once per this many descriptors; recycled from the head then.
        public const uint RecyclePeriod = 32;
        private readonly DescriptorRing ring;
        private BufferSlots held = BufferSlots.Allocate(); // valid from `recycled` up to `next`
        private readonly HeadWord head;
        private readonly Register tail;
        private RingIndex next, recycled;

        public TxQueue(Device d, QueueMemory m)
        {
            ring = m.Block.Ring(m.TxRing);
            head = m.Block.Head(m.Head);
            head.Clear();
            next = recycled = RingIndex.Wrap(0);
            tail = d.AddOutput(m.Block.Phys(m.TxRing), m.Block.Phys(m.Head));
        }

        private uint Room => RingIndex.Size - 1 - next.Since(recycled);

        // Gives back to `pool` every buffer the device has sent, per the written-back head.
        private void Recycle(BufferPool pool)
        {
            RingIndex h = head.Read();
            if (h.Since(recycled) > next.Since(recycled))
            {
                return; // never past what was queued
            }
            while (recycled.Value != h.Value)
            {
                pool.Give(held[recycled]);
                recycled = recycled.Next;
            }
        }

        // Queues packets from the front of `batch` until the ring is full; returns how many. The
        // caller owns batch[returned..count) (DPDK's burst contract).
        public byte Transmit(BufferPool pool, Batch batch, byte count)
        {
            uint room = Room;
            if (RingIndex.Size - 1 - room >= 2 * RecyclePeriod || room < count)
            {
                Recycle(pool);
                room = Room;
            }
            byte sent = count < room ? count : (byte)room;
            for (byte k = 0; k < sent; k++)
            {
                RingIndex i = next;
                ulong rs = i.Value % RecyclePeriod == RecyclePeriod - 1 ? Descriptor.TxReportStatus : 0;
                Buffer b = batch[k];
                ring.SetAddress(i, b.Phys);
                ring.SetMeta(i, b.Length | Descriptor.TxEndOfPacket | Descriptor.TxInsertFcs | rs);
                held[i] = b;
                next = i.Next;
            }
            if (sent > 0)
            {
                tail.Write(next.Value);
            }
            return sent;
        }
    }

    // One direction: its RX queue, the other port's TX queue, and the pool they share ("pool
    // inversion"), with the burst in flight.
    public sealed class Direction
    {
        public const byte BatchSize = 32;
        public const int PoolSize = 4096;
        public readonly RxQueue Rx;
        public readonly TxQueue Tx;
        public readonly BufferPool Pool;
        public Batch Batch = Batch.Allocate(); // not readonly: mcs refuses indexer setters on readonly struct fields
        public byte Waiting; // frames at the front of Batch still to send (lossless only)
        public ulong Dropped; // frames dropped because the TX ring was full

        public Direction(Device from, Device to, QueueMemory m)
        {
            Pool = m.Pool;
            Rx = new RxQueue(from, m);
            Tx = new TxQueue(to, m);
        }

        // Frames dropped, counting those still waiting in the batch, which go back to the pool
        // now that forwarding has stopped.
        public ulong Stop()
        {
            for (byte k = 0; k < Waiting; k++)
            {
                Pool.Give(Batch[k]);
            }
            Dropped += Waiting;
            Waiting = 0;
            return Dropped;
        }
    }
}
