/* rtdaq-ibverbs-sys: see shim.h. */
#include <errno.h>
#include <infiniband/verbs.h>
#include "shim.h"

int rtdaq_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

int rtdaq_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_recv(qp, wr, bad);
}

int rtdaq_ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

int rtdaq_ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

struct ibv_flow *rtdaq_ibv_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr)
{
	return ibv_create_flow(qp, attr);
}

int rtdaq_ibv_destroy_flow(struct ibv_flow *flow)
{
	return ibv_destroy_flow(flow);
}

int rtdaq_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

int rtdaq_ibv_errno(void)
{
	return errno;
}

uint32_t rtdaq_ibv_qp_num(const struct ibv_qp *qp)
{
	return qp->qp_num;
}
