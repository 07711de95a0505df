/* recvmmsg_rx: the plain C UDP receiver rtdaq's socket engine is measured against.
 *
 * One thread, pinned to --cpu, optionally SCHED_FIFO (--fifo PRIO, as rtdaq's queue threads
 * run when privileged). It binds --addr:--port, receives with blocking
 * recvmmsg(MSG_WAITFORONE) in batches of --batch (default 64) into --batch fixed buffers of
 * --bufsize bytes (reused every call), counts datagrams and payload bytes for --seconds, and
 * prints one JSON object.
 *
 * Loss: every datagram is expected to start with rtdaq's 32-byte sequence header
 * (docs/wire-format.md §1: magic "RTDQ" at 0, 64-bit big-endian sequence at offset 8), as
 * sendmmsg_tx.c writes it. Loss inside the window = (last seq - first seq + 1) - received
 * for in-order delivery (loopback delivers in order; out-of-order arrivals are counted).
 * Datagrams without the magic are counted as "foreign" and not sequence-checked. Sequences are
 * tracked per stream id (bytes 6-7; up to 64 streams, by id % 64), as sendmmsg_tx --sources
 * writes them. --reuseport 1 sets SO_REUSEPORT, so several receivers share one port.
 * "kernel_drops" is what the kernel dropped for this socket (its receive buffer full, read once
 * at the end with SO_MEMINFO's SK_MEMINFO_DROPS; -1 where the kernel lacks it), so several
 * receivers on one port each say which of them fell behind.
 *
 * Build: cc -O2 -o recvmmsg_rx recvmmsg_rx.c
 * Usage: recvmmsg_rx --port 5000 [--addr 127.0.0.1] [--cpu 1] [--seconds 3] [--batch 64]
 *                    [--bufsize 65536] [--rcvbuf 16777216] [--fifo 50] [--reuseport 0]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <linux/sock_diag.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

#define MAX_BATCH 1024

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

int main(int argc, char **argv) {
    int reuseport = 0;
    const char *addr = "127.0.0.1";
    int port = 5000, cpu = 1, batch = 64, fifo = 0;
    long bufsize = 65536, rcvbuf = 16 * 1024 * 1024;
    double seconds = 3.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--addr")) addr = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cpu")) cpu = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bufsize")) bufsize = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rcvbuf")) rcvbuf = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--fifo")) fifo = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reuseport")) reuseport = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (batch < 1 || batch > MAX_BATCH) { fprintf(stderr, "--batch 1..%d\n", MAX_BATCH); return 2; }

    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) { perror("sched_setaffinity"); return 2; }
    if (fifo > 0) {
        struct sched_param sp = { .sched_priority = fifo };
        if (sched_setscheduler(0, SCHED_FIFO, &sp)) perror("SCHED_FIFO (continuing without)");
    }

    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) { perror("socket"); return 2; }
    int v = (int)rcvbuf;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof v))
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    if (reuseport) {
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one)) { perror("SO_REUSEPORT"); return 2; }
    }
    int eff = 0; socklen_t el = sizeof eff;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &eff, &el);
    struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 }; /* wake to check the clock when idle */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) { fprintf(stderr, "bad --addr\n"); return 2; }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) { perror("bind"); return 2; }

    unsigned char *bufs = aligned_alloc(4096, (size_t)bufsize * batch);
    if (!bufs) { perror("alloc"); return 2; }
    memset(bufs, 0, (size_t)bufsize * batch);
    static struct mmsghdr msgs[MAX_BATCH];
    static struct iovec iov[MAX_BATCH];
    for (int i = 0; i < batch; i++) {
        iov[i].iov_base = bufs + (size_t)i * bufsize;
        iov[i].iov_len = bufsize;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    mlockall(MCL_CURRENT | MCL_FUTURE);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    uint64_t packets = 0, bytes = 0, calls = 0, foreign = 0, truncated = 0, reordered = 0;
    /* per stream (id % 64): first and highest sequence number seen, datagrams counted */
    static uint64_t first_seq[64], last_seq[64], seq_packets[64];
    static int have_seq[64];
    double t0 = now_s(), t_end = t0 + seconds, t = t0;
    while (!stop) {
        int n = recvmmsg(fd, msgs, batch, MSG_WAITFORONE, NULL);
        t = now_s();
        if (n > 0) {
            calls++;
            for (int i = 0; i < n; i++) {
                unsigned len = msgs[i].msg_len;
                const unsigned char *p = iov[i].iov_base;
                packets++;
                bytes += len;
                if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) truncated++;
                if (len >= 16 && p[0] == 0x52 && p[1] == 0x54 && p[2] == 0x44 && p[3] == 0x51) {
                    uint64_t s = be64(p + 8);
                    int k = ((p[6] << 8) | p[7]) % 64;
                    if (!have_seq[k]) { first_seq[k] = last_seq[k] = s; have_seq[k] = 1; }
                    else if (s > last_seq[k]) last_seq[k] = s;
                    else reordered++;
                    seq_packets[k]++;
                } else {
                    foreign++;
                }
            }
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            perror("recvmmsg");
            break;
        }
        if (t >= t_end) break;
    }
    double el_s = t - t0;
    long long kernel_drops = -1;
    uint32_t mem[SK_MEMINFO_VARS] = {0};
    socklen_t ml = sizeof mem;
    if (!getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &ml) && ml > SK_MEMINFO_DROPS * sizeof mem[0])
        kernel_drops = mem[SK_MEMINFO_DROPS];
    struct timespec cpu_ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_ts); /* this thread's CPU time, set-up included */
    uint64_t expected = 0, seq_total = 0, streams = 0;
    for (int k = 0; k < 64; k++) {
        if (!have_seq[k]) continue;
        streams++;
        expected += last_seq[k] - first_seq[k] + 1;
        seq_total += seq_packets[k];
    }
    int64_t lost = (int64_t)(expected - seq_total);
    printf("{\"tool\":\"recvmmsg_rx\",\"cpu\":%d,\"batch\":%d,\"bufsize\":%ld,\"rcvbuf_effective\":%d,"
           "\"seconds\":%.6f,\"packets\":%llu,\"bytes\":%llu,\"pps\":%.1f,\"gbps\":%.4f,"
           "\"calls\":%llu,\"avg_batch\":%.2f,\"streams\":%llu,\"expected\":%llu,"
           "\"seq_packets\":%llu,\"lost\":%lld,\"reordered\":%llu,\"foreign\":%llu,\"truncated\":%llu,"
           "\"cpu_s\":%.6f,\"kernel_drops\":%lld}\n",
           cpu, batch, bufsize, eff, el_s, (unsigned long long)packets, (unsigned long long)bytes,
           packets / el_s, bytes * 8.0 / el_s / 1e9, (unsigned long long)calls,
           calls ? (double)packets / calls : 0.0, (unsigned long long)streams,
           (unsigned long long)expected, (unsigned long long)seq_total, (long long)lost, (unsigned long long)reordered,
           (unsigned long long)foreign, (unsigned long long)truncated,
           cpu_ts.tv_sec + cpu_ts.tv_nsec * 1e-9, kernel_drops);
    return 0;
}
