/* What the Rust side sees of DPDK: the headers of the calls it makes, and the shim's wrappers of
 * DPDK's static inline fast-path functions, which have no symbol to link against. */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

uint16_t safenic_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t safenic_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *safenic_pktmbuf_alloc(struct rte_mempool *pool);
void safenic_pktmbuf_free(struct rte_mbuf *m);
char *safenic_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
char *safenic_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *safenic_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int safenic_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
int safenic_errno(void);
unsigned safenic_lcore_id(void);

uint64_t safenic_tsc_hz(void);
