package body Ixgbe is

   procedure Rewrite_Macs (Packet : in out Packet_Buffer) is
   begin
      Packet.Destination_And_Source := 2 ** 40; -- bytes 00 00 00 00 00 01 00 00 (little-endian)
      Packet.Source_End := 0;
   end Rewrite_Macs;

end Ixgbe;
