// A mapped BAR0: register reads and writes at byte offsets, each checked against the mapping
// (they run only while the device is set up), and the Register views the hot loops write.
using System.Threading;

namespace Safenic.Kernel
{
    public sealed unsafe class Bar
    {
        private readonly uint* regs;
        public readonly uint Length;

        internal Bar(uint* regs, uint length)
        {
            this.regs = regs;
            Length = length;
        }

        private uint* At(uint offset)
        {
            if (offset % 4 != 0 || offset > Length - 4)
            {
                throw Fail.Die("register offset 0x" + offset.ToString("x") + " is outside BAR0 (0x" + Length.ToString("x") + " bytes)");
            }
            return regs + offset / 4;
        }

        public uint Read(uint offset) => Volatile.Read(ref *At(offset));

        public void Write(uint offset, uint value) => Volatile.Write(ref *At(offset), value);

        public Register Register(uint offset) => new Register(At(offset));
    }
}
