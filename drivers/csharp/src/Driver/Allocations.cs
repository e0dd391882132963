// The proof that the loops allocate nothing: with SAFENIC_CSHARP_GC_REPORT set, the bytes this
// thread allocated while the loops ran, those after the meter's first presence check (when every method
// of the loops has been compiled), and the collections of each generation go to stderr, one
// line, after the summary: `gc: P packets, B bytes allocated, S after the first presence check,
// G0/G1/G2 collections`. The first figure includes what the JIT and type initialisation
// allocate once; the second is what packets cost.
using System;

namespace Safenic.Driver
{
    public static class Allocations
    {
        private static readonly bool Enabled = !string.IsNullOrEmpty(Environment.GetEnvironmentVariable("SAFENIC_CSHARP_GC_REPORT"));
        private static long bytes, warmBytes = -1, allocated, steady;
        private static ulong packets;
        private static int gen0, gen1, gen2;

        public static void Begin(Counts counts)
        {
            // Compiled now, so that compiling it does not count at the end.
            End(counts);
            bytes = GC.GetAllocatedBytesForCurrentThread();
            gen0 = GC.CollectionCount(0);
            gen1 = GC.CollectionCount(1);
            gen2 = GC.CollectionCount(2);
        }

        // Called by the meter after its first presence check.
        public static void Warm()
        {
            warmBytes = GC.GetAllocatedBytesForCurrentThread();
        }

        // Only measures: compiling a method with string literals allocates them.
        public static void End(Counts counts)
        {
            long now = GC.GetAllocatedBytesForCurrentThread();
            packets = counts.AtoB + counts.BtoA;
            allocated = now - bytes;
            steady = warmBytes < 0 ? allocated : now - warmBytes;
            gen0 = GC.CollectionCount(0) - gen0;
            gen1 = GC.CollectionCount(1) - gen1;
            gen2 = GC.CollectionCount(2) - gen2;
        }

        public static void Report()
        {
            if (Enabled)
            {
                Console.Error.WriteLine("gc: " + packets + " packets, " + allocated + " bytes allocated, " + steady + " after the first presence check, "
                    + gen0 + "/" + gen1 + "/" + gen2 + " collections");
            }
        }
    }
}
