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
/* The rte_device behind an ethdev port (rte_eth_dev_info.device), or NULL. */
struct rte_device *rtdaq_port_device(uint16_t port);
/* The values of DPDK macros the Rust side needs (RTE_BIT64 expressions bindgen cannot
 * evaluate); shim.c checks them with static asserts, so they cannot drift. */
#define RTDAQ_RSS_IPV4 (1ULL << 2)
#define RTDAQ_RSS_NONFRAG_IPV4_UDP (1ULL << 5)
#define RTDAQ_RX_OFFLOAD_SCATTER (1ULL << 13)
#define RTDAQ_RX_OFFLOAD_BUFFER_SPLIT (1ULL << 20)
#define RTDAQ_RETA_GROUP_SIZE 64

#endif
