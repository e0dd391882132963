// The forwarding loops of the three models, named forward_<model> and never inlined so that
// the benchmark (callgrind --toggle-collect) and the audit find exactly them, and the meter
// they consult every CheckEvery iterations.
using System.Runtime.CompilerServices;
using Safenic.Kernel;

namespace Safenic.Driver
{
    public sealed class Counts
    {
        public ulong AtoB, BtoA;
    }

    // Stop conditions (time, signal, a device gone) and the per-second throughput line (on a terminal).
    public sealed class Meter
    {
        // How long a removed device can go unnoticed: a register read costs a PCIe round trip.
        private const double PresencePeriod = 0.1;
        private readonly double start, until;
        private readonly bool progress, hasDeadline;
        private readonly Device[] devices;
        private double last, lastPresence;
        private ulong lastTotal;
        public Device Gone; // the device that went away, if one did
        private bool warm;

        public Meter(double start, double seconds, Device a, Device b)
        {
            this.start = last = lastPresence = start;
            until = start + seconds;
            hasDeadline = seconds > 0;
            progress = Host.StdoutIsTerminal;
            devices = new[] { a, b };
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public bool Tick(Counts counts)
        {
            if (Host.TerminateRequested)
            {
                return false;
            }
            double now = Host.Seconds;
            if (now - lastPresence >= PresencePeriod)
            {
                lastPresence = now;
                foreach (Device d in devices)
                {
                    if (!d.Present)
                    {
                        Gone = d;
                        return false;
                    }
                }
                if (!warm)
                {
                    // Every method of the loops and the meter has run (and been compiled) once.
                    warm = true;
                    Allocations.Warm();
                }
            }
            if (progress && now - last >= 1.0)
            {
                ulong total = counts.AtoB + counts.BtoA;
                System.Console.WriteLine(Format.Fixed(now - start, 1).PadLeft(6) + " s  " + Format.Fixed((total - lastTotal) / (now - last) / 1e6, 3).PadLeft(7)
                    + " Mpps  (" + counts.AtoB + " in->out, " + counts.BtoA + " out->in)");
                last = now;
                lastTotal = total;
            }
            return !hasDeadline || now < until;
        }
    }

    // A compile-time flag: a struct type argument, so that each value gets its own loop.
    public interface IFlag
    {
        bool On { get; }
    }

    public struct Yes : IFlag
    {
        public bool On => true;
    }

    public struct No : IFlag
    {
        public bool On => false;
    }

    // Each packet goes to the next output in turn.
    public struct RoundRobin<TCount, TRewrite> : IPacketHandler
        where TCount : struct, IOutputCount
        where TRewrite : struct, IFlag
    {
        private byte next;
        private readonly byte count;

        public RoundRobin(byte count)
        {
            next = 0;
            this.count = count;
        }

        public void Handle(Packet packet, ushort length, Lengths lengths)
        {
            if (default(TRewrite).On)
            {
                packet.RewriteMacs();
            }
            lengths[next] = length;
            next = next + 1 == default(TCount).Of(count) ? (byte)0 : (byte)(next + 1);
        }
    }

    public static class Fwd
    {
        // Loop iterations between looks at the clock and the signal flag.
        private const int CheckEvery = 1024;

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private static void Agents<TCount, TRewrite>(Agent ab, Agent ba, Meter m, Counts counts)
            where TCount : struct, IOutputCount
            where TRewrite : struct, IFlag
        {
            var toB = new RoundRobin<TCount, TRewrite>(ab.OutputCount);
            var toA = new RoundRobin<TCount, TRewrite>(ba.OutputCount);
            do
            {
                for (int k = 0; k < CheckEvery; k++)
                {
                    counts.AtoB += ab.Run<TCount, RoundRobin<TCount, TRewrite>>(ref toB);
                    counts.BtoA += ba.Run<TCount, RoundRobin<TCount, TRewrite>>(ref toA);
                }
            }
            while (m.Tick(counts));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void forward_restricted(Agent ab, Agent ba, bool rewrite, Meter m, Counts counts)
        {
            if (rewrite)
            {
                Agents<RunTimeOutputs, Yes>(ab, ba, m, counts);
            }
            else
            {
                Agents<RunTimeOutputs, No>(ab, ba, m, counts);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void forward_const(Agent ab, Agent ba, bool rewrite, Meter m, Counts counts)
        {
            if (rewrite)
            {
                Agents<OneOutput, Yes>(ab, ba, m, counts);
            }
            else
            {
                Agents<OneOutput, No>(ab, ba, m, counts);
            }
        }

        // Receive into the batch's free room, rewrite what arrived, transmit. What did not fit
        // into the TX ring goes back to the pool and is counted (DPDK's usual policy); when
        // lossless it stays at the front of the batch for the next burst, so a full TX ring backs
        // up into the RX ring and the packet buffer, whose XOFF pauses the link partner.
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private static uint Burst<TRewrite, TLossless>(Direction d)
            where TRewrite : struct, IFlag
            where TLossless : struct, IFlag
        {
            byte waiting = default(TLossless).On ? d.Waiting : (byte)0;
            byte got = d.Rx.Receive(d.Pool, d.Batch, waiting, (byte)(Direction.BatchSize - waiting));
            if (got == 0 && waiting == 0)
            {
                return 0;
            }
            byte count = (byte)(waiting + got);
            if (default(TRewrite).On)
            {
                for (byte k = waiting; k < count; k++)
                {
                    d.Batch[k].Packet.RewriteMacs();
                }
            }
            byte sent = d.Tx.Transmit(d.Pool, d.Batch, count);
            if (default(TLossless).On)
            {
                for (byte k = sent; k < count; k++)
                {
                    d.Batch[(byte)(k - sent)] = d.Batch[k];
                }
                d.Waiting = (byte)(count - sent);
            }
            else
            {
                for (byte k = sent; k < count; k++)
                {
                    d.Pool.Give(d.Batch[k]);
                }
                d.Dropped += (uint)(count - sent);
            }
            return sent;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        private static void Directions<TRewrite, TLossless>(Direction ab, Direction ba, Meter m, Counts counts)
            where TRewrite : struct, IFlag
            where TLossless : struct, IFlag
        {
            do
            {
                for (int k = 0; k < CheckEvery; k++)
                {
                    counts.AtoB += Burst<TRewrite, TLossless>(ab);
                    counts.BtoA += Burst<TRewrite, TLossless>(ba);
                }
            }
            while (m.Tick(counts));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void forward_flexible(Direction ab, Direction ba, bool rewrite, bool lossless, Meter m, Counts counts)
        {
            if (rewrite && !lossless)
            {
                Directions<Yes, No>(ab, ba, m, counts);
            }
            else if (!lossless)
            {
                Directions<No, No>(ab, ba, m, counts);
            }
            else if (rewrite)
            {
                Directions<Yes, Yes>(ab, ba, m, counts);
            }
            else
            {
                Directions<No, Yes>(ab, ba, m, counts);
            }
        }
    }
}
