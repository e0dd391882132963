// One-line errors: every setup failure ends the program with "<program>: <message>" and exit 1,
// after the hooks that stop the devices' queues have run.
using System;
using System.Collections.Generic;

namespace Safenic.Kernel
{
    public static class Fail
    {
        public static string Program = "safenic-csharp";

        private static readonly List<Action> ExitHooks = new List<Action>();

        // Runs at every exit, `Die` too: the driver stops the queues before the DMA memory goes.
        public static void AtExit(Action hook) => ExitHooks.Add(hook);

        public static void RunExitHooks()
        {
            foreach (var hook in ExitHooks)
            {
                hook();
            }
            ExitHooks.Clear();
        }

        public static Exception Die(string message)
        {
            Console.Out.Flush();
            Console.Error.WriteLine(Program + ": " + message);
            RunExitHooks();
            Host.Finished(1);
            Environment.Exit(1);
            return new InvalidOperationException("unreachable");
        }

        public static Exception NotRoot(string what) =>
            Die(what + " needs root (CAP_SYS_ADMIN): run the command as root, e.g. with sudo");
    }
}
