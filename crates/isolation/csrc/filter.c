/* A packet filter in C, the kind of legacy code a forwarder still calls: per burst, it reads the
 * first bytes of each frame and writes a verdict, 1 to forward and 0 to drop. Rule: forward IPv4
 * and IPv6; drop ARP-less junk (any other EtherType) and IPv4 UDP to `blocked_port`. */
#include <stddef.h>
#include <stdint.h>

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

size_t filter_burst(const uint8_t *headers, size_t stride, size_t count, uint8_t *verdicts,
                    uint16_t blocked_port) {
    size_t forwarded = 0;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *f = headers + i * stride;
        uint16_t type = be16(f + 12);
        uint8_t keep = 0;
        if (type == 0x86dd) {
            keep = 1;
        } else if (type == 0x0800 && stride >= 38) {
            const uint8_t *ip = f + 14;
            size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
            keep = 1;
            if (ip[9] == 17 && ihl >= 20 && 14 + ihl + 4 <= stride && be16(ip + ihl + 2) == blocked_port)
                keep = 0;
        }
        verdicts[i] = keep;
        forwarded += keep;
    }
    return forwarded;
}
