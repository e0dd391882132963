--  The command line of safenic-ada, and the run it asks for: parse, open and set up both ports,
--  forward in the chosen model until told to stop, print the summary line.
package Cli is

   procedure Main;

end Cli;
