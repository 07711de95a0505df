/* rtdaq-ucx-sys: what bindgen reads (Debian UCX 1.13 headers, libucx-dev). */
#include <ucp/api/ucp.h>
#include <ucs/type/status.h>
