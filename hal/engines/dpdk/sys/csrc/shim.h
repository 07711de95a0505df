/* rtdaq-dpdk-sys: non-inline wrappers of DPDK's static-inline fast path.
 *
 * DPDK declares its per-packet functions `static inline` in headers, so they have no symbol
 * in any librte_*.so that Rust could link. shim.c (compiled by build.rs with the cc crate and
 * the same `pkg-config --cflags libdpdk`) re-exports each as a real function. bindgen reads
 * this header too, so the Rust declarations always match. */
#ifndef RTDAQ_DPDK_SHIM_H
#define RTDAQ_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct rte_device;

/* rte_eth_rx_burst: receive up to n mbufs from (port, queue) into pkts; returns the count. */
uint16_t rtdaq_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/* rtdaq_rx_burst, then pkt_len[i] = pkts[i]->pkt_len and nb_segs[i] = pkts[i]->nb_segs for
 * every mbuf received: one call per burst instead of three per frame. */
uint16_t rtdaq_rx_burst_lens(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
			     uint32_t *pkt_len, uint16_t *nb_segs);
/* rte_eth_tx_burst: hand up to n mbufs to (port, queue); the PMD owns (and frees) the
 * accepted ones; returns the count accepted (a prefix of pkts). */
uint16_t rtdaq_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/* rte_pktmbuf_free (whole chain). NULL is a no-op. */
void rtdaq_pktmbuf_free(struct rte_mbuf *m);
/* rte_pktmbuf_free_bulk: free count mbufs (any pools, NULL entries skipped). */
void rtdaq_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count);
/* rte_pktmbuf_alloc: one reset mbuf, or NULL when the pool is empty. */
struct rte_mbuf *rtdaq_pktmbuf_alloc(struct rte_mempool *pool);
/* rte_pktmbuf_alloc_bulk: all count mbufs or none; 0 or -ENOENT. */
int rtdaq_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned int count);
/* rte_pktmbuf_mtod(m, void *): first byte of the first segment's data. */
void *rtdaq_mbuf_data(const struct rte_mbuf *m);
/* m->data_len: bytes of data in the first segment. */
uint16_t rtdaq_mbuf_data_len(const struct rte_mbuf *m);
/* m->pkt_len: bytes of data in the whole chain. */
uint32_t rtdaq_mbuf_pkt_len(const struct rte_mbuf *m);
/* m->nb_segs: segments in the chain. */
uint16_t rtdaq_mbuf_nb_segs(const struct rte_mbuf *m);
/* m->port: input port of a received mbuf. */
uint16_t rtdaq_mbuf_port(const struct rte_mbuf *m);
/* Bytes the first segment can hold from its data start: data_len + rte_pktmbuf_tailroom. */
uint16_t rtdaq_mbuf_room(const struct rte_mbuf *m);
/* Set data_len and pkt_len of a single-segment mbuf; -1 (unchanged) when len exceeds
 * rtdaq_mbuf_room or the mbuf is chained, else 0. */
int rtdaq_mbuf_set_len(struct rte_mbuf *m, uint16_t len);
/* rte_errno (a per-thread variable behind a macro). */
int rtdaq_errno(void);
/* rte_lcore_id(): this thread's lcore, or UINT32_MAX (LCORE_ID_ANY) for non-EAL threads. */
unsigned int rtdaq_lcore_id(void);

/* --- memory and port features (extmem, link, segments, constants) --- */
/* rte_eth_link_get_nowait, unpacked (rte_eth_link is a bitfield struct): 0 or -errno. */
int rtdaq_link_get(uint16_t port, uint32_t *speed_mbps, int *full_duplex, int *up, int *autoneg);
/* m->next: the next segment of a chained mbuf, or NULL. */
struct rte_mbuf *rtdaq_mbuf_next(const struct rte_mbuf *m);
/* m->pool: the mempool the segment's buffer came from. */
struct rte_mempool *rtdaq_mbuf_pool(const struct rte_mbuf *m);
/* The rte_device behind an ethdev port (rte_eth_dev_info.device), or NULL. */
struct rte_device *rtdaq_port_device(uint16_t port);
/* The values of DPDK macros the Rust side needs (RTE_BIT64 expressions bindgen cannot
 * evaluate); shim.c checks them with static asserts, so they cannot drift. */
#define RTDAQ_RSS_IPV4 (1ULL << 2)
#define RTDAQ_RSS_NONFRAG_IPV4_UDP (1ULL << 5)
#define RTDAQ_RX_OFFLOAD_SCATTER (1ULL << 13)
#define RTDAQ_RX_OFFLOAD_BUFFER_SPLIT (1ULL << 20)
#define RTDAQ_TX_OFFLOAD_SEND_ON_TIMESTAMP (1ULL << 21)
#define RTDAQ_RX_OFFLOAD_TIMESTAMP (1ULL << 14)
#define RTDAQ_RETA_GROUP_SIZE 64

/* --- mbuf pools with layout flags, and the AF_XDP UMEM check --- */
/* rte_pktmbuf_pool_create with mempool flags (RTE_MEMPOOL_F_*): the steps of
 * rte_pktmbuf_pool_create_by_ops (rte_mempool_create_empty, the best mempool ops,
 * rte_pktmbuf_pool_init, populate, rte_pktmbuf_init on every object) with `flags` passed to
 * rte_mempool_create_empty. With `tile_pages` != 0 the objects must divide the pool's page
 * size (rte_mempool_get_page_size: 4 KiB under --no-huge, else the hugepage size) and are
 * populated from ONE memzone aligned to that page (rte_mempool_populate_virt): object k at
 * exactly k * object size from a page start, no gap, none crossing a page (else EINVAL);
 * with 0, rte_mempool_populate_default. NULL with rte_errno set on failure. */
struct rte_mempool *rtdaq_pktmbuf_pool_create_flags(const char *name, unsigned int n,
	unsigned int cache_size, uint16_t data_room, int socket, unsigned int flags,
	int tile_pages);
/* Bytes one mbuf of `data_room` takes in a pool with `flags`: mempool object header + struct
 * rte_mbuf + data room + trailer (rte_mempool_calc_obj_size). */
uint32_t rtdaq_pktmbuf_obj_size(uint16_t data_room, unsigned int flags);
/* Where a pool's mbufs lie relative to the AF_XDP UMEM that DPDK 22.11's net_af_xdp lays over
 * it: the UMEM starts at the page-aligned address of the pool's first memory chunk and is
 * populated_size * obj_size (+ the chunk's offset in its page) long, as if every object
 * followed the previous one with no gap. */
struct rtdaq_umem_fit {
	uint64_t objects;  /* objects visited (populated_size) */
	uint64_t chunks;   /* memory chunks (rte_mempool_memhdr) of the pool */
	uint64_t obj_size; /* header + mbuf + data room + trailer: the UMEM frame (chunk) size */
	uint64_t umem_len; /* the UMEM's length: populated_size * obj_size + offset */
	uint64_t span;     /* from the UMEM start to the end of the last object */
	uint64_t outside;  /* objects not wholly inside [start, start + umem_len) */
	uint64_t first_outside; /* index (in memory order) of the first of those; objects if none */
};
/* Fills `out` for pool `mp`; 0, or -EINVAL for a pool without memory. */
int rtdaq_mempool_umem_fit(struct rte_mempool *mp, struct rtdaq_umem_fit *out);
/* getpagesize(): the page size net_af_xdp aligns its UMEM to. */
unsigned int rtdaq_page_size(void);
#define RTDAQ_MEMPOOL_F_NO_SPREAD 0x0001u
/* Launch times (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP): the mbuf's tx-timestamp dynamic field
 * (at byte `offset`, registered by rte_mbuf_dyn_tx_timestamp_register) set to `t` (the
 * device's clock) and its `flag` raised in ol_flags. */
void rtdaq_mbuf_set_txtime(struct rte_mbuf *m, int offset, uint64_t flag, uint64_t t);
/* The mbuf's time in the dynamic field at `offset` when `flag` is raised: 1 with it in *t,
 * else 0 (the launch time of a frame to send; a received frame's hardware stamp, field and
 * flag of rte_mbuf_dyn_rx_timestamp_register). */
int rtdaq_mbuf_txtime(const struct rte_mbuf *m, int offset, uint64_t flag, uint64_t *t);

#endif
