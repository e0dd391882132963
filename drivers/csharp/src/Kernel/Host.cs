// What the driver asks of the host besides devices and memory: CPU affinity, a clock, whether
// stdout is a terminal, and the termination request of SIGINT or SIGTERM.
using System;
using System.Diagnostics;
using System.Threading;

namespace Safenic.Kernel
{
    public static unsafe class Host
    {
        public static void PinToCpu(int cpu)
        {
            byte* mask = stackalloc byte[128];
            for (int i = 0; i < 128; i++)
            {
                mask[i] = 0;
            }
            mask[cpu / 8] = (byte)(1 << (cpu % 8));
            if (Libc.sched_setaffinity(0, 128, mask) != 0)
            {
                throw Fail.Die("pinning to CPU " + cpu + ": " + Libc.Describe(Libc.Errno));
            }
        }

        public static bool StdoutIsTerminal => Libc.isatty(1) == 1;

        public static double Seconds => Stopwatch.GetTimestamp() / (double)Stopwatch.Frequency;

        private static volatile bool terminate;
#if MONO
        private static Mono.Unix.UnixSignal[] signals;
#else
        private static readonly ManualResetEvent finished = new ManualResetEvent(false);
#endif

        public static bool TerminateRequested
        {
            get
            {
#if MONO
                if (signals[0].IsSet || signals[1].IsSet)
                {
                    terminate = true;
                }
#endif
                return terminate;
            }
        }

        // SIGINT and SIGTERM ask the loops to stop; the program then prints its summary and exits 0.
        public static void InstallTerminationHandlers()
        {
            Console.CancelKeyPress += (sender, e) =>
            {
                e.Cancel = true;
                terminate = true;
            };
#if MONO
            // Mono ends the process on SIGTERM; a UnixSignal turns it into a flag polled here.
            signals = new[] { new Mono.Unix.UnixSignal(Mono.Unix.Native.Signum.SIGINT), new Mono.Unix.UnixSignal(Mono.Unix.Native.Signum.SIGTERM) };
#else
            // .NET Core runs ProcessExit on SIGTERM, then ends the process by the signal (status
            // 143): wait for the summary, then exit 0 as the contract says. At an exit of the
            // program's own, ProcessExit runs too, and has nothing to do.
            AppDomain.CurrentDomain.ProcessExit += (sender, e) =>
            {
                if (exiting)
                {
                    return;
                }
                terminate = true;
                finished.WaitOne();
                RemoveDebuggerPipes();
                Libc._exit(exitStatus);
            };
#endif
        }

#if !MONO
        // The runtime's debugger pipes in TMPDIR, which its own shutdown would remove and _exit
        // skips: without this, every SIGTERM would leave two files behind.
        private static void RemoveDebuggerPipes()
        {
            int pid = Libc.getpid();
            foreach (string prefix in new[] { "clr-debug-pipe-", "dotnet-diagnostic-" })
            {
                foreach (string file in System.IO.Directory.GetFiles(System.IO.Path.GetTempPath(), prefix + pid + "-*"))
                {
                    Libc.unlink(file);
                }
            }
        }
#endif

#if !MONO
        private static volatile bool exiting;
        private static volatile int exitStatus;
#endif

        // The program is ending by itself with `status` (its summary is out, or an error): a
        // SIGTERM being handled ends the process now, with that status.
        public static void Finished(int status)
        {
#if !MONO
            exitStatus = status;
            exiting = true;
            finished.Set();
#endif
        }
    }
}
