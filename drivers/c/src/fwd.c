// safenic-c-<model>: the C baseline forwarder. One binary per model, chosen at compile time:
// -DMODEL_RESTRICTED, -DMODEL_CONST (one output, a compile-time constant) or -DMODEL_FLEXIBLE.
//
// Command-line contract (same as `safenic fwd`):
//   safenic-c-<model> fwd <model> <BDF-in> <BDF-out> [--sysfs DIR] [--mac-rewrite paper|none]
//                     [--outputs 1-64] [--seconds S] [--cpu N] [--flow-control]
//                     [--queues 1-16] [--cores LIST] [--xdp-bind auto|copy|zero-copy]
// A port is a PCI address (82599 or virtio-net) or xdp:IFNAME[@QUEUE] (AF_XDP, flexible model).
// Forwards both directions until SIGINT/SIGTERM (or --seconds), prints one summary line, exits 0.
#include "afxdp.h"
#include "ixgbe.h"
#include "virtio.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(MODEL_RESTRICTED)
#define MODEL "restricted"
#elif defined(MODEL_CONST)
#define MODEL "const"
#define CONST_OUTPUTS 1u
#elif defined(MODEL_FLEXIBLE)
#define MODEL "flexible"
#else
#error "define MODEL_RESTRICTED, MODEL_CONST or MODEL_FLEXIBLE"
#endif

// Loop iterations between looks at the clock and the signal flag.
#define CHECK_EVERY 1024u

struct options {
	const char *input, *output, *sysfs;
	bool rewrite;
	unsigned outputs;
	double seconds; // 0: until a signal
	int cpu;        // -1: not pinned
	bool flow_control;
	unsigned queues;          // queue pairs RSS spreads the flows over
	int cores[RSS_QUEUES];    // the CPU of each forwarding thread (--cores)
	unsigned core_count;      // 0: one thread, this one
	enum xdp_bind xdp_bind;   // how AF_XDP sockets are bound
};

// What a run discarded itself: frames with a refused length or flags, and frames dropped because
// the TX ring was full (flexible model without flow control) or still waiting when it stopped.
struct discarded {
	uint64_t malformed, dropped;
};

static double now_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// How long a removed device can go unnoticed: a register read costs a PCIe round trip.
#define PRESENCE_PERIOD 0.1

// Stop conditions (time, signal, a device gone) and the per-second throughput line (on a
// terminal).
struct meter {
	double start, last, until, last_presence;
	uint64_t last_total;
	bool progress, has_deadline;
	const struct device *devices[2]; // NULL for a virtio port: not watched
	const struct device *gone;       // the device that went away, if one did
	const struct xdp_port *xdp[2];   // AF_XDP ports, watched for their interface going down or away
	const char *broken;              // why an AF_XDP port stopped forwarding, if one did
};

// Set by the forwarding thread that finds a device gone: every thread stops.
static bool stop_everyone;

__attribute__((noinline)) static bool meter_tick(struct meter *m, const uint64_t counts[2])
{
	if (terminate_requested || __atomic_load_n(&stop_everyone, __ATOMIC_RELAXED)) {
		return false;
	}
	double now = now_seconds();
	if (now - m->last_presence >= PRESENCE_PERIOD) {
		m->last_presence = now;
		for (int i = 0; i < 2; i++) {
			if (m->devices[i] != NULL && !device_present(m->devices[i])) {
				m->gone = m->devices[i];
				__atomic_store_n(&stop_everyone, true, __ATOMIC_RELAXED);
				return false;
			}
			if (m->xdp[i] != NULL && (m->broken = xdp_port_broken(m->xdp[i])) != NULL) {
				return false;
			}
		}
	}
	if (m->progress && now - m->last >= 1.0) {
		uint64_t total = counts[0] + counts[1];
		printf("%6.1f s  %7.3f Mpps  (%llu in->out, %llu out->in)\n", now - m->start,
		       (double)(total - m->last_total) / (now - m->last) / 1e6, (unsigned long long)counts[0],
		       (unsigned long long)counts[1]);
		fflush(stdout);
		m->last = now;
		m->last_total = total;
	}
	return !m->has_deadline || now < m->until;
}

// The paper's rewrite: destination 00:00:00:00:00:01, source 00:00:00:00:00:00, as one 8-byte
// and one 4-byte volatile store (buffers are 2 KiB aligned). Volatile, like the descriptor
// writes that follow, so the compiler keeps them before the packet is handed to the device.
static inline void rewrite_macs(uint8_t *restrict packet)
{
	*(volatile uint64_t *)(void *)packet = 1ull << 40; // bytes 00 00 00 00 00 01 00 00 (little-endian)
	*(volatile uint32_t *)(void *)(packet + 8) = 0;
}

#if defined(MODEL_RESTRICTED) || defined(MODEL_CONST)

#ifdef CONST_OUTPUTS
#define OUTPUTS(n) CONST_OUTPUTS
#else
#define OUTPUTS(n) (n)
#endif

// Each packet goes to the next output in turn.
struct round_robin {
	unsigned next;
	unsigned count;
	bool rewrite;
};

static inline __attribute__((always_inline)) void forward_packet(void *ctx, uint8_t *packet, uint16_t length,
                                                                 uint16_t *lengths)
{
	struct round_robin *r = ctx;
	if (r->rewrite) {
		rewrite_macs(packet);
	}
	lengths[r->next] = length;
	r->next = r->next + 1 == OUTPUTS(r->count) ? 0 : r->next + 1;
}

// The loops are named forward_<model> (and not inlined) so that the benchmark's callgrind run
// counts exactly them.

// The agents' loop. `rewrite` is a constant at each call site below, so each gets its own
// loop, as the Rust driver's REWRITE const generic does.
// Both directions of one RSS queue: RX queue q of the first port to the second, and back.
struct pair {
	struct agent ab, ba;
};

static inline __attribute__((always_inline)) void forward_agents(struct pair *restrict pairs, unsigned n,
                                                                 unsigned outputs, bool rewrite, struct meter *m,
                                                                 uint64_t counts[2])
{
	struct round_robin rr_ab = {0, outputs, rewrite}, rr_ba = {0, outputs, rewrite};
	do {
		for (unsigned k = 0; k < CHECK_EVERY; k++) {
			for (unsigned p = 0; p < n; p++) {
				counts[0] += agent_run(&pairs[p].ab, OUTPUTS(outputs), forward_packet, &rr_ab);
				counts[1] += agent_run(&pairs[p].ba, OUTPUTS(outputs), forward_packet, &rr_ba);
			}
		}
	} while (meter_tick(m, counts));
}

#ifdef MODEL_CONST
__attribute__((noinline)) void forward_const(struct pair *restrict pairs, unsigned n, bool rewrite, struct meter *m,
                                             uint64_t counts[2]);
__attribute__((noinline)) void forward_const(struct pair *restrict pairs, unsigned n, bool rewrite, struct meter *m,
                                             uint64_t counts[2])
{
	if (rewrite) {
		forward_agents(pairs, n, CONST_OUTPUTS, true, m, counts);
	} else {
		forward_agents(pairs, n, CONST_OUTPUTS, false, m, counts);
	}
}
#else
__attribute__((noinline)) void forward_restricted(struct pair *restrict pairs, unsigned n, unsigned outputs,
                                                  bool rewrite, struct meter *m, uint64_t counts[2]);
__attribute__((noinline)) void forward_restricted(struct pair *restrict pairs, unsigned n, unsigned outputs,
                                                  bool rewrite, struct meter *m, uint64_t counts[2])
{
	if (rewrite) {
		forward_agents(pairs, n, outputs, true, m, counts);
	} else {
		forward_agents(pairs, n, outputs, false, m, counts);
	}
}
#endif

// One forwarding thread's loop over its queue pairs.
static void forward_model(struct pair *pairs, unsigned n, const struct options *o, struct meter *m,
                          uint64_t counts[2])
{
#ifdef MODEL_CONST
	forward_const(pairs, n, o->rewrite, m, counts);
#else
	forward_restricted(pairs, n, o->outputs, o->rewrite, m, counts);
#endif
}

static void serve_on_cores(struct pair *pairs, const struct options *o, struct meter *m, uint64_t counts[2]);

static struct discarded run_model(const struct device *a, const struct device *b, const struct options *o,
                                  struct meter *m, uint64_t counts[2])
{
	static struct pair pairs[RSS_QUEUES];
	const struct device *to_b[MAX_OUTPUTS], *to_a[MAX_OUTPUTS];
	for (unsigned i = 0; i < o->outputs; i++) {
		to_b[i] = b;
		to_a[i] = a;
	}
	for (unsigned q = 0; q < o->queues; q++) {
		agent_init(&pairs[q].ab, a, q, to_b, o->outputs);
		agent_init(&pairs[q].ba, b, q, to_a, o->outputs);
	}
	serve_on_cores(pairs, o, m, counts);
	struct discarded lost = {0, 0};
	for (unsigned q = 0; q < o->queues; q++) {
		lost.malformed += pairs[q].ab.malformed + pairs[q].ba.malformed;
	}
	return lost;
}

#else // MODEL_FLEXIBLE

// Packets per batch and buffers per direction's pool (as the Rust driver).
#define BATCH 32u
#define POOL 4096u

// One direction: its RX queue, the other port's TX queue, and the pool they share.
struct direction {
	struct rx_queue rx;
	struct tx_queue tx;
	struct pool pool;
	struct buffer batch[BATCH];
	unsigned waiting;  // frames at the front of `batch` still to send (lossless only)
	uint64_t dropped;  // frames dropped because the TX ring was full
};

// Receive into the batch's free room, rewrite what arrived, transmit. What did not fit into the
// TX ring goes back to the pool and is counted (DPDK's usual policy); with `lossless` it stays at
// the front of the batch for the next burst, so a full TX ring backs up into the RX ring and the
// packet buffer, whose XOFF pauses the link partner (as the Rust driver's LOSSLESS).
static inline __attribute__((always_inline)) uint64_t burst(struct direction *restrict d, bool rewrite, bool lossless)
{
	unsigned waiting = lossless ? d->waiting : 0;
	unsigned got = rx_batch(&d->rx, &d->pool, d->batch + waiting, BATCH - waiting);
	if (got == 0 && waiting == 0) {
		return 0;
	}
	if (rewrite) {
		for (unsigned k = waiting; k < waiting + got; k++) {
			rewrite_macs(d->batch[k].data);
		}
	}
	unsigned count = waiting + got;
	unsigned sent = tx_batch(&d->tx, &d->pool, d->batch, count);
	if (lossless) {
		for (unsigned k = sent; k < count; k++) {
			d->batch[k - sent] = d->batch[k];
		}
		d->waiting = count - sent;
	} else {
		for (unsigned k = sent; k < count; k++) {
			pool_give(&d->pool, d->batch[k]);
		}
		d->dropped += count - sent;
	}
	return sent;
}

// Both directions until the meter says stop; `rewrite` and `lossless` are constants at each call
// site below, so each combination gets its own loop, as the Rust driver's const generics.
// Both directions of one RSS queue.
struct pair {
	struct direction ab, ba;
};

static inline __attribute__((always_inline)) void forward_directions(struct pair *restrict pairs, unsigned n,
                                                                     bool rewrite, bool lossless, struct meter *m,
                                                                     uint64_t counts[2])
{
	do {
		for (unsigned k = 0; k < CHECK_EVERY; k++) {
			for (unsigned p = 0; p < n; p++) {
				counts[0] += burst(&pairs[p].ab, rewrite, lossless);
				counts[1] += burst(&pairs[p].ba, rewrite, lossless);
			}
		}
	} while (meter_tick(m, counts));
}

__attribute__((noinline)) void forward_flexible(struct pair *restrict pairs, unsigned n, bool rewrite, bool lossless,
                                                struct meter *m, uint64_t counts[2]);
__attribute__((noinline)) void forward_flexible(struct pair *restrict pairs, unsigned n, bool rewrite, bool lossless,
                                                struct meter *m, uint64_t counts[2])
{
	if (rewrite && !lossless) {
		forward_directions(pairs, n, true, false, m, counts);
	} else if (!lossless) {
		forward_directions(pairs, n, false, false, m, counts);
	} else if (rewrite) {
		forward_directions(pairs, n, true, true, m, counts);
	} else {
		forward_directions(pairs, n, false, true, m, counts);
	}
}

static void forward_model(struct pair *pairs, unsigned n, const struct options *o, struct meter *m,
                          uint64_t counts[2])
{
	forward_flexible(pairs, n, o->rewrite, o->flow_control, m, counts);
}

static void serve_on_cores(struct pair *pairs, const struct options *o, struct meter *m, uint64_t counts[2]);

// Frames a direction dropped, counting those still waiting in its batch, which go back to the
// pool now that forwarding has stopped.
static uint64_t stop_direction(struct direction *d)
{
	for (unsigned k = 0; k < d->waiting; k++) {
		pool_give(&d->pool, d->batch[k]);
	}
	d->dropped += d->waiting;
	d->waiting = 0;
	return d->dropped;
}

static struct discarded run_model(const struct device *a, const struct device *b, const struct options *o,
                                  struct meter *m, uint64_t counts[2])
{
	// "Pool inversion": the RX queue of one port and the TX queue of the other share a pool.
	// With several queue pairs the pool is shared out, never below what fills both rings.
	static struct queue_memory mems[RSS_QUEUES][2];
	static struct pair pairs[RSS_QUEUES];
	unsigned pool = POOL / o->queues > 2 * RING_SIZE + 2 * BATCH ? POOL / o->queues : 2 * RING_SIZE + 2 * BATCH;
	for (unsigned q = 0; q < o->queues; q++) {
		struct direction *ab = &pairs[q].ab, *ba = &pairs[q].ba;
		queue_memory_allocate(&mems[q][0], pool);
		queue_memory_allocate(&mems[q][1], pool);
		pool_init(&ab->pool, &mems[q][0]);
		pool_init(&ba->pool, &mems[q][1]);
		rx_queue_init(&ab->rx, a, q, &mems[q][0], &ab->pool);
		rx_queue_init(&ba->rx, b, q, &mems[q][1], &ba->pool);
		tx_queue_init(&ab->tx, b, &mems[q][0]);
		tx_queue_init(&ba->tx, a, &mems[q][1]);
	}
	serve_on_cores(pairs, o, m, counts);
	struct discarded lost = {0, 0};
	for (unsigned q = 0; q < o->queues; q++) {
		lost.malformed += pairs[q].ab.rx.malformed + pairs[q].ba.rx.malformed;
		lost.dropped += stop_direction(&pairs[q].ab) + stop_direction(&pairs[q].ba);
	}
	return lost;
}


#endif // MODEL_FLEXIBLE

// One forwarding thread: its CPU, its queue pairs, its meter and counts.
struct share {
	struct pair *pairs;
	unsigned n;
	int cpu;
	const struct options *o;
	struct meter m;
	uint64_t counts[2];
};

static void *serve(void *arg)
{
	struct share *s = arg;
	pin_to_cpu(s->cpu);
	forward_model(s->pairs, s->n, s->o, &s->m, s->counts);
	return NULL;
}

// The queue pairs on this thread (no --cores), or each core's even share on a thread of its
// own, pinned there, as the Rust driver's serve_on_cores; counts and a gone device are added up.
static void serve_on_cores(struct pair *pairs, const struct options *o, struct meter *m, uint64_t counts[2])
{
	if (o->core_count <= 1) {
		if (o->core_count == 1) {
			pin_to_cpu(o->cores[0]);
		}
		forward_model(pairs, o->queues, o, m, counts);
		return;
	}
	static struct share shares[RSS_QUEUES];
	pthread_t threads[RSS_QUEUES];
	unsigned each = o->queues / o->core_count, more = o->queues % o->core_count, first = 0;
	for (unsigned t = 0; t < o->core_count; t++) {
		unsigned n = each + (t < more ? 1 : 0);
		shares[t] = (struct share){.pairs = pairs + first, .n = n, .cpu = o->cores[t], .o = o, .m = *m};
		shares[t].m.progress = m->progress && t == 0;
		first += n;
		int e = pthread_create(&threads[t], NULL, serve, &shares[t]);
		if (e != 0) {
			die("starting a forwarding thread: %s", strerror(e));
		}
	}
	for (unsigned t = 0; t < o->core_count; t++) {
		pthread_join(threads[t], NULL);
		counts[0] += shares[t].counts[0];
		counts[1] += shares[t].counts[1];
		if (m->gone == NULL) {
			m->gone = shares[t].m.gone;
		}
	}
}

#ifdef MODEL_FLEXIBLE
// Two virtio-net ports (docs/virtio.md): the same loop over the virtio queues, always lossless
// as crates/virtio's (a virtio device holds its link partner while it has no receive buffer).
struct virtio_direction {
	struct virtio_rx *rx;
	struct virtio_tx *tx;
	struct pool pool;
	struct buffer batch[BATCH];
	unsigned waiting; // frames at the front of `batch` still to send
};

static inline __attribute__((always_inline)) uint64_t virtio_burst(struct virtio_direction *restrict d, bool rewrite)
{
	unsigned waiting = d->waiting;
	unsigned got = virtio_rx_batch(d->rx, &d->pool, d->batch + waiting, BATCH - waiting);
	if (got == 0 && waiting == 0) {
		return 0;
	}
	if (rewrite) {
		for (unsigned k = waiting; k < waiting + got; k++) {
			rewrite_macs(d->batch[k].data);
		}
	}
	unsigned count = waiting + got;
	unsigned sent = virtio_tx_batch(d->tx, &d->pool, d->batch, count);
	for (unsigned k = sent; k < count; k++) {
		d->batch[k - sent] = d->batch[k];
	}
	d->waiting = count - sent;
	return sent;
}

static inline __attribute__((always_inline)) void virtio_directions(struct virtio_direction *restrict ab,
                                                                    struct virtio_direction *restrict ba, bool rewrite,
                                                                    struct meter *m, uint64_t counts[2])
{
	do {
		for (unsigned k = 0; k < CHECK_EVERY; k++) {
			counts[0] += virtio_burst(ab, rewrite);
			counts[1] += virtio_burst(ba, rewrite);
		}
	} while (meter_tick(m, counts));
}

__attribute__((noinline)) void forward_virtio(struct virtio_direction *restrict ab, struct virtio_direction *restrict ba,
                                              bool rewrite, struct meter *m, uint64_t counts[2]);
__attribute__((noinline)) void forward_virtio(struct virtio_direction *restrict ab, struct virtio_direction *restrict ba,
                                              bool rewrite, struct meter *m, uint64_t counts[2])
{
	if (rewrite) {
		virtio_directions(ab, ba, true, m, counts);
	} else {
		virtio_directions(ab, ba, false, m, counts);
	}
}

static struct discarded run_virtio(const struct virtio_device *a, const struct virtio_device *b,
                                   const struct options *o, struct meter *m, uint64_t counts[2])
{
	// One memory per direction: its receive queue and pool, the other port's transmit queue
	// (pool inversion) and a control queue, as crates/safenic's virtio_both.
	static struct virtio_memory mem_ab, mem_ba;
	static struct virtio_rx rx_a, rx_b;
	static struct virtio_tx tx_a, tx_b;
	static struct virtio_direction ab, ba;
	virtio_memory_allocate(&mem_ab, POOL);
	virtio_memory_allocate(&mem_ba, POOL);
	virtio_pool_init(&ab.pool, &mem_ab);
	virtio_pool_init(&ba.pool, &mem_ba);
	virtio_rx_init(&rx_a, a, &mem_ab, &ab.pool);
	virtio_rx_init(&rx_b, b, &mem_ba, &ba.pool);
	virtio_tx_init(&tx_b, b, &mem_ab);
	virtio_tx_init(&tx_a, a, &mem_ba);
	virtio_start(a, &mem_ab);
	virtio_start(b, &mem_ba);
	ab = (struct virtio_direction){.rx = &rx_a, .tx = &tx_b, .pool = ab.pool, .waiting = 0};
	ba = (struct virtio_direction){.rx = &rx_b, .tx = &tx_a, .pool = ba.pool, .waiting = 0};
	forward_virtio(&ab, &ba, o->rewrite, m, counts);
	uint64_t dropped = ab.waiting + ba.waiting;
	return (struct discarded){.malformed = rx_a.malformed + rx_b.malformed, .dropped = dropped};
}

// Two AF_XDP ports (docs/afxdp.md): the same loop over AF_XDP queues. One region of frames is
// both sockets' UMEM and holds both directions' pools.
struct xdp_direction {
	struct xdp_port *rx, *tx;
	struct pool pool;
	struct buffer batch[BATCH];
	unsigned waiting; // frames at the front of `batch` still to send
};

static inline __attribute__((always_inline)) uint64_t xdp_burst(struct xdp_direction *restrict d, bool rewrite)
{
	unsigned waiting = d->waiting;
	unsigned got = xdp_rx_batch(d->rx, &d->pool, d->batch + waiting, BATCH - waiting);
	if (got == 0 && waiting == 0) {
		xdp_tx_idle(d->tx, &d->pool);
		return 0;
	}
	if (rewrite) {
		for (unsigned k = waiting; k < waiting + got; k++) {
			rewrite_macs(d->batch[k].data);
		}
	}
	unsigned count = waiting + got;
	unsigned sent = xdp_tx_batch(d->tx, &d->pool, d->batch, count);
	for (unsigned k = sent; k < count; k++) {
		d->batch[k - sent] = d->batch[k];
	}
	d->waiting = count - sent;
	return sent;
}

static inline __attribute__((always_inline)) void xdp_directions(struct xdp_direction *restrict ab,
                                                                 struct xdp_direction *restrict ba, bool rewrite,
                                                                 struct meter *m, uint64_t counts[2])
{
	do {
		for (unsigned k = 0; k < CHECK_EVERY; k++) {
			counts[0] += xdp_burst(ab, rewrite);
			counts[1] += xdp_burst(ba, rewrite);
		}
	} while (meter_tick(m, counts));
}

__attribute__((noinline)) void forward_xdp(struct xdp_direction *restrict ab, struct xdp_direction *restrict ba,
                                           bool rewrite, struct meter *m, uint64_t counts[2]);
__attribute__((noinline)) void forward_xdp(struct xdp_direction *restrict ab, struct xdp_direction *restrict ba,
                                           bool rewrite, struct meter *m, uint64_t counts[2])
{
	if (rewrite) {
		xdp_directions(ab, ba, true, m, counts);
	} else {
		xdp_directions(ab, ba, false, m, counts);
	}
}

#endif

__attribute__((noreturn)) static void usage(void)
{
	die("usage: %s fwd " MODEL " <BDF-in> <BDF-out> [--sysfs DIR] [--mac-rewrite paper|none] [--outputs 1-64] "
	    "[--seconds S] [--cpu N] [--flow-control]",
	    program_name);
}

static const char *value_of(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		die("%s needs a value", argv[*i]);
	}
	return argv[++*i];
}

static void parse(int argc, char **argv, struct options *o)
{
	const char *env = getenv("SAFENIC_SYSFS");
	*o = (struct options){
	    .sysfs = env && *env ? env : "/sys/bus/pci/devices", .rewrite = true, .outputs = 1, .cpu = -1, .queues = 1};
	if (argc < 5 || strcmp(argv[1], "fwd") != 0) {
		usage();
	}
	if (strcmp(argv[2], MODEL) != 0) {
		die("this binary is the " MODEL " model; for `%s` run safenic-c-%s", argv[2], argv[2]);
	}
	o->input = argv[3];
	o->output = argv[4];
	bool outputs_given = false;
	for (int i = 5; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--sysfs") == 0) {
			o->sysfs = value_of(argc, argv, &i);
		} else if (strcmp(arg, "--mac-rewrite") == 0) {
			const char *v = value_of(argc, argv, &i);
			if (strcmp(v, "paper") != 0 && strcmp(v, "none") != 0) {
				die("--mac-rewrite %s: use paper or none", v);
			}
			o->rewrite = strcmp(v, "paper") == 0;
		} else if (strcmp(arg, "--outputs") == 0) {
			char *end;
			long n = strtol(value_of(argc, argv, &i), &end, 10);
			if (*end || n < 1 || n > (long)MAX_OUTPUTS) {
				die("--outputs %s: an agent has 1 to 64 outputs", argv[i]);
			}
			o->outputs = (unsigned)n;
			outputs_given = true;
		} else if (strcmp(arg, "--seconds") == 0) {
			char *end;
			o->seconds = strtod(value_of(argc, argv, &i), &end);
			if (*end || o->seconds <= 0) {
				die("--seconds %s: give a positive number", argv[i]);
			}
		} else if (strcmp(arg, "--cpu") == 0) {
			char *end;
			long cpu = strtol(value_of(argc, argv, &i), &end, 10);
			if (*end || cpu < 0 || cpu >= CPU_SETSIZE) {
				die("--cpu %s: give a CPU number", argv[i]);
			}
			o->cpu = (int)cpu;
		} else if (strcmp(arg, "--flow-control") == 0) {
			o->flow_control = true;
		} else if (strcmp(arg, "--queues") == 0) {
			char *end;
			long n = strtol(value_of(argc, argv, &i), &end, 10);
			if (*end || n < 1 || n > (long)RSS_QUEUES) {
				die("--queues %s: give 1 to 16 queue pairs (RSS spreads over 16)", argv[i]);
			}
			o->queues = (unsigned)n;
		} else if (strcmp(arg, "--cores") == 0) {
			char *list = strdup(value_of(argc, argv, &i)), *save = NULL;
			for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
				char *end;
				long cpu = strtol(c, &end, 10);
				if (*end || cpu < 0 || cpu >= CPU_SETSIZE || o->core_count == RSS_QUEUES) {
					die("--cores %s: give CPU numbers, comma-separated", argv[i]);
				}
				for (unsigned k = 0; k < o->core_count; k++) {
					if (o->cores[k] == cpu) {
						die("--cores: a CPU is listed twice: give each core once");
					}
				}
				o->cores[o->core_count++] = (int)cpu;
			}
			free(list);
		} else if (strcmp(arg, "--xdp-bind") == 0) {
			const char *v = value_of(argc, argv, &i);
			if (strcmp(v, "auto") == 0) {
				o->xdp_bind = XDP_BIND_AUTO;
			} else if (strcmp(v, "copy") == 0) {
				o->xdp_bind = XDP_BIND_COPY;
			} else if (strcmp(v, "zero-copy") == 0) {
				o->xdp_bind = XDP_BIND_ZERO_COPY;
			} else {
				die("--xdp-bind %s: use auto, copy or zero-copy", v);
			}
		} else {
			die("unknown argument `%s`", arg);
		}
	}
	if (o->core_count > 0 && o->cpu >= 0) {
		die("give --cpu or --cores, not both");
	}
	if (o->core_count > o->queues) {
		die("--cores lists %u cores for %u queue pairs: give at most as many cores as --queues", o->core_count,
		    o->queues);
	}
	if (o->queues * o->outputs > MAX_QUEUES) {
		die("--queues %u with --outputs %u needs %u TX queues per port; a port has %u: give fewer", o->queues,
		    o->outputs, o->queues * o->outputs, MAX_QUEUES);
	}
#ifndef MODEL_RESTRICTED
	if (outputs_given && o->outputs != 1) {
		die("--outputs applies to the restricted model only (const has 1, flexible has 1 queue)");
	}
#else
	(void)outputs_given;
#endif
}

// The ports whose queues are stopped when the program exits, however it exits (`die` too).
static struct port *opened[2];
static struct virtio_device *opened_virtio[2];

static void stop_queues_at_exit(void)
{
	for (int i = 0; i < 2; i++) {
		if (opened[i] != NULL && opened[i]->device.regs != NULL) {
			device_stop_queues(&opened[i]->device);
		}
		if (opened_virtio[i] != NULL && opened_virtio[i]->bar >= 0) {
			uint8_t zero = 0; // status 0: a reset, done before the write returns [virtio 1.2 §2.4]
			(void)!pwrite(opened_virtio[i]->bar, &zero, 1, 18);
		}
	}
}

static void summary(const struct options *o, const uint64_t counts[2], struct discarded lost, double secs,
                    const char *suffix)
{
	printf("%s fwd " MODEL ": %s -> %s %llu packets, %s -> %s %llu packets, %.1f s, %.3f Mpps, %llu malformed, %llu "
	       "dropped%s\n",
	       program_name, o->input, o->output, (unsigned long long)counts[0], o->output, o->input,
	       (unsigned long long)counts[1], secs, (double)(counts[0] + counts[1]) / (secs > 1e-9 ? secs : 1e-9) / 1e6,
	       (unsigned long long)lost.malformed, (unsigned long long)lost.dropped, suffix);
}

static struct meter meter_from_now(const struct options *o, const struct device *a, const struct device *b)
{
	double start = now_seconds();
	return (struct meter){.start = start,
	                      .last = start,
	                      .until = start + o->seconds,
	                      .last_presence = start,
	                      .last_total = 0,
	                      .progress = isatty(STDOUT_FILENO),
	                      .has_deadline = o->seconds > 0,
	                      .devices = {a, b},
	                      .gone = NULL};
}

// Both ports virtio-net functions: the flexible model's loop over virtio queues.
static int main_virtio(const struct options *o)
{
#ifndef MODEL_FLEXIBLE
	(void)o;
	die("the " MODEL " model is the 82599's (TinyNF's agents own their rings): use flexible on virtio ports");
#else
	static struct virtio_device a, b;
	a.bar = b.bar = -1;
	opened_virtio[0] = &a;
	opened_virtio[1] = &b;
	atexit(stop_queues_at_exit);
	virtio_open(&a, o->sysfs, o->input);
	virtio_open(&b, o->sysfs, o->output);
	if (strcmp(a.address, b.address) == 0) {
		die("%s is both input and output: give two different ports", o->input);
	}
	struct meter m = meter_from_now(o, NULL, NULL);
	uint64_t counts[2] = {0, 0};
	struct discarded lost = run_virtio(&a, &b, o, &m, counts);
	summary(o, counts, lost, now_seconds() - m.start, " (virtio)");
	return 0;
#endif
}

#ifdef MODEL_FLEXIBLE
// The AF_XDP ports to close when the program exits, however it exits (`die` too): libxdp
// detaches the program it attached only then.
static struct xdp_port *opened_xdp[2];

static void close_xdp_at_exit(void)
{
	for (int i = 0; i < 2; i++) {
		if (opened_xdp[i] != NULL) {
			xdp_port_close(opened_xdp[i]);
		}
	}
}
#endif

// Both ports AF_XDP: the flexible model's loop over AF_XDP queues.
static int main_xdp(const struct options *o)
{
#ifndef MODEL_FLEXIBLE
	(void)o;
	die("the " MODEL " model is the 82599's (TinyNF's agents own their rings): use flexible with an AF_XDP port");
#else
	if (o->queues > 1 || o->core_count > 0) {
		die("--queues and --cores are for two 82599 ports: an AF_XDP port is one queue (xdp:IFNAME@QUEUE)");
	}
	if (strcmp(o->input, o->output) == 0) {
		die("%s is both input and output: give two different ports", o->input);
	}
	static struct xdp_area area;
	static struct xdp_port a, b;
	static struct xdp_direction ab, ba;
	xdp_area_allocate(&area, 2 * XDP_POOL);
	xdp_pool_init(&ab.pool, &area, 0, XDP_POOL);
	xdp_pool_init(&ba.pool, &area, XDP_POOL, XDP_POOL);
	opened_xdp[0] = &a;
	opened_xdp[1] = &b;
	atexit(close_xdp_at_exit);
	xdp_port_open(&a, o->input, &area, o->xdp_bind, &ab.pool);
	xdp_port_open(&b, o->output, &area, o->xdp_bind, &ba.pool);
	if (a.ifindex == b.ifindex && a.queue == b.queue) {
		die("%s is both input and output: give two different ports", o->input);
	}
	ab.rx = &a;
	ab.tx = &b;
	ba.rx = &b;
	ba.tx = &a;
	const struct xdp_port *ports[2] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		printf("xdp:%s@%u: %s mode, %s XDP: forwarding\n", ports[i]->name, ports[i]->queue,
		       ports[i]->zero_copy ? "zero-copy" : "copy", ports[i]->native ? "native" : "generic");
	}
	fflush(stdout);
	struct meter m = meter_from_now(o, NULL, NULL);
	m.xdp[0] = &a;
	m.xdp[1] = &b;
	uint64_t counts[2] = {0, 0};
	forward_xdp(&ab, &ba, o->rewrite, &m, counts);
	double secs = now_seconds() - m.start;
	for (int i = 0; i < 2; i++) {
		char line[512];
		xdp_port_describe(ports[i], line, sizeof line);
		printf("%s\n", line);
	}
	struct discarded lost = {.malformed = a.malformed + b.malformed, .dropped = ab.waiting + ba.waiting};
	summary(o, counts, lost, secs, " (AF_XDP)");
	if (m.broken != NULL) {
		fflush(stdout);
		die("%s", m.broken);
	}
	return 0;
#endif
}

int main(int argc, char **argv)
{
	program_name = "safenic-c-" MODEL;
	struct options o;
	parse(argc, argv, &o);
	install_termination_handlers();
	if (o.cpu >= 0) {
		pin_to_cpu(o.cpu);
	}
	bool xdp_in = xdp_names_port(o.input), xdp_out = xdp_names_port(o.output);
	if (xdp_in && xdp_out) {
		return main_xdp(&o);
	}
	if (xdp_in || xdp_out) {
		die("%s is an AF_XDP port and %s a PCI function: the C baseline forwards between two of a kind (safenic fwd "
		    "forwards between the two)",
		    xdp_in ? o.input : o.output, xdp_in ? o.output : o.input);
	}
	bool virtio_in = pci_vendor(o.sysfs, o.input) == 0x1AF4, virtio_out = pci_vendor(o.sysfs, o.output) == 0x1AF4;
	if ((virtio_in || virtio_out) && (o.queues > 1 || o.core_count > 0)) {
		die("--queues and --cores are for 82599 ports (RSS): a virtio-net port has one queue pair here");
	}
	if (virtio_in && virtio_out) {
		return main_virtio(&o);
	}
	if (virtio_in || virtio_out) {
		die("%s is a virtio-net port and %s an 82599: the C baseline forwards between two of a kind (safenic fwd "
		    "forwards between the two)",
		    virtio_in ? o.input : o.output, virtio_in ? o.output : o.input);
	}
	static struct port port_a, port_b;
	port_open(&port_a, o.sysfs, o.input);
	port_open(&port_b, o.sysfs, o.output);
	opened[0] = &port_a;
	opened[1] = &port_b;
	atexit(stop_queues_at_exit);
	if (strcmp(port_a.function.address, port_b.function.address) == 0) {
		die("%s is both input and output: give two different ports", o.input);
	}
	device_init(&port_a.device);
	device_init(&port_b.device);
	if (o.flow_control) {
		device_enable_flow_control(&port_a.device);
		device_enable_flow_control(&port_b.device);
	}
	// One queue pair needs no RSS: every frame reaches queue 0.
	if (o.queues > 1) {
		device_enable_rss(&port_a.device, o.queues);
		device_enable_rss(&port_b.device, o.queues);
	}
	device_wait_for_link(&port_a.device, 10);
	device_wait_for_link(&port_b.device, 10);
	struct meter m = meter_from_now(&o, &port_a.device, &port_b.device);
	uint64_t counts[2] = {0, 0};
	struct discarded lost = run_model(&port_a.device, &port_b.device, &o, &m, counts);
	summary(&o, counts, lost, now_seconds() - m.start, "");
	if (m.gone) {
		fflush(stdout);
		die("%s", device_gone_message(m.gone));
	}
	return 0;
}
