/* See shim.h. Each function is a one-line forward to DPDK's static-inline original. */
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
