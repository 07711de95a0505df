/* rtdaq-ibverbs-sys: what bindgen reads (Debian rdma-core 44 headers + the shim). */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "shim.h"
