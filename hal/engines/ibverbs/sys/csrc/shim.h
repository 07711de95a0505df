/* rtdaq-ibverbs-sys: non-inline wrappers of libibverbs' static-inline functions.
 *
 * verbs.h declares the fast path (post, poll, notify) and the flow calls `static inline`:
 * they dispatch through the provider's ops table, so libibverbs.so has no symbol for them.
 * shim.c (compiled by build.rs with the cc crate) re-exports each as a real function;
 * bindgen reads this header too, so the Rust declarations always match. */
#ifndef RTDAQ_IBV_SHIM_H
#define RTDAQ_IBV_SHIM_H

#include <stdint.h>

struct ibv_qp;
struct ibv_cq;
struct ibv_send_wr;
struct ibv_recv_wr;
struct ibv_wc;
struct ibv_flow;
struct ibv_flow_attr;
struct ibv_context;
struct ibv_port_attr;

/* ibv_post_send: 0 or a positive errno; *bad is the first WR not posted. */
int rtdaq_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
/* ibv_post_recv: 0 or a positive errno; *bad is the first WR not posted. */
int rtdaq_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* ibv_poll_cq: completions written to wc (>= 0) or a negative value on error. */
int rtdaq_ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* ibv_req_notify_cq: 0 or an errno. */
int rtdaq_ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
/* ibv_create_flow: the flow, or NULL with errno set. */
struct ibv_flow *rtdaq_ibv_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *attr);
/* ibv_destroy_flow: 0 or an errno. */
int rtdaq_ibv_destroy_flow(struct ibv_flow *flow);
/* ibv_query_port (a macro over an inline in verbs.h): 0 or an errno. */
int rtdaq_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
/* errno of this thread. */
int rtdaq_ibv_errno(void);
/* qp->qp_num. */
uint32_t rtdaq_ibv_qp_num(const struct ibv_qp *qp);

#endif
