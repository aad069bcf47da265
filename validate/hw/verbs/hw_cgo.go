//go:build verbs && cgo && linux

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int port, gid_index, rd_atom;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
} gv_dev;

typedef struct {
	gv_dev *d;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	volatile uint8_t *buf;
	size_t half; // bytes [0, half) are sent from, [half, 2*half) are written by the peer
	int depth, max_inline;
	uint64_t posted, done; // WR ids posted; all WRs below done have completed
} gv_ep;

typedef struct {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint16_t lid;
	uint8_t mtu, port;
	uint8_t gid[16];
} gv_info;

static double gv_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int gv_err(char *err, const char *fmt, const char *a, int e) {
	snprintf(err, 512, fmt, a, e ? strerror(e) : "");
	return -1;
}

// gv_devices writes the device names, comma-separated, into out.
static int gv_devices(char *out, int len) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l) return -errno;
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		if (i) strncat(out, ",", len - strlen(out) - 1);
		strncat(out, ibv_get_device_name(l[i]), len - strlen(out) - 1);
	}
	ibv_free_device_list(l);
	return n;
}

static gv_dev *gv_open(const char *name, int port, int gidx, char *err) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n == 0) {
		if (l) ibv_free_device_list(l);
		gv_err(err, "%sno device%s", "", 0);
		return NULL;
	}
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!name[0] || !strcmp(ibv_get_device_name(l[i]), name)) { dev = l[i]; break; }
	if (!dev) {
		ibv_free_device_list(l);
		gv_err(err, "device %s not found (ibv_devices lists the names)%s", name, 0);
		return NULL;
	}
	gv_dev *d = calloc(1, sizeof *d);
	d->port = port;
	d->ctx = ibv_open_device(dev);
	ibv_free_device_list(l);
	if (!d->ctx) { gv_err(err, "ibv_open_device(%s): %s", name, errno); free(d); return NULL; }
	struct ibv_device_attr da;
	if (ibv_query_device(d->ctx, &da)) { gv_err(err, "ibv_query_device%s: %s", "", errno); goto fail; }
	d->rd_atom = da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16;
	if (ibv_query_port(d->ctx, port, &d->pattr)) { gv_err(err, "ibv_query_port%s: %s", "", errno); goto fail; }
	if (d->pattr.state != IBV_PORT_ACTIVE) {
		gv_err(err, "port is %s, want PORT_ACTIVE (ibv_devinfo shows it)%s", ibv_port_state_str(d->pattr.state), 0);
		goto fail;
	}
	d->gid_index = gidx;
	if (d->pattr.link_layer == IBV_LINK_LAYER_ETHERNET && gidx < 0) d->gid_index = 0;
	if (d->gid_index >= 0 && ibv_query_gid(d->ctx, port, d->gid_index, &d->gid)) {
		gv_err(err, "ibv_query_gid%s: %s", "", errno);
		goto fail;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) { gv_err(err, "ibv_alloc_pd%s: %s", "", errno); goto fail; }
	return d;
fail:
	ibv_close_device(d->ctx);
	free(d);
	return NULL;
}

static void gv_close(gv_dev *d) {
	if (d->pd) ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	free(d);
}

static void gv_ep_free(gv_ep *e) {
	if (e->qp) ibv_destroy_qp(e->qp);
	if (e->mr) ibv_dereg_mr(e->mr);
	if (e->cq) ibv_destroy_cq(e->cq);
	free((void *)e->buf);
	free(e);
}

static gv_ep *gv_ep_new(gv_dev *d, size_t half, int depth, char *err) {
	gv_ep *e = calloc(1, sizeof *e);
	size_t len = 2 * half;
	e->d = d; e->half = half; e->depth = depth;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, len)) { gv_err(err, "posix_memalign%s: %s", "", ENOMEM); free(e); return NULL; }
	memset(buf, 0, len);
	e->buf = buf;
	e->cq = ibv_create_cq(d->ctx, 2 * depth, NULL, NULL, 0);
	if (!e->cq) { gv_err(err, "ibv_create_cq%s: %s", "", errno); goto fail; }
	e->mr = ibv_reg_mr(d->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr) { gv_err(err, "ibv_reg_mr%s: %s", "", errno); goto fail; }
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = e->cq; ia.recv_cq = e->cq; ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = depth; ia.cap.max_recv_wr = 1; ia.cap.max_send_sge = 1; ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	e->qp = ibv_create_qp(d->pd, &ia);
	if (!e->qp) { // some providers take no inline data
		ia.cap.max_inline_data = 0;
		e->qp = ibv_create_qp(d->pd, &ia);
	}
	if (!e->qp) { gv_err(err, "ibv_create_qp%s: %s", "", errno); goto fail; }
	e->max_inline = ia.cap.max_inline_data;
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT; a.pkey_index = 0; a.port_num = d->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		gv_err(err, "ibv_modify_qp(INIT)%s: %s", "", errno);
		goto fail;
	}
	return e;
fail:
	gv_ep_free(e);
	return NULL;
}

static void gv_info_of(gv_ep *e, gv_info *i) {
	memset(i, 0, sizeof *i);
	i->qpn = e->qp->qp_num;
	i->psn = (e->qp->qp_num * 2654435761u) & 0xffffff;
	i->rkey = e->mr->rkey;
	i->addr = (uintptr_t)e->buf;
	i->lid = e->d->pattr.lid;
	i->mtu = e->d->pattr.active_mtu;
	i->port = e->d->port;
	memcpy(i->gid, e->d->gid.raw, 16);
}

static int gv_connect(gv_ep *e, const gv_info *r, char *err) {
	gv_info me;
	gv_info_of(e, &me);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = me.mtu < r->mtu ? me.mtu : r->mtu;
	a.dest_qp_num = r->qpn; a.rq_psn = r->psn;
	a.max_dest_rd_atomic = e->d->rd_atom; a.min_rnr_timer = 12;
	a.ah_attr.dlid = r->lid; a.ah_attr.port_num = e->d->port;
	if (e->d->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = e->d->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return gv_err(err, "ibv_modify_qp(RTR)%s: %s", "", errno);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS; a.timeout = 14; a.retry_cnt = 7; a.rnr_retry = 7;
	a.sq_psn = me.psn; a.max_rd_atomic = e->d->rd_atom;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return gv_err(err, "ibv_modify_qp(RTS)%s: %s", "", errno);
	return 0;
}

// gv_reap polls e's CQ; with block, until every posted signaled WR below
// want has completed or timeout ns pass.
static int gv_reap(gv_ep *e, uint64_t want, double timeout, char *err) {
	struct ibv_wc wc[16];
	double t0 = 0;
	for (;;) {
		int n = ibv_poll_cq(e->cq, 16, wc);
		if (n < 0) return gv_err(err, "ibv_poll_cq%s: %s", "", EIO);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				char what[96];
				snprintf(what, sizeof what, "WR %llu", (unsigned long long)wc[i].wr_id);
				snprintf(err, 512, "completion of %s: %s (vendor error %#x)", what,
					ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
				return -1;
			}
			e->done = wc[i].wr_id + 1;
		}
		if (e->done >= want) return 0;
		if (n == 0) {
			double now = gv_now();
			if (t0 == 0) t0 = now;
			else if (now - t0 > timeout) {
				snprintf(err, 512, "waited %.1f s for the completion of WR %llu (last completed: %llu)",
					timeout / 1e9, (unsigned long long)want - 1, (unsigned long long)e->done);
				return -1;
			}
		}
	}
}

// gv_post posts one WR; every WR with signal set completes. It first
// makes room: at most depth WRs are outstanding.
static int gv_post(gv_ep *e, int op, size_t len, uint64_t raddr, uint32_t rkey, int signal, double timeout, char *err) {
	if (e->posted - e->done >= (uint64_t)e->depth && gv_reap(e, e->posted - e->depth + 1, timeout, err)) return -1;
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = (uint32_t)len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = e->posted; wr.sg_list = &sge; wr.num_sge = 1;
	wr.send_flags = signal ? IBV_SEND_SIGNALED : 0;
	if (op == 1) {
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = raddr; wr.wr.atomic.rkey = rkey; wr.wr.atomic.compare_add = 1;
	} else {
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = raddr; wr.wr.rdma.rkey = rkey;
		if (len <= (size_t)e->max_inline) wr.send_flags |= IBV_SEND_INLINE;
	}
	int rc = ibv_post_send(e->qp, &wr, &bad);
	if (rc) return gv_err(err, "ibv_post_send%s: %s", "", rc);
	e->posted++;
	return 0;
}

// gv_spin waits until the last byte of e's first len bytes is m.
static int gv_spin(gv_ep *e, size_t len, uint8_t m, double timeout, char *err) {
	volatile uint8_t *p = e->buf + e->half + len - 1;
	for (uint64_t k = 1;; k++) {
		if (*p == m) return 0;
		if ((k & 0xffff) == 0) {
			static __thread double t0;
			if (k == 0x10000) t0 = gv_now();
			else if (gv_now() - t0 > timeout) {
				snprintf(err, 512, "waited %.1f s for the peer's WRITE of %zu bytes to land (last byte is %u, want %u)",
					timeout / 1e9, len, *p, m);
				return -1;
			}
		}
	}
}

// gv_lat_post is one ping of the ping-pong: mark the last byte, WRITE it.
static int gv_lat_post(gv_ep *e, const gv_info *r, size_t len, uint8_t m, double timeout, char *err) {
	e->buf[len - 1] = m;
	return gv_post(e, 0, len, r->addr + e->half, r->rkey, (e->posted & 63) == 63, timeout, err);
}

// gv_write_lat: iters ping-pongs of len bytes. Loopback (b != NULL): a
// pings b and b pongs a in one thread. Else role first pings, the other
// pongs. ns[i] is half of iteration i's round trip.
static int gv_write_lat(gv_ep *a, const gv_info *ra, gv_ep *b, const gv_info *rb, int first, size_t len, int iters,
	double timeout, double *ns, char *err) {
	for (int i = 0; i < iters; i++) {
		uint8_t m = (uint8_t)(i % 255 + 1);
		double t0 = gv_now();
		if (b) {
			if (gv_lat_post(a, ra, len, m, timeout, err) || gv_spin(b, len, m, timeout, err) ||
				gv_lat_post(b, rb, len, m, timeout, err) || gv_spin(a, len, m, timeout, err)) return -1;
		} else if (first) {
			if (gv_lat_post(a, ra, len, m, timeout, err) || gv_spin(a, len, m, timeout, err)) return -1;
		} else {
			if (gv_spin(a, len, m, timeout, err) || gv_lat_post(a, ra, len, m, timeout, err)) return -1;
		}
		ns[i] = (gv_now() - t0) / 2;
	}
	if (gv_reap(a, 0, timeout, err)) return -1;
	return b ? gv_reap(b, 0, timeout, err) : 0;
}

// gv_write_bw: iters signaled WRITEs of len bytes, depth outstanding;
// returns the ns from the first post to the last completion.
static int gv_write_bw(gv_ep *a, const gv_info *ra, size_t len, int iters, double timeout, double *ns, char *err) {
	uint64_t base = a->posted;
	double t0 = gv_now();
	for (int i = 0; i < iters; i++)
		if (gv_post(a, 0, len, ra->addr + a->half, ra->rkey, 1, timeout, err)) return -1;
	if (gv_reap(a, base + iters, timeout, err)) return -1;
	*ns = gv_now() - t0;
	return 0;
}

// gv_atomic_lat: iters FETCH_AND_ADDs of 1 to the peer's first word, one
// at a time; ns[i] is iteration i's round trip. *last is the old value the
// last one returned.
static int gv_atomic_lat(gv_ep *a, const gv_info *ra, int iters, double timeout, double *ns, uint64_t *last, char *err) {
	for (int i = 0; i < iters; i++) {
		double t0 = gv_now();
		if (gv_post(a, 1, 8, ra->addr + a->half, ra->rkey, 1, timeout, err) || gv_reap(a, a->posted, timeout, err)) return -1;
		ns[i] = gv_now() - t0;
	}
	*last = *(volatile uint64_t *)a->buf;
	return 0;
}

static void gv_clear(gv_ep *e, size_t len) { e->buf[e->half + len - 1] = 0; }

static uint64_t gv_word(gv_ep *e) { return *(volatile uint64_t *)(e->buf + e->half); }
*/
import "C"

import (
	"fmt"
	"strings"
	"syscall"
	"unsafe"
)

// Built reports whether this binary has the libibverbs half.
const Built = true

// Devices lists the RDMA devices libibverbs sees.
func Devices() ([]string, error) {
	buf := make([]byte, 4096)
	n := C.gv_devices((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	if n < 0 { // ENOSYS: the kernel has no RDMA support at all
		return nil, fmt.Errorf("%w; ibv_get_device_list: %v", ErrNoDevice, syscall.Errno(-n))
	}
	if n == 0 {
		return nil, nil
	}
	return strings.Split(C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), ","), nil
}

// cerr is the C side's error buffer.
type cerr [512]C.char

func (e *cerr) p() *C.char { return &e[0] }

func (e *cerr) err(what string) error {
	return fmt.Errorf("%s: %s", what, C.GoString(&e[0]))
}

// ep is one QP with its CQ and registered buffer.
type ep struct{ c *C.gv_ep }

func (e ep) info() Info {
	var ci C.gv_info
	C.gv_info_of(e.c, &ci)
	i := Info{QPN: uint32(ci.qpn), PSN: uint32(ci.psn), RKey: uint32(ci.rkey), Addr: uint64(ci.addr),
		LID: uint16(ci.lid), MTU: uint8(ci.mtu), Port: uint8(ci.port)}
	for k := range i.GID {
		i.GID[k] = byte(ci.gid[k])
	}
	return i
}

func cinfo(i Info) C.gv_info {
	c := C.gv_info{qpn: C.uint32_t(i.QPN), psn: C.uint32_t(i.PSN), rkey: C.uint32_t(i.RKey), addr: C.uint64_t(i.Addr),
		lid: C.uint16_t(i.LID), mtu: C.uint8_t(i.MTU), port: C.uint8_t(i.Port)}
	for k := range i.GID {
		c.gid[k] = C.uint8_t(i.GID[k])
	}
	return c
}

func run(o *Options) ([]Row, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, ErrNoDevice
	}
	var e cerr
	name := C.CString(o.Device)
	defer C.free(unsafe.Pointer(name))
	d := C.gv_open(name, C.int(o.Port), C.int(o.GIDIndex), e.p())
	if d == nil {
		return nil, e.err(fmt.Sprintf("open %s port %d (devices: %s)", orFirst(o.Device), o.Port, strings.Join(devs, ", ")))
	}
	defer C.gv_close(d)
	newEP := func() (ep, error) {
		c := C.gv_ep_new(d, C.size_t((o.MaxSize()+4095)&^4095), C.int(o.TxDepth), e.p())
		if c == nil {
			return ep{}, e.err("create QP")
		}
		return ep{c}, nil
	}
	a, err := newEP()
	if err != nil {
		return nil, err
	}
	defer C.gv_ep_free(a.c)
	switch o.Placement() {
	case "loopback":
		b, err := newEP()
		if err != nil {
			return nil, err
		}
		defer C.gv_ep_free(b.c)
		ia, ib := a.info(), b.info()
		if err := connect(a, ib); err != nil {
			return nil, err
		}
		if err := connect(b, ia); err != nil {
			return nil, err
		}
		return measure(o, a, ib, &b, ia, true, func() error { return nil })
	default:
		return runPeer(o, a)
	}
}

func orFirst(dev string) string {
	if dev == "" {
		return "the first device"
	}
	return dev
}

func connect(a ep, r Info) error {
	var e cerr
	ci := cinfo(r)
	if C.gv_connect(a.c, &ci, e.p()) != 0 {
		return e.err("connect QP")
	}
	return nil
}

// measure runs o's case for every size. a targets remote ra; in
// loopback b (targeting rb) is the other side. first: a pings. sync runs
// between sizes (the TCP handshake of client/server runs).
func measure(o *Options, a ep, ra Info, b *ep, rb Info, first bool, sync func() error) ([]Row, error) {
	var rows []Row
	to := C.double(o.Timeout.Nanoseconds())
	cra, crb := cinfo(ra), cinfo(rb)
	ns := (*C.double)(C.calloc(C.size_t(o.Iters), 8))
	defer C.free(unsafe.Pointer(ns))
	samples := unsafe.Slice((*float64)(unsafe.Pointer(ns)), o.Iters)
	for _, size := range o.Sizes {
		C.gv_clear(a.c, C.size_t(size))
		if b != nil {
			C.gv_clear(b.c, C.size_t(size))
		}
		if err := sync(); err != nil {
			return nil, err
		}
		var e cerr
		switch o.Case {
		case CaseWriteLat:
			var bc *C.gv_ep
			if b != nil {
				bc = b.c
			}
			if C.gv_write_lat(a.c, &cra, bc, &crb, boolInt(first), C.size_t(size), C.int(o.Iters), to, ns, e.p()) != 0 {
				return nil, e.err(fmt.Sprintf("write_lat %d B", size))
			}
			rows = append(rows, latencyRow(o.Case, size, samples))
		case CaseWriteBW:
			if !first {
				continue // the server's buffer is the target; nothing to post
			}
			var t C.double
			if C.gv_write_bw(a.c, &cra, C.size_t(size), C.int(o.Iters), to, &t, e.p()) != 0 {
				return nil, e.err(fmt.Sprintf("write_bw %d B", size))
			}
			rows = append(rows, bandwidthRow(size, o.Iters, float64(t)))
		case CaseAtomicLat:
			if !first {
				continue
			}
			var last C.uint64_t
			if C.gv_atomic_lat(a.c, &cra, C.int(o.Iters), to, ns, &last, e.p()) != 0 {
				return nil, e.err("atomic_lat")
			}
			if b != nil {
				if got := uint64(C.gv_word(b.c)); got != uint64(o.Iters) {
					return nil, fmt.Errorf("atomic_lat: the target word is %d after %d fetch-adds of 1", got, o.Iters)
				}
			}
			if uint64(last) != uint64(o.Iters-1) {
				return nil, fmt.Errorf("atomic_lat: the last fetch-add returned %d, want %d", uint64(last), o.Iters-1)
			}
			rows = append(rows, latencyRow(o.Case, size, samples))
		}
	}
	return rows, sync()
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// runPeer is one side of a client/server run: the TCP exchange, then the
// measurement with one handshake byte each way before every size and at
// the end.
func runPeer(o *Options, a ep) ([]Row, error) {
	conn, err := dialOrAccept(o)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	peer := &peerConn{c: conn, timeout: o.Timeout}
	ri, err := peer.exchange(o, a.info())
	if err != nil {
		return nil, err
	}
	if err := connect(a, ri); err != nil {
		return nil, err
	}
	client := o.Placement() == "client"
	return measure(o, a, ri, nil, Info{}, client, func() error { return peer.handshake(client) })
}
