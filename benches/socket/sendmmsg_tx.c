/* sendmmsg_tx: the UDP blaster for the socket benchmarks.
 *
 * One thread pinned to --cpu sends --size-byte UDP payloads to --dst:--port with
 * sendmmsg in batches of --batch (default 64) from one unconnected socket (so ICMP
 * "port unreachable" while no receiver is bound yet is not reported back; those datagrams
 * are simply not delivered). Unpaced by default; --rate-gbps X paces payload bits to X Gb/s
 * (spinning on CLOCK_MONOTONIC between batches). Runs for --seconds or until SIGINT/SIGTERM,
 * then prints one JSON object. --sources N (default 1) sends from N sockets (N source ports)
 * in turn, one sendmmsg call each; source k writes stream id --stream + k with its own
 * sequence numbers, so SO_REUSEPORT receivers each get whole streams. --sport B binds source k
 * to port B + k (default 0: ephemeral ports, so SO_REUSEPORT's hash, and with it how the
 * sources spread over the receivers, differs from run to run; with --sport two runs of the same
 * sources spread the same way over the same number of receiving sockets).
 *
 * Every datagram starts with rtdaq's 32-byte sequence header (docs/wire-format.md §1,
 * big-endian): magic "RTDQ", version 1, flags 0, stream id (--stream), a 64-bit sequence
 * number counting every datagram the kernel accepted from 0, tx timestamp 0 (unknown),
 * payload length = size - 32. So both recvmmsg_rx and rtdaq's validator can check loss by
 * sequence number. The rest of the payload is zeros. --size must be >= 32.
 *
 * Build: cc -O2 -o sendmmsg_tx sendmmsg_tx.c
 * Usage: sendmmsg_tx --port 5000 [--dst 127.0.0.1] [--cpu 0] [--size 1472] [--seconds 10]
 *                    [--batch 64] [--rate-gbps X] [--stream 7] [--sndbuf 4194304] [--fifo 0]
 *                    [--sources 1] [--sport 0]
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 1024
#define MAX_SOURCES 64

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put_be(unsigned char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) { p[i] = (unsigned char)v; v >>= 8; }
}

int main(int argc, char **argv) {
    const char *dst = "127.0.0.1";
    int port = 5000, cpu = 0, batch = 64, fifo = 0, stream = 7, sources = 1, sport = 0;
    long size = 1472, sndbuf = 4 * 1024 * 1024;
    double seconds = 10.0, rate_gbps = 0.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dst")) dst = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cpu")) cpu = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate-gbps")) rate_gbps = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--stream")) stream = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sndbuf")) sndbuf = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--fifo")) fifo = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sources")) sources = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sport")) sport = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (batch < 1 || batch > MAX_BATCH || size < 32 || size > 65507 || sources < 1 ||
        sources > MAX_SOURCES || sport < 0 || sport + sources > 65536) {
        fprintf(stderr, "--batch 1..%d, --size 32..65507, --sources 1..%d, --sport 0 or 1..65536-sources\n",
                MAX_BATCH, MAX_SOURCES);
        return 2;
    }

    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) { perror("sched_setaffinity"); return 2; }
    if (fifo > 0) {
        struct sched_param sp = { .sched_priority = fifo };
        if (sched_setscheduler(0, SCHED_FIFO, &sp)) perror("SCHED_FIFO (continuing without)");
    }

    int fds[MAX_SOURCES];
    uint64_t seqs[MAX_SOURCES] = {0};
    for (int k = 0; k < sources; k++) {
        fds[k] = socket(AF_INET, SOCK_DGRAM, 0);
        if (fds[k] < 0) { perror("socket"); return 2; }
        int v = (int)sndbuf;
        if (setsockopt(fds[k], SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof v))
            setsockopt(fds[k], SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1) { fprintf(stderr, "bad --dst\n"); return 2; }
    for (int k = 0; sport > 0 && k < sources; k++) {
        struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(sport + k)) };
        if (bind(fds[k], (struct sockaddr *)&src, sizeof src)) {
            fprintf(stderr, "bind source port %d: %s\n", sport + k, strerror(errno));
            return 2;
        }
    }

    unsigned char *bufs = calloc((size_t)batch, (size_t)size);
    if (!bufs) { perror("alloc"); return 2; }
    static struct mmsghdr msgs[MAX_BATCH];
    static struct iovec iov[MAX_BATCH];
    for (int i = 0; i < batch; i++) {
        unsigned char *p = bufs + (size_t)i * size;
        put_be(p, 0x52544451, 4); /* "RTDQ" */
        p[4] = 1;                 /* version */
        p[5] = 0;                 /* flags */
        put_be(p + 6, (uint64_t)stream, 2);
        put_be(p + 24, (uint64_t)(size - 32), 4);
        iov[i].iov_base = p;
        iov[i].iov_len = size;
        msgs[i].msg_hdr.msg_name = &sa;
        msgs[i].msg_hdr.msg_namelen = sizeof sa;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    double pps = rate_gbps > 0 ? rate_gbps * 1e9 / 8.0 / (double)size : 0.0;
    uint64_t seq = 0, calls = 0, errors = 0, bytes = 0;
    double t0 = now_s(), t_end = t0 + seconds, t = t0;
    while (!stop && t < t_end) {
        int n = batch;
        if (pps > 0) {
            double due = pps * (t - t0) - (double)seq;
            if (due < 1.0) { t = now_s(); continue; }
            if (due < n) n = (int)due;
        }
        int k = (int)(calls % (uint64_t)sources);
        for (int i = 0; i < n; i++) {
            if (sources > 1) put_be((unsigned char *)iov[i].iov_base + 6, (uint64_t)(stream + k), 2);
            put_be((unsigned char *)iov[i].iov_base + 8, seqs[k] + i, 8);
        }
        int r = sendmmsg(fds[k], msgs, n, 0);
        if (r > 0) { seq += r; seqs[k] += r; bytes += (uint64_t)r * size; }
        else if (r < 0 && errno != EINTR) errors++;
        calls++; /* sendmmsg calls made (the source rotates per call) */
        t = now_s();
    }
    double el = t - t0;
    printf("{\"tool\":\"sendmmsg_tx\",\"cpu\":%d,\"size\":%ld,\"batch\":%d,\"rate_gbps\":%.3f,"
           "\"seconds\":%.6f,\"packets\":%llu,\"bytes\":%llu,\"pps\":%.1f,\"gbps\":%.4f,"
           "\"calls\":%llu,\"errors\":%llu,\"sources\":%d,\"last_seq\":%llu}\n",
           cpu, size, batch, rate_gbps, el, (unsigned long long)seq, (unsigned long long)bytes,
           seq / el, bytes * 8.0 / el / 1e9, (unsigned long long)calls,
           (unsigned long long)errors, sources, seq ? (unsigned long long)(seq - 1) : 0ULL);
    return 0;
}
