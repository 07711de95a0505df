/* rtdaq-ibverbs-sys: see mlx5dv_shim.h. */
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include "mlx5dv_shim.h"

/* The store barrier rdma-core uses before telling the device about new descriptors
 * (udma_to_device_barrier): x86 orders stores to write-back memory already; aarch64 needs
 * the outer-shareable store barrier; anything else gets a full fence. */
#if defined(__x86_64__) || defined(__i386__)
#define RTDAQ_DMA_WMB() __asm__ volatile("" ::: "memory")
#elif defined(__aarch64__)
#define RTDAQ_DMA_WMB() __asm__ volatile("dmb oshst" ::: "memory")
#elif defined(__powerpc64__)
#define RTDAQ_DMA_WMB() __asm__ volatile("sync" ::: "memory")
#else
#define RTDAQ_DMA_WMB() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

_Static_assert(sizeof(struct mlx5_mprq_wqe) == RTDAQ_MLX5_MPRQ_WQE_BYTES,
	       "struct mlx5_mprq_wqe is one next segment and one data segment");

typedef int (*query_device_fn)(struct ibv_context *, struct mlx5dv_context *);
typedef struct ibv_wq *(*create_wq_fn)(struct ibv_context *, struct ibv_wq_init_attr *,
				       struct mlx5dv_wq_init_attr *);
typedef int (*init_obj_fn)(struct mlx5dv_obj *, uint64_t);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static query_device_fn p_query_device;
static create_wq_fn p_create_wq;
static init_obj_fn p_init_obj;
static char load_error[256];

static void keep_error(const char *what)
{
	const char *e = dlerror();

	strncpy(load_error, e ? e : what, sizeof(load_error) - 1);
	load_error[sizeof(load_error) - 1] = '\0';
}

static void load(void)
{
	void *lib = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		keep_error("dlopen(libmlx5.so.1) failed");
		return;
	}
	/* Never dlclose'd: the provider instance lives as long as the process. */
	p_query_device = (query_device_fn)dlsym(lib, "mlx5dv_query_device");
	if (!p_query_device) {
		keep_error("mlx5dv_query_device missing");
		return;
	}
	p_create_wq = (create_wq_fn)dlsym(lib, "mlx5dv_create_wq");
	if (!p_create_wq) {
		keep_error("mlx5dv_create_wq missing");
		return;
	}
	p_init_obj = (init_obj_fn)dlsym(lib, "mlx5dv_init_obj");
	if (!p_init_obj)
		keep_error("mlx5dv_init_obj missing");
}

int rtdaq_mlx5_load(void)
{
	pthread_once(&load_once, load);
	return (p_query_device && p_create_wq && p_init_obj) ? 0 : ENOENT;
}

const char *rtdaq_mlx5_load_error(void)
{
	return load_error;
}

int rtdaq_mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attrs)
{
	if (rtdaq_mlx5_load())
		return ENOSYS;
	return p_query_device(ctx, attrs);
}

struct ibv_wq *rtdaq_mlx5dv_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *wq_attr,
				      struct mlx5dv_wq_init_attr *mlx5_attr)
{
	if (rtdaq_mlx5_load()) {
		errno = ENOSYS;
		return NULL;
	}
	return p_create_wq(ctx, wq_attr, mlx5_attr);
}

int rtdaq_mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	if (rtdaq_mlx5_load())
		return ENOSYS;
	return p_init_obj(obj, obj_type);
}

int rtdaq_ibv_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr)
{
	return ibv_modify_wq(wq, attr);
}

int rtdaq_ibv_destroy_wq(struct ibv_wq *wq)
{
	return ibv_destroy_wq(wq);
}

struct ibv_rwq_ind_table *rtdaq_ibv_create_rwq_ind_table(struct ibv_context *ctx,
							 struct ibv_rwq_ind_table_init_attr *attr)
{
	return ibv_create_rwq_ind_table(ctx, attr);
}

int rtdaq_ibv_destroy_rwq_ind_table(struct ibv_rwq_ind_table *table)
{
	return ibv_destroy_rwq_ind_table(table);
}

struct ibv_qp *rtdaq_ibv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	return ibv_create_qp_ex(ctx, attr);
}

void rtdaq_mlx5_mprq_wqe_write(void *wq_buf, uint32_t index, uint64_t addr, uint32_t length,
			       uint32_t lkey)
{
	struct mlx5_mprq_wqe *wqe = (struct mlx5_mprq_wqe *)wq_buf + index;

	memset(&wqe->nseg, 0, sizeof(wqe->nseg));
	wqe->dseg.byte_count = htobe32(length);
	wqe->dseg.lkey = htobe32(lkey);
	wqe->dseg.addr = htobe64(addr);
}

void rtdaq_mlx5_rq_doorbell(uint32_t *dbrec, uint32_t wqe_counter)
{
	RTDAQ_DMA_WMB();
	*(volatile uint32_t *)dbrec = htobe32(wqe_counter & 0xffff);
}
