// SPDX-License-Identifier: Apache-2.0 OR GPL-2.0
//
// rtdaq AF_XDP steering program (hal/engines/afxdp/bpf/steer.c).
//
// Built by the crate's build.rs with `clang -O2 -g -target bpf -c` and embedded into the
// engine; loaded with libbpf, one instance per interface with RX queues.
//
// What it does, per frame (mirrors rtdaq_core::flow::FlowTable::classify exactly):
//
//   1. mode PER_QUEUE (no flow rules, default action = a queue): redirect to the XSK of the
//      NIC queue the frame arrived on (xsks[rx_queue_index]); no XSK there: XDP_PASS and
//      count OTHER_QUEUE.
//   2. mode STEER (flow rules, or default action = drop): every XSK of the interface is
//      bound to NIC queue cfg.steer_qid (they share one UMEM). A frame on another NIC queue
//      cannot reach them (the kernel checks the XSK's queue id): XDP_PASS, count
//      OTHER_QUEUE. Otherwise parse Ethernet / up to 2 VLAN tags / IPv4 / UDP / eCPRI with
//      the same rules as rtdaq_core::wire::parse_frame, then try the rules in order:
//        - a malformed frame goes to the fallback queue's XSK, where userspace's
//          parse_frame counts it as `malformed` (never delivered);
//        - first matching rule: queue -> that XSK; rss -> Toeplitz table lookup, XSK of
//          queues[h % n]; drop -> XDP_DROP, count FLOW_DROP;
//        - no match: default queue -> that XSK; default drop -> XDP_PASS (the kernel still
//          sees ARP etc.), count NO_FLOW.
//      A redirect to a queue without XSK falls back to XDP_PASS (bpf_redirect_map flag),
//      counted NO_XSK.
//
// The rule language is the whole of rtdaq's FlowMatch except eCPRI over UDP (which the
// config cannot express): ethertype, outer VLAN id, IPv4 src/dst prefix, IPv4 total
// length, UDP src/dst port ranges, eCPRI message type (over Ethernet), a masked 32-bit
// word at an offset from the frame or the UDP payload; actions queue, rss, drop.
//
// Self-contained: no kernel or libbpf headers (UAPI layouts and helper ids are stable).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

enum xdp_action { XDP_ABORTED = 0, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT };

#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_XSKMAP 17

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define __always_inline inline __attribute__((always_inline))

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)51;
static long (*bpf_xdp_load_bytes)(struct xdp_md *xdp, __u32 offset, void *buf, __u32 len) = (void *)189;
static __u64 (*bpf_xdp_get_buff_len)(struct xdp_md *xdp) = (void *)188;

// ---- layouts shared with src/steer.rs (#[repr(C)] mirrors; keep in sync) ----

#define MAX_QUEUES 64
#define MAX_RULES 64
#define MAX_RSS 32
#define RSS_BYTES 12

enum { MODE_PER_QUEUE = 0, MODE_STEER = 1 };
#define QUEUE_NONE 0xffffffffu

enum {
	F_ETHERTYPE = 1 << 0,
	F_VLAN = 1 << 1,
	F_IPV4_SRC = 1 << 2,
	F_IPV4_DST = 1 << 3,
	F_TOTAL_LEN = 1 << 4,
	F_UDP_SRC = 1 << 5,
	F_UDP_DST = 1 << 6,
	F_ECPRI = 1 << 7,
	F_WORD_FRAME = 1 << 8,
	F_WORD_UDP = 1 << 9,
};

enum { ACT_QUEUE = 0, ACT_RSS = 1, ACT_DROP = 2 };

enum { ST_NO_FLOW = 0, ST_FLOW_DROP, ST_OTHER_QUEUE, ST_NO_XSK, ST_MALFORMED, ST_REDIRECTED, ST_COUNT };

struct steer_cfg {
	__u32 mode;
	__u32 steer_qid;
	__u32 n_rules;
	__u32 default_queue; // QUEUE_NONE = drop
	__u32 fallback_queue;
	__u32 pad;
};

struct steer_rule {
	__u32 fields;
	__u32 flow_id;
	__u16 ethertype;
	__u16 vlan_id;
	__u32 src_addr; // host order, already masked
	__u32 src_mask;
	__u32 dst_addr;
	__u32 dst_mask;
	__u16 total_len;
	__u8 ecpri_type;
	__u8 pad0;
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	__u32 word_off;
	__u32 word_value; // already masked
	__u32 word_mask;
	__u32 action;
	__u32 queue;
	__u32 rss_n;
	__u32 rss_queues[MAX_RSS];
};

// The Rust mirrors in src/steer.rs assert the same sizes.
_Static_assert(sizeof(struct steer_cfg) == 24, "steer_cfg layout");
_Static_assert(sizeof(struct steer_rule) == 64 + 4 * MAX_RSS, "steer_rule layout");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_RULES);
	__type(key, __u32);
	__type(value, struct steer_rule);
} rules SEC(".maps");

// Toeplitz contributions: rss_tbl[i * 256 + b] = hash of a 12-byte input that is 0 except
// byte i = b (the hash is linear over XOR), input = src ip, dst ip, src port, dst port.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RSS_BYTES * 256);
	__type(key, __u32);
	__type(value, __u32);
} rss_tbl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// ---- parsing ----

struct pkt {
	__u32 len;       // frame bytes (all fragments of a multi-buffer frame)
	__u16 ethertype; // after VLAN tags
	__u16 vid;
	__u8 has_vlan;
	__u8 has_ip;
	__u8 has_udp;
	__u8 has_ecpri;
	__u8 ecpri_type;
	__u8 pad[3];
	__u32 src, dst;  // host order
	__u16 total_len;
	__u16 sport, dport;
	__u16 udp_len;   // UDP payload length
	__u32 udp_off;   // UDP payload offset in the frame
	__u8 hdr[8];     // scratch (sport, dport, ...)
};

static __always_inline int load(struct xdp_md *ctx, __u32 off, void *buf, __u32 n)
{
	return bpf_xdp_load_bytes(ctx, off, buf, n);
}

static __always_inline __u16 be16(const __u8 *b)
{
	return ((__u16)b[0] << 8) | b[1];
}

static __always_inline __u32 be32(const __u8 *b)
{
	return ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
}

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);
	if (v)
		*v += 1;
}

// 0 = parsed, -1 = malformed (the same cases as rtdaq_core::wire::parse_frame).
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p)
{
	__u8 b[24];
	__u32 l3;

	// The whole frame, fragments included (multi-buffer); bpf_xdp_load_bytes reads across
	// them, so headers are found wherever the driver split.
	p->len = bpf_xdp_get_buff_len(ctx);
	if (p->len < 14 || p->len > 0xffff)
		return -1;
	if (load(ctx, 12, b, 2))
		return -1;
	p->ethertype = be16(b);
	l3 = 14;
	if (p->ethertype == 0x8100 || p->ethertype == 0x88a8) {
		if (p->len < 18 || load(ctx, 14, b, 4))
			return -1;
		p->has_vlan = 1;
		p->vid = be16(b) & 0x0fff;
		p->ethertype = be16(b + 2);
		l3 = 18;
		if (p->ethertype == 0x8100) {
			if (p->len < 22 || load(ctx, 18, b, 4))
				return -1;
			p->ethertype = be16(b + 2);
			l3 = 22;
		}
	}
	__u32 l3len = p->len - l3;
	if (p->ethertype == 0x0800) {
		if (l3len < 20 || load(ctx, l3, b, 20))
			return -1;
		if ((b[0] >> 4) != 4)
			return -1;
		__u32 hl = (__u32)(b[0] & 0x0f) * 4;
		if (hl < 20 || l3len < hl)
			return -1;
		__u32 total = be16(b + 2);
		if (total < hl || l3len < total)
			return -1;
		p->has_ip = 1;
		p->total_len = total;
		p->src = be32(b + 12);
		p->dst = be32(b + 16);
		__u16 frag = be16(b + 6);
		if (b[9] == 17 && (frag & 0x3fff) == 0) {
			if (total - hl < 8)
				return -1;
			__u32 l4 = l3 + hl;
			if (load(ctx, l4 & 0xffff, p->hdr, 8))
				return -1;
			__u32 ulen = be16(p->hdr + 4);
			if (ulen < 8 || ulen > total - hl)
				return -1;
			p->has_udp = 1;
			p->sport = be16(p->hdr);
			p->dport = be16(p->hdr + 2);
			p->udp_off = l4 + 8;
			p->udp_len = ulen - 8;
		}
	} else if (p->ethertype == 0xaefe) {
		if (l3len < 4 || load(ctx, l3, b, 4))
			return -1;
		if ((b[0] >> 4) != 1)
			return -1;
		if (l3len - 4 < be16(b + 2))
			return -1;
		p->has_ecpri = 1;
		p->ecpri_type = b[1];
	}
	return 0;
}

// True when the masked big-endian word at `off` (from `base`, within `limit` bytes) equals
// `value`. False when the word does not lie inside.
static __always_inline int word_at(struct xdp_md *ctx, __u32 base, __u32 limit,
				   const struct steer_rule *r)
{
	__u8 w[4];
	__u32 off = r->word_off;

	if (off > 0xffff || off + 4 > limit)
		return 0;
	if (load(ctx, (base + off) & 0xffff, w, 4))
		return 0;
	return (be32(w) & r->word_mask) == r->word_value;
}

static __always_inline int matches(struct xdp_md *ctx, const struct pkt *p,
				   const struct steer_rule *r)
{
	__u32 f = r->fields;

	if ((f & F_ETHERTYPE) && p->ethertype != r->ethertype)
		return 0;
	if ((f & F_VLAN) && (!p->has_vlan || p->vid != r->vlan_id))
		return 0;
	if ((f & F_IPV4_SRC) && (!p->has_ip || (p->src & r->src_mask) != r->src_addr))
		return 0;
	if ((f & F_IPV4_DST) && (!p->has_ip || (p->dst & r->dst_mask) != r->dst_addr))
		return 0;
	if ((f & F_TOTAL_LEN) && (!p->has_ip || p->total_len != r->total_len))
		return 0;
	if ((f & F_UDP_SRC) && (!p->has_udp || p->sport < r->sport_lo || p->sport > r->sport_hi))
		return 0;
	if ((f & F_UDP_DST) && (!p->has_udp || p->dport < r->dport_lo || p->dport > r->dport_hi))
		return 0;
	if ((f & F_ECPRI) && (!p->has_ecpri || p->ecpri_type != r->ecpri_type))
		return 0;
	if ((f & F_WORD_FRAME) && !word_at(ctx, 0, p->len, r))
		return 0;
	if ((f & F_WORD_UDP) && (!p->has_udp || !word_at(ctx, p->udp_off, p->udp_len, r)))
		return 0;
	return 1;
}

static __always_inline __u32 rss_hash(const struct pkt *p)
{
	__u8 in[RSS_BYTES];
	__u32 h = 0;

	in[0] = p->src >> 24;
	in[1] = p->src >> 16;
	in[2] = p->src >> 8;
	in[3] = p->src;
	in[4] = p->dst >> 24;
	in[5] = p->dst >> 16;
	in[6] = p->dst >> 8;
	in[7] = p->dst;
	in[8] = p->sport >> 8;
	in[9] = p->sport;
	in[10] = p->dport >> 8;
	in[11] = p->dport;
#pragma unroll
	for (int i = 0; i < RSS_BYTES; i++) {
		__u32 k = i * 256 + in[i];
		__u32 *v = bpf_map_lookup_elem(&rss_tbl, &k);
		if (v)
			h ^= *v;
	}
	return h;
}

static __always_inline int to_queue(__u32 q)
{
	long act = bpf_redirect_map(&xsks, q, XDP_PASS);
	if (act == XDP_REDIRECT)
		count(ST_REDIRECTED);
	else
		count(ST_NO_XSK);
	return act;
}

SEC("xdp")
int rtdaq_steer(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct steer_cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return XDP_PASS;

	__u32 qid = ctx->rx_queue_index;
	if (c->mode == MODE_PER_QUEUE) {
		long act = bpf_redirect_map(&xsks, qid, XDP_PASS);
		count(act == XDP_REDIRECT ? ST_REDIRECTED : ST_OTHER_QUEUE);
		return act;
	}
	if (qid != c->steer_qid) {
		count(ST_OTHER_QUEUE);
		return XDP_PASS;
	}

	struct pkt p = {};
	if (parse(ctx, &p)) {
		count(ST_MALFORMED);
		return to_queue(c->fallback_queue);
	}

	__u32 n = c->n_rules;
	for (__u32 i = 0; i < MAX_RULES; i++) {
		if (i >= n)
			break;
		__u32 k = i;
		struct steer_rule *r = bpf_map_lookup_elem(&rules, &k);
		if (!r)
			break;
		if (!matches(ctx, &p, r))
			continue;
		if (r->action == ACT_DROP) {
			count(ST_FLOW_DROP);
			return XDP_DROP;
		}
		if (r->action == ACT_RSS) {
			__u32 m = r->rss_n;
			__u32 idx = 0;
			if (m > MAX_RSS || m == 0)
				return to_queue(c->fallback_queue);
			if (p.has_udp)
				idx = rss_hash(&p) % m;
			if (idx >= MAX_RSS)
				idx = 0;
			return to_queue(r->rss_queues[idx]);
		}
		return to_queue(r->queue);
	}
	if (c->default_queue == QUEUE_NONE) {
		count(ST_NO_FLOW);
		return XDP_PASS;
	}
	return to_queue(c->default_queue);
}

char _license[] SEC("license") = "Dual BSD/GPL";
