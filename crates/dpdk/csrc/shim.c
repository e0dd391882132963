/* DPDK's fast path is static inline in its headers: these wrappers give each a symbol. The
 * bursts are called through here only with the `shim-burst` feature; by default Rust reads
 * rte_eth_fp_ops itself, a call per burst faster (docs/dpdk.md measures both). */
#include "shim.h"

uint16_t safenic_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t safenic_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *safenic_pktmbuf_alloc(struct rte_mempool *pool)
{
	return rte_pktmbuf_alloc(pool);
}

void safenic_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

char *safenic_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

char *safenic_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_prepend(m, len);
}

char *safenic_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_adj(m, len);
}

int safenic_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int safenic_errno(void)
{
	return rte_errno;
}

unsigned safenic_lcore_id(void)
{
	return rte_lcore_id();
}

uint64_t safenic_tsc_hz(void)
{
	return rte_get_tsc_hz();
}
