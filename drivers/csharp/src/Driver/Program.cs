// safenic-csharp: the C# driver, one program with the three models. The command-line contract
// is drivers/README.md's:
//   safenic-csharp fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR]
//                  [--mac-rewrite paper|none] [--outputs 1-64] [--seconds S] [--cpu N] [--flow-control]
// Forwards both directions until SIGINT/SIGTERM (or --seconds), prints one summary line, exits 0.
using System;
using System.Globalization;
using Safenic.Kernel;

namespace Safenic.Driver
{
    public static class Format
    {
        public static string Fixed(double value, int decimals) => value.ToString("F" + decimals, CultureInfo.InvariantCulture);
    }

    public sealed class Options
    {
        public string Model, Input, Output, Sysfs;
        public bool Rewrite = true, FlowControl;
        public byte Outputs = 1;
        public double Seconds; // 0: until a signal
        public int Cpu = -1; // -1: not pinned

        private const string Usage = "usage: safenic-csharp fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR] "
            + "[--mac-rewrite paper|none] [--outputs 1-64] [--seconds S] [--cpu N] [--flow-control]";

        public static Options Parse(string[] args)
        {
            string env = Environment.GetEnvironmentVariable("SAFENIC_SYSFS");
            var o = new Options { Sysfs = string.IsNullOrEmpty(env) ? "/sys/bus/pci/devices" : env };
            if (args.Length < 4 || args[0] != "fwd")
            {
                throw Fail.Die(Usage);
            }
            o.Model = args[1];
            if (o.Model != "restricted" && o.Model != "const" && o.Model != "flexible")
            {
                throw Fail.Die("unknown model `" + o.Model + "`: use restricted, const or flexible");
            }
            o.Input = args[2];
            o.Output = args[3];
            bool outputsGiven = false;
            for (int i = 4; i < args.Length; i++)
            {
                string arg = args[i];
                if (arg == "--flow-control")
                {
                    o.FlowControl = true;
                    continue;
                }
                if (arg != "--sysfs" && arg != "--mac-rewrite" && arg != "--outputs" && arg != "--seconds" && arg != "--cpu")
                {
                    throw Fail.Die("unknown argument `" + arg + "`");
                }
                if (i + 1 >= args.Length)
                {
                    throw Fail.Die(arg + " needs a value");
                }
                string v = args[++i];
                int n;
                double s;
                switch (arg)
                {
                    case "--sysfs":
                        o.Sysfs = v;
                        break;
                    case "--mac-rewrite":
                        if (v != "paper" && v != "none")
                        {
                            throw Fail.Die("--mac-rewrite " + v + ": use paper or none");
                        }
                        o.Rewrite = v == "paper";
                        break;
                    case "--outputs":
                        if (!int.TryParse(v, NumberStyles.None, CultureInfo.InvariantCulture, out n) || n < 1 || n > Agent.MaxOutputs)
                        {
                            throw Fail.Die("--outputs " + v + ": an agent has 1 to 64 outputs");
                        }
                        o.Outputs = (byte)n;
                        outputsGiven = true;
                        break;
                    case "--seconds":
                        if (!double.TryParse(v, NumberStyles.Float, CultureInfo.InvariantCulture, out s) || !(s > 0))
                        {
                            throw Fail.Die("--seconds " + v + ": give a positive number");
                        }
                        o.Seconds = s;
                        break;
                    default:
                        if (!int.TryParse(v, NumberStyles.None, CultureInfo.InvariantCulture, out n) || n >= 1024)
                        {
                            throw Fail.Die("--cpu " + v + ": give a CPU number");
                        }
                        o.Cpu = n;
                        break;
                }
            }
            if (outputsGiven && o.Outputs != 1 && o.Model != "restricted")
            {
                throw Fail.Die("--outputs applies to the restricted model only (const has 1, flexible has 1 queue)");
            }
            return o;
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            try
            {
                return Run(args);
            }
            catch (Exception e)
            {
                // No backtrace: one line, as every other failure.
                throw Fail.Die("unexpected " + e.GetType().Name + ": " + e.Message);
            }
        }

        private static int Run(string[] args)
        {
            Options o = Options.Parse(args);
            Host.InstallTerminationHandlers();
            if (o.Cpu >= 0)
            {
                Host.PinToCpu(o.Cpu);
            }
            Device a = Device.Open(o.Sysfs, o.Input);
            Device b = Device.Open(o.Sysfs, o.Output);
            // However the program ends (a failure too), the queues stop before the memory goes.
            Fail.AtExit(() =>
            {
                a.StopQueues();
                b.StopQueues();
            });
            if (a.Address == b.Address)
            {
                throw Fail.Die(o.Input + " is both input and output: give two different ports");
            }
            a.Init();
            b.Init();
            if (o.FlowControl)
            {
                a.EnableFlowControl();
                b.EnableFlowControl();
            }
            a.WaitForLink(10);
            b.WaitForLink(10);
            double start = Host.Seconds;
            var m = new Meter(start, o.Seconds, a, b);
            var counts = new Counts();
            ulong malformed, dropped;
            if (o.Model == "flexible")
            {
                var ab = new Direction(a, b, new QueueMemory(Direction.PoolSize));
                var ba = new Direction(b, a, new QueueMemory(Direction.PoolSize));
                Allocations.Begin(counts);
                Fwd.forward_flexible(ab, ba, o.Rewrite, o.FlowControl, m, counts);
                Allocations.End(counts);
                malformed = ab.Rx.Malformed + ba.Rx.Malformed;
                dropped = ab.Stop() + ba.Stop();
            }
            else
            {
                var toB = new Device[o.Outputs];
                var toA = new Device[o.Outputs];
                for (int i = 0; i < o.Outputs; i++)
                {
                    toB[i] = b;
                    toA[i] = a;
                }
                var ab = new Agent(a, toB);
                var ba = new Agent(b, toA);
                Allocations.Begin(counts);
                if (o.Model == "const")
                {
                    Fwd.forward_const(ab, ba, o.Rewrite, m, counts);
                }
                else
                {
                    Fwd.forward_restricted(ab, ba, o.Rewrite, m, counts);
                }
                Allocations.End(counts);
                malformed = ab.Malformed + ba.Malformed;
                dropped = 0;
            }
            double secs = Host.Seconds - start;
            Console.WriteLine(Fail.Program + " fwd " + o.Model + ": " + o.Input + " -> " + o.Output + " " + counts.AtoB + " packets, " + o.Output
                + " -> " + o.Input + " " + counts.BtoA + " packets, " + Format.Fixed(secs, 1) + " s, "
                + Format.Fixed((counts.AtoB + counts.BtoA) / Math.Max(secs, 1e-9) / 1e6, 3) + " Mpps, " + malformed + " malformed, "
                + dropped + " dropped");
            Console.Out.Flush();
            Allocations.Report();
            if (m.Gone != null)
            {
                throw Fail.Die(m.Gone.GoneMessage);
            }
            Fail.RunExitHooks();
            Host.Finished(0);
            return 0;
        }
    }
}
