--  safenic-ada: the Ada forwarder, one program with the three models.
--
--  Command-line contract (drivers/README.md, the same as `safenic fwd`):
--    safenic-ada fwd <restricted|const|flexible> <BDF-in> <BDF-out> [--sysfs DIR]
--                [--mac-rewrite paper|none] [--outputs 1-64] [--seconds S] [--cpu N]
--                [--flow-control] [--queues 1-16] [--cores LIST]
--  Forwards both directions until SIGINT/SIGTERM (or --seconds), prints one summary line and
--  exits 0.
with Cli;

procedure Safenic_Ada is
begin
   Cli.Main;
end Safenic_Ada;
