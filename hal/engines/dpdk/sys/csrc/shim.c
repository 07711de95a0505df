/* See shim.h. Each function is a one-line forward to DPDK's static-inline original. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>
#include <rte_mempool.h>

#include "shim.h"

uint16_t rtdaq_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t rtdaq_rx_burst_lens(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
			     uint32_t *pkt_len, uint16_t *nb_segs)
{
	uint16_t got = rte_eth_rx_burst(port, queue, pkts, n);

	for (uint16_t i = 0; i < got; i++) {
		pkt_len[i] = pkts[i]->pkt_len;
		nb_segs[i] = pkts[i]->nb_segs;
	}
	return got;
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
_Static_assert(RTDAQ_TX_OFFLOAD_SEND_ON_TIMESTAMP == RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP,
	"SEND_ON_TIMESTAMP");
_Static_assert(RTDAQ_RX_OFFLOAD_TIMESTAMP == RTE_ETH_RX_OFFLOAD_TIMESTAMP, "RX TIMESTAMP");

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

struct rte_mempool *rtdaq_mbuf_pool(const struct rte_mbuf *m)
{
	return m->pool;
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

/* --- mbuf pools with layout flags, and the AF_XDP UMEM check --- */
_Static_assert(RTDAQ_MEMPOOL_F_NO_SPREAD == RTE_MEMPOOL_F_NO_SPREAD, "NO_SPREAD");

static void rtdaq_memzone_free(struct rte_mempool_memhdr *memhdr, void *opaque)
{
	(void)memhdr;
	rte_memzone_free(opaque);
}

/* Populates mp from one memzone aligned to the pool's page size, objects tiling the pages. */
static int rtdaq_populate_tiled(struct rte_mempool *mp, int socket)
{
	char mz_name[RTE_MEMZONE_NAMESIZE];
	const struct rte_memzone *mz;
	size_t pg_sz = 0, obj_sz, len;
	int ret;

	ret = rte_mempool_get_page_size(mp, &pg_sz);
	if (ret < 0)
		return ret;
	obj_sz = mp->header_size + mp->elt_size + mp->trailer_size;
	if (pg_sz == 0 || obj_sz > pg_sz || pg_sz % obj_sz != 0)
		return -EINVAL;
	len = (size_t)mp->size * obj_sz;
	ret = snprintf(mz_name, sizeof(mz_name), "MP_%s_t", mp->name);
	if (ret < 0 || ret >= (int)sizeof(mz_name))
		return -ENAMETOOLONG;
	mz = rte_memzone_reserve_aligned(mz_name, len, socket, 0, pg_sz);
	if (mz == NULL)
		return -rte_errno;
	ret = rte_mempool_populate_virt(mp, mz->addr, len, pg_sz, rtdaq_memzone_free,
					(void *)(uintptr_t)mz);
	if (ret <= 0) {
		/* a failure after the first chunk was added freed the memzone already (through
		 * rtdaq_memzone_free, rte_mempool_free_memchunks); otherwise it is still ours */
		if (rte_memzone_lookup(mz_name) == mz)
			rte_memzone_free(mz);
		return ret == 0 ? -ENOMEM : ret;
	}
	if (mp->populated_size != mp->size)
		return -ENOMEM; /* the memzone is freed with the pool */
	return ret;
}

struct rte_mempool *rtdaq_pktmbuf_pool_create_flags(const char *name, unsigned int n,
	unsigned int cache_size, uint16_t data_room, int socket, unsigned int flags,
	int tile_pages)
{
	struct rte_pktmbuf_pool_private priv;
	struct rte_mempool *mp;
	int ret;

	memset(&priv, 0, sizeof(priv));
	priv.mbuf_data_room_size = data_room;
	priv.mbuf_priv_size = 0;
	mp = rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + data_room, cache_size,
				      sizeof(struct rte_pktmbuf_pool_private), socket, flags);
	if (mp == NULL)
		return NULL;
	ret = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (ret != 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_pktmbuf_pool_init(mp, &priv);
	ret = tile_pages ? rtdaq_populate_tiled(mp, socket) : rte_mempool_populate_default(mp);
	if (ret < 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

uint32_t rtdaq_pktmbuf_obj_size(uint16_t data_room, unsigned int flags)
{
	return rte_mempool_calc_obj_size(sizeof(struct rte_mbuf) + data_room, flags, NULL);
}

struct umem_walk {
	uintptr_t start;
	struct rtdaq_umem_fit *fit;
};

static void umem_fit_chunk(struct rte_mempool *mp, void *arg, struct rte_mempool_memhdr *hdr,
			   unsigned int idx)
{
	struct umem_walk *w = arg;

	(void)mp;
	(void)hdr;
	(void)idx;
	w->fit->chunks++;
}

static void umem_fit_obj(struct rte_mempool *mp, void *arg, void *obj, unsigned int idx)
{
	struct umem_walk *w = arg;
	struct rtdaq_umem_fit *f = w->fit;
	/* net_af_xdp posts an mbuf as the UMEM address of its object header */
	uintptr_t hdr = (uintptr_t)obj - mp->header_size;
	uint64_t end;

	f->objects++;
	if (hdr < w->start) {
		if (f->outside++ == 0)
			f->first_outside = idx;
		return;
	}
	end = (uint64_t)(hdr - w->start) + f->obj_size;
	if (end > f->span)
		f->span = end;
	if (end > f->umem_len && f->outside++ == 0)
		f->first_outside = idx;
}

int rtdaq_mempool_umem_fit(struct rte_mempool *mp, struct rtdaq_umem_fit *out)
{
	struct rte_mempool_memhdr *first = STAILQ_FIRST(&mp->mem_list);
	uintptr_t page = (uintptr_t)getpagesize();
	struct umem_walk w;
	uintptr_t addr;

	memset(out, 0, sizeof(*out));
	if (first == NULL)
		return -EINVAL;
	/* as net_af_xdp's get_base_addr and xdp_umem_configure (DPDK 22.11) compute it */
	addr = (uintptr_t)first->addr;
	w.start = addr & ~(page - 1);
	w.fit = out;
	out->obj_size = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL);
	out->umem_len = (uint64_t)mp->populated_size * out->obj_size + (addr - w.start);
	rte_mempool_mem_iter(mp, umem_fit_chunk, &w);
	rte_mempool_obj_iter(mp, umem_fit_obj, &w);
	if (out->outside == 0)
		out->first_outside = out->objects;
	return 0;
}

unsigned int rtdaq_page_size(void)
{
	return (unsigned int)getpagesize();
}

void rtdaq_mbuf_set_txtime(struct rte_mbuf *m, int offset, uint64_t flag, uint64_t t)
{
	*RTE_MBUF_DYNFIELD(m, offset, uint64_t *) = t;
	m->ol_flags |= flag;
}

int rtdaq_mbuf_txtime(const struct rte_mbuf *m, int offset, uint64_t flag, uint64_t *t)
{
	if ((m->ol_flags & flag) == 0)
		return 0;
	*t = *RTE_MBUF_DYNFIELD(m, offset, const uint64_t *);
	return 1;
}
