/*
 * ucx_recv: an independent receiver of rtdaq's UCX egress, written in C against the
 * system's UCX (Debian libucx-dev 1.13) with nothing of rtdaq's code: a UCP listener
 * accepts any number of connections, keeps tagged receives posted with the sink's tag
 * (full mask, any endpoint), and checks each message's 40-byte header (docs/egress.md,
 * hal/core/src/format/egress_msg.rs): magic "RTDQ", version 1, data length equal to what
 * arrived; per stream, sequence numbers 0, 1, 2, ... (a jump is counted as missing
 * messages) until the end-of-stream message.
 *
 *   cc -O2 -o ucx_recv scripts/peers/ucx_recv.c $(pkg-config --cflags --libs ucx)
 *   UCX_TLS=tcp ./ucx_recv --port 13337 --streams 1 --seconds 30 --json out.json \
 *       [--addr 127.0.0.1] [--data payloads.bin] [--tag 0x5254445100000000] [--max-bytes 1048576] \
 *       [--buffers 16] [--slow-us 0] [--snapshot-ms 100]
 *
 * It prints "listening PORT" on stdout once the listener is up, and exits when --streams
 * streams ended (or after --seconds, or on SIGTERM/SIGINT), writing the JSON summary.
 * With --snapshot-ms it also rewrites the summary every N ms (so a receiver killed with
 * SIGKILL leaves what it had got). --data appends each message's payload data, in arrival
 * order. --slow-us sleeps after each message: a receiver that falls behind.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define MAX_STREAMS 256
#define MAX_EPS 64
#define HDR 40

struct stream {
    int seen, ended;
    uint64_t next_seq, messages, payloads, bytes, missing, first_seq, last_seq;
};

static struct {
    uint64_t messages, payloads, bytes, missing, bad, connections, ep_errors;
    struct stream s[MAX_STREAMS];
    int ended;
} st;

static volatile sig_atomic_t stop;
static ucp_worker_h worker;
static ucp_ep_h eps[MAX_EPS];
static int neps;

static void on_signal(int sig) { (void)sig; stop = 1; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
    (void)arg; (void)ep; (void)status;
    st.ep_errors++;
}

static void on_conn(ucp_conn_request_h req, void *arg) {
    (void)arg;
    if (neps == MAX_EPS) { ucp_listener_reject(NULL, req); return; }
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error, .arg = NULL},
    };
    if (ucp_ep_create(worker, &p, &eps[neps]) == UCS_OK) {
        neps++;
        st.connections++;
    }
}

static uint64_t le64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t le32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void write_json(const char *path) {
    if (!path) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { perror(tmp); return; }
    fprintf(f, "{\"messages\":%llu,\"payloads\":%llu,\"bytes\":%llu,\"missing\":%llu,\"bad\":%llu,"
               "\"connections\":%llu,\"ep_errors\":%llu,\"streams_ended\":%d,\"streams\":{",
            (unsigned long long)st.messages, (unsigned long long)st.payloads,
            (unsigned long long)st.bytes, (unsigned long long)st.missing,
            (unsigned long long)st.bad, (unsigned long long)st.connections,
            (unsigned long long)st.ep_errors, st.ended);
    int first = 1;
    for (int k = 0; k < MAX_STREAMS; k++) {
        struct stream *s = &st.s[k];
        if (!s->seen) continue;
        fprintf(f, "%s\"%d\":{\"messages\":%llu,\"payloads\":%llu,\"bytes\":%llu,\"missing\":%llu,"
                   "\"first_seq\":%llu,\"last_seq\":%llu,\"ended\":%s}",
                first ? "" : ",", k, (unsigned long long)s->messages,
                (unsigned long long)s->payloads, (unsigned long long)s->bytes,
                (unsigned long long)s->missing, (unsigned long long)s->first_seq,
                (unsigned long long)s->last_seq, s->ended ? "true" : "false");
        first = 0;
    }
    fprintf(f, "}}\n");
    fclose(f);
    rename(tmp, path);
}

/* One message of `len` bytes in `m`. */
static void take(const uint8_t *m, size_t len, FILE *data) {
    if (len < HDR || memcmp(m, "RTDQ", 4) != 0 || m[4] != 1) { st.bad++; return; }
    size_t hlen = (size_t)m[6] | ((size_t)m[7] << 8);
    uint32_t stream = le32(m + 8), payloads = le32(m + 12);
    uint64_t seq = le64(m + 16), dlen = le64(m + 32);
    if (hlen < HDR || hlen + dlen != len || stream >= MAX_STREAMS) { st.bad++; return; }
    struct stream *s = &st.s[stream];
    if (!s->seen) { s->seen = 1; s->first_seq = seq; s->next_seq = seq; }
    if (seq > s->next_seq) { s->missing += seq - s->next_seq; st.missing += seq - s->next_seq; }
    if (seq >= s->next_seq) s->next_seq = seq + 1;
    s->last_seq = seq;
    if (m[5] & 1) {
        if (!s->ended) { s->ended = 1; st.ended++; }
        return;
    }
    s->messages++; s->payloads += payloads; s->bytes += dlen;
    st.messages++; st.payloads += payloads; st.bytes += dlen;
    if (data && dlen) fwrite(m + hlen, 1, dlen, data);
}

int main(int argc, char **argv) {
    int port = 0, streams = 1, nbuf = 16, slow_us = 0, snap_ms = 0;
    double seconds = 30;
    uint64_t tag = 0x5254445100000000ull;
    size_t max_bytes = 1 << 20;
    const char *json = NULL, *data_path = NULL, *addr = "127.0.0.1";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--port")) port = atoi(v);
        else if (!strcmp(k, "--streams")) streams = atoi(v);
        else if (!strcmp(k, "--seconds")) seconds = atof(v);
        else if (!strcmp(k, "--json")) json = v;
        else if (!strcmp(k, "--addr")) addr = v;
        else if (!strcmp(k, "--data")) data_path = v;
        else if (!strcmp(k, "--tag")) tag = strtoull(v, NULL, 0);
        else if (!strcmp(k, "--max-bytes")) max_bytes = strtoull(v, NULL, 0);
        else if (!strcmp(k, "--buffers")) nbuf = atoi(v);
        else if (!strcmp(k, "--slow-us")) slow_us = atoi(v);
        else if (!strcmp(k, "--snapshot-ms")) snap_ms = atoi(v);
        else { fprintf(stderr, "ucx_recv: unknown option %s\n", k); return 2; }
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    FILE *data = data_path ? fopen(data_path, "wb") : NULL;
    if (data_path && !data) { perror(data_path); return 2; }

    ucp_config_t *cfg;
    ucp_context_h ctx;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) return 2;
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucs_status_t s = ucp_init(&pp, cfg, &ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK) { fprintf(stderr, "ucp_init: %s\n", ucs_status_string(s)); return 2; }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) return 2;

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) { fprintf(stderr, "ucx_recv: bad --addr %s\n", addr); return 2; }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof sa},
        .conn_handler = {.cb = on_conn, .arg = NULL},
    };
    ucp_listener_h listener;
    /* A receiver restarted on the port of one just killed may find it still held for a
     * moment: try for up to 10 s. */
    double bind_until = now_s() + 10;
    while ((s = ucp_listener_create(worker, &lp, &listener)) != UCS_OK && now_s() < bind_until)
        usleep(100000);
    if (s != UCS_OK) { fprintf(stderr, "ucp_listener_create: %s\n", ucs_status_string(s)); return 2; }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    ucp_listener_query(listener, &la);
    printf("listening %d\n", ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port));
    fflush(stdout);

    uint8_t **bufs = calloc(nbuf, sizeof *bufs);
    void **reqs = calloc(nbuf, sizeof *reqs);
    /* Always a request (never completed in the call), so the length is read from it. */
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
    for (int k = 0; k < nbuf; k++) {
        bufs[k] = malloc(max_bytes);
        reqs[k] = ucp_tag_recv_nbx(worker, bufs[k], max_bytes, tag, ~0ull, &rp);
    }
    double end = now_s() + seconds, snap = now_s();
    int k = 0;
    while (!stop && now_s() < end && st.ended < streams) {
        ucp_worker_progress(worker);
        ucp_tag_recv_info_t info;
        void *r = reqs[k];
        if (r == NULL || UCS_PTR_IS_ERR(r)) {
            st.bad++;
            reqs[k] = ucp_tag_recv_nbx(worker, bufs[k], max_bytes, tag, ~0ull, &rp);
            continue;
        }
        ucs_status_t rs = ucp_tag_recv_request_test(r, &info);
        if (rs == UCS_INPROGRESS) {
            if (snap_ms && now_s() - snap > snap_ms / 1e3) { write_json(json); snap = now_s(); }
            continue;
        }
        ucp_request_free(r);
        if (rs == UCS_OK) take(bufs[k], info.length, data);
        else st.bad++;
        if (slow_us) usleep(slow_us);
        reqs[k] = ucp_tag_recv_nbx(worker, bufs[k], max_bytes, tag, ~0ull, &rp);
        k = (k + 1) % nbuf;
    }
    if (data) fclose(data);
    write_json(json);
    printf("messages %llu payloads %llu bytes %llu missing %llu bad %llu connections %llu streams_ended %d\n",
           (unsigned long long)st.messages, (unsigned long long)st.payloads,
           (unsigned long long)st.bytes, (unsigned long long)st.missing,
           (unsigned long long)st.bad, (unsigned long long)st.connections, st.ended);
    fflush(stdout);
    /* Leave without tearing down UCX: the process exits, the kernel closes the sockets. */
    _exit(0);
}
