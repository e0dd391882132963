/*
 * What each port's receive and transmit bursts return, counted from outside an unmodified
 * DPDK application (LD_PRELOAD): the l2fwd bench's overload test (crates/bench/src/l2fwd.rs)
 * loads it into the Rust l2fwd and into DPDK's C l2fwd alike, so both pay the same wrapper.
 *
 * rte_eth_rx_burst and rte_eth_tx_burst are inline and call through rte_eth_fp_ops, which
 * rte_eth_dev_start fills; this file interposes rte_eth_dev_start (an exported function) and
 * puts a counting wrapper in front of the port's burst functions once the real start returns.
 *
 * Environment: SAFENIC_BURST_TOTALS=FILE: the counters at exit, as one snapshot (the
 * instruction counts use it to count packets without knowing the device's functions).
 * SAFENIC_BURST_COUNTS=FILE, SAFENIC_BURST_WARMUP_MS and SAFENIC_BURST_WINDOW_MS: a window.
 * A thread started with the first port sleeps the warm-up, takes a
 * snapshot of the counters (and creates FILE.start, so that the bench can read the device's
 * own counters at the same moment), sleeps the window, takes another, and writes both to FILE:
 *   snapshot S TIME_NS
 *   port P RX_CALLS RX_FRAMES TX_CALLS TX_OFFERED TX_SENT
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <rte_ethdev.h>

#define PORTS 4

struct counts {
	uint64_t rx_calls, rx_frames, tx_calls, tx_offered, tx_sent;
};

/* Each port is polled by one lcore (l2fwd's rule), so its counters have one writer; relaxed
 * atomics make the snapshot thread's reads well defined without a locked instruction. */
static struct counts counts[PORTS];
static eth_rx_burst_t real_rx[PORTS];
static eth_tx_burst_t real_tx[PORTS];

#define BUMP(field, n) __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)

#define WRAPPERS(P)                                                                          \
	static uint16_t rx_##P(void *q, struct rte_mbuf **pkts, uint16_t n)                  \
	{                                                                                    \
		uint16_t got = real_rx[P](q, pkts, n);                                       \
		BUMP(counts[P].rx_calls, 1);                                                 \
		BUMP(counts[P].rx_frames, got);                                              \
		return got;                                                                  \
	}                                                                                    \
	static uint16_t tx_##P(void *q, struct rte_mbuf **pkts, uint16_t n)                  \
	{                                                                                    \
		uint16_t sent = real_tx[P](q, pkts, n);                                      \
		BUMP(counts[P].tx_calls, 1);                                                 \
		BUMP(counts[P].tx_offered, n);                                               \
		BUMP(counts[P].tx_sent, sent);                                               \
		return sent;                                                                 \
	}
WRAPPERS(0)
WRAPPERS(1)
WRAPPERS(2)
WRAPPERS(3)
static const eth_rx_burst_t rx_wrapper[PORTS] = {rx_0, rx_1, rx_2, rx_3};
static const eth_tx_burst_t tx_wrapper[PORTS] = {tx_0, tx_1, tx_2, tx_3};

static long env_ms(const char *name, long fallback)
{
	const char *v = getenv(name);
	return v ? atol(v) : fallback;
}

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&t, &t) != 0)
		;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void snapshot(FILE *f, int s)
{
	fprintf(f, "snapshot %d %llu\n", s, (unsigned long long)now_ns());
	for (int p = 0; p < PORTS; p++) {
		struct counts *c = &counts[p];
		fprintf(f, "port %d %llu %llu %llu %llu %llu\n", p,
			(unsigned long long)__atomic_load_n(&c->rx_calls, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&c->rx_frames, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&c->tx_calls, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&c->tx_offered, __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&c->tx_sent, __ATOMIC_RELAXED));
	}
}

static void *window(void *unused)
{
	(void)unused;
	const char *path = getenv("SAFENIC_BURST_COUNTS");
	char *text = NULL;
	size_t size = 0;
	FILE *buffer = open_memstream(&text, &size);
	if (!path || !buffer)
		return NULL;
	sleep_ms(env_ms("SAFENIC_BURST_WARMUP_MS", 2000));
	snapshot(buffer, 0);
	char mark[4096];
	snprintf(mark, sizeof mark, "%s.start", path);
	FILE *started = fopen(mark, "w");
	if (started)
		fclose(started);
	sleep_ms(env_ms("SAFENIC_BURST_WINDOW_MS", 5000));
	snapshot(buffer, 1);
	fclose(buffer);
	/* Written whole and renamed, so a reader never sees half a file. */
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.part", path);
	FILE *out = fopen(tmp, "w");
	if (out) {
		fputs(text, out);
		fclose(out);
		rename(tmp, path);
	}
	free(text);
	return NULL;
}

__attribute__((destructor)) static void write_totals(void)
{
	const char *path = getenv("SAFENIC_BURST_TOTALS");
	FILE *out = path ? fopen(path, "w") : NULL;
	if (out) {
		snapshot(out, 0);
		fclose(out);
	}
}

static void start_window(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, window, NULL) == 0)
		pthread_detach(t);
}

int rte_eth_dev_start(uint16_t port_id)
{
	static int (*real_start)(uint16_t);
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (!real_start)
		real_start = (int (*)(uint16_t))dlsym(RTLD_NEXT, "rte_eth_dev_start");
	int ret = real_start(port_id);
	if (ret == 0 && port_id < PORTS) {
		struct rte_eth_fp_ops *ops = &rte_eth_fp_ops[port_id];
		real_rx[port_id] = ops->rx_pkt_burst;
		real_tx[port_id] = ops->tx_pkt_burst;
		ops->rx_pkt_burst = rx_wrapper[port_id];
		ops->tx_pkt_burst = tx_wrapper[port_id];
	}
	pthread_once(&once, start_window);
	return ret;
}
