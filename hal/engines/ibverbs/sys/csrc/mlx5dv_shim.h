/* rtdaq-ibverbs-sys: mlx5 direct verbs for the striding (multi-packet) receive queue.
 *
 * Three kinds of 1:1 wrappers, all used on the cold path except the last two:
 *
 * - libmlx5's own functions (mlx5dv_query_device, mlx5dv_create_wq, mlx5dv_init_obj),
 *   reached through dlopen("libmlx5.so.1") at first use. The binary therefore does not
 *   need libmlx5 to start: a host without ibverbs-providers still gets the "no RDMA
 *   device" error, and a host with a non-mlx5 device (Soft-RoCE) learns "libmlx5 not
 *   loaded" or EOPNOTSUPP and falls back. The provider libibverbs already loaded for an
 *   mlx5 device is the same file, so dlopen returns that instance.
 * - the static-inline verbs of the striding path (ibv_modify_wq, ibv_destroy_wq,
 *   ibv_create_rwq_ind_table, ibv_destroy_rwq_ind_table, ibv_create_qp_ex): verbs.h
 *   dispatches them through the provider's ops table, so libibverbs has no symbol.
 * - the fast path of a multi-packet receive WQE: write one WQE (next segment zeroed, one
 *   data segment) and ring the receive doorbell record after the store barrier rdma-core
 *   uses for device memory (ibv_post_wq_recv does not know the striding WQE layout).
 *
 * Kept apart from shim.c/shim.h (the RoCE side's shim); bindgen reads this header too. */
#ifndef RTDAQ_MLX5DV_SHIM_H
#define RTDAQ_MLX5DV_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* Size of one striding-RQ WQE (struct mlx5_mprq_wqe): what mlx5dv_init_obj must report as
 * the RWQ stride. */
#define RTDAQ_MLX5_MPRQ_WQE_BYTES 32

/* Loads libmlx5 and its three functions once (thread-safe). 0, or ENOENT when the library
 * or a symbol is missing (rtdaq_mlx5_load_error says which). */
int rtdaq_mlx5_load(void);
/* dlerror() text of a failed load, or "" (static storage). */
const char *rtdaq_mlx5_load_error(void);
/* mlx5dv_query_device: 0 or an errno (ENOSYS when libmlx5 is not loaded). */
int rtdaq_mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attrs);
/* mlx5dv_create_wq: the WQ, or NULL with errno set (ENOSYS when libmlx5 is not loaded). */
struct ibv_wq *rtdaq_mlx5dv_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *wq_attr,
				      struct mlx5dv_wq_init_attr *mlx5_attr);
/* mlx5dv_init_obj: 0 or an errno (ENOSYS when libmlx5 is not loaded). */
int rtdaq_mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type);

/* ibv_modify_wq: 0 or an errno. */
int rtdaq_ibv_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr);
/* ibv_destroy_wq: 0 or an errno. */
int rtdaq_ibv_destroy_wq(struct ibv_wq *wq);
/* ibv_create_rwq_ind_table: the table, or NULL with errno set. */
struct ibv_rwq_ind_table *rtdaq_ibv_create_rwq_ind_table(struct ibv_context *ctx,
							 struct ibv_rwq_ind_table_init_attr *attr);
/* ibv_destroy_rwq_ind_table: 0 or an errno. */
int rtdaq_ibv_destroy_rwq_ind_table(struct ibv_rwq_ind_table *table);
/* ibv_create_qp_ex: the QP, or NULL with errno set. */
struct ibv_qp *rtdaq_ibv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);

/* Writes WQE `index` (already masked to the ring) of a striding RQ ring at `wq_buf`: the
 * next segment zeroed, one data segment {length, lkey, addr}. No barrier, no doorbell. */
void rtdaq_mlx5_mprq_wqe_write(void *wq_buf, uint32_t index, uint64_t addr, uint32_t length,
			       uint32_t lkey);
/* Store barrier for device memory, then the receive doorbell record = the WQE counter
 * (low 16 bits, big endian): hands every WQE written before it to the HCA. */
void rtdaq_mlx5_rq_doorbell(uint32_t *dbrec, uint32_t wqe_counter);

#endif
