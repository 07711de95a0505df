/* See shim.h. Each function is a one-line forward to DPDK's static-inline original. */
#include <string.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "shim.h"

uint16_t rtdaq_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t rtdaq_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

void rtdaq_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void rtdaq_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count)
{
	rte_pktmbuf_free_bulk(mbufs, count);
}

struct rte_mbuf *rtdaq_pktmbuf_alloc(struct rte_mempool *pool)
{
	return rte_pktmbuf_alloc(pool);
}

int rtdaq_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(pool, mbufs, count);
}

void *rtdaq_mbuf_data(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

uint16_t rtdaq_mbuf_data_len(const struct rte_mbuf *m)
{
	return m->data_len;
}

uint32_t rtdaq_mbuf_pkt_len(const struct rte_mbuf *m)
{
	return m->pkt_len;
}

uint16_t rtdaq_mbuf_nb_segs(const struct rte_mbuf *m)
{
	return m->nb_segs;
}

uint16_t rtdaq_mbuf_port(const struct rte_mbuf *m)
{
	return m->port;
}

uint16_t rtdaq_mbuf_room(const struct rte_mbuf *m)
{
	return (uint16_t)(m->data_len + rte_pktmbuf_tailroom(m));
}

int rtdaq_mbuf_set_len(struct rte_mbuf *m, uint16_t len)
{
	if (m->nb_segs != 1 || len > rtdaq_mbuf_room(m))
		return -1;
	m->data_len = len;
	m->pkt_len = len;
	return 0;
}

int rtdaq_errno(void)
{
	return rte_errno;
}

unsigned int rtdaq_lcore_id(void)
{
	return rte_lcore_id();
}

/* --- memory and port features --- */
_Static_assert(RTDAQ_RSS_IPV4 == RTE_ETH_RSS_IPV4, "RTE_ETH_RSS_IPV4");
_Static_assert(RTDAQ_RSS_NONFRAG_IPV4_UDP == RTE_ETH_RSS_NONFRAG_IPV4_UDP, "RSS UDP");
_Static_assert(RTDAQ_RX_OFFLOAD_SCATTER == RTE_ETH_RX_OFFLOAD_SCATTER, "SCATTER");
_Static_assert(RTDAQ_RX_OFFLOAD_BUFFER_SPLIT == RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT, "BUFFER_SPLIT");
_Static_assert(RTDAQ_RETA_GROUP_SIZE == RTE_ETH_RETA_GROUP_SIZE, "RETA group");

int rtdaq_link_get(uint16_t port, uint32_t *speed_mbps, int *full_duplex, int *up, int *autoneg)
{
	struct rte_eth_link link;
	int rc;

	memset(&link, 0, sizeof(link));
	rc = rte_eth_link_get_nowait(port, &link);
	if (rc != 0)
		return rc;
	*speed_mbps = link.link_speed;
	*full_duplex = link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
	*up = link.link_status == RTE_ETH_LINK_UP;
	*autoneg = link.link_autoneg == RTE_ETH_LINK_AUTONEG;
	return 0;
}

struct rte_mbuf *rtdaq_mbuf_next(const struct rte_mbuf *m)
{
	return m->next;
}

struct rte_device *rtdaq_port_device(uint16_t port)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port, &info) != 0)
		return NULL;
	return info.device;
}
