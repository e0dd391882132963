// The proof that the loops allocate nothing: with SAFENIC_CSHARP_GC_REPORT set, the bytes this
// thread allocated and the collections of each generation while the loops ran go to stderr, one
// line, after the summary: `gc: P packets, B bytes allocated, G0/G1/G2 collections`.
using System;

namespace Safenic.Driver
{
    public static class Allocations
    {
        private static readonly bool Enabled = !string.IsNullOrEmpty(Environment.GetEnvironmentVariable("SAFENIC_CSHARP_GC_REPORT"));
        private static long bytes;
        private static int gen0, gen1, gen2;
        private static string line;

        public static void Begin()
        {
            bytes = GC.GetAllocatedBytesForCurrentThread();
            gen0 = GC.CollectionCount(0);
            gen1 = GC.CollectionCount(1);
            gen2 = GC.CollectionCount(2);
        }

        // Measures first, formats after: the report's own strings are not counted.
        public static void End(Counts counts)
        {
            long allocated = GC.GetAllocatedBytesForCurrentThread() - bytes;
            int c0 = GC.CollectionCount(0) - gen0, c1 = GC.CollectionCount(1) - gen1, c2 = GC.CollectionCount(2) - gen2;
            line = "gc: " + (counts.AtoB + counts.BtoA) + " packets, " + allocated + " bytes allocated, " + c0 + "/" + c1 + "/" + c2 + " collections";
        }

        public static void Report()
        {
            if (Enabled && line != null)
            {
                Console.Error.WriteLine(line);
            }
        }
    }
}
