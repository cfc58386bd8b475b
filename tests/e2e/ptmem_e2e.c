// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ptmem_e2e NQP NLEAVE [NCQ] - what a QP costs (issue 16.10), on rxe.
 *
 * Opens rxe0 (and rxe1 for the peers), creates NQP RC QPs on NCQ send CQs
 * (default 1), and prints the process's resident memory before and after,
 * per QP.  Then NLEAVE of them are connected to peers on rxe1 and each
 * posts one signaled RDMA WRITE with a priority (SVERBS_PRIO(1)): with the
 * layer on, those QPs leave pass-through; the RSS growth that this costs is
 * printed too.  Everything is destroyed at the end.  Memory is counted, not
 * timed; ptmem-check.sh compares the figures of SVERBS=off and on (and the
 * system calls, under strace -c).
 *
 * Output (one line each, key=value): "ptmem create ..." and "ptmem leave ...",
 * and "ptmem smaps create|leave ..." (from /proc/self/smaps: the total and
 * what grew per mapping).  RssAnon / RssFile of /proc/self/status are
 * printed too but are not exact on the guest's 6.1 kernel: each thread
 * caches its RSS counter updates (SPLIT_RSS_COUNTING) and pages the
 * kernel inserts into a mapping (rxe's queues, vm_insert_page) reach the
 * process's counters late; smaps walks the page tables.
 * Exit 0, or 1 with a message on any verbs failure or a bad completion.
 */
#include <errno.h>
#include <malloc.h>
#include <infiniband/sverbs.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rc_pair.h"

#define BUF 4096

static long rss_bytes(void)
{
	long size, res;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &size, &res) != 2)
		rc_fail("/proc/self/statm", errno);
	fclose(f);
	return res * sysconf(_SC_PAGESIZE);
}

/* a "Name: N kB" line of /proc/self/status (RssAnon, RssFile), in bytes */
static long status_bytes(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = strlen(name);
	char line[256];
	long kb = -1;

	if (!f)
		rc_fail("/proc/self/status", errno);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':' &&
		    sscanf(line + n + 1, "%ld", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/*
 * /proc/self/smaps summed per mapped file ("[anon]" for anonymous
 * mappings, "[heap]", the rxe queues' /dev/infiniband/uverbsN, the
 * libraries): resident bytes and mappings, to say what RssFile is.
 */
#define MAPS 128
struct maps {
	int n;
	char name[MAPS][96];
	long rss[MAPS];
	long vmas[MAPS];
	long rss_total; /* exact, unlike /proc/self/status (below) */
	long anon_total;
};

static int maps_slot(struct maps *m, const char *name)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (!strcmp(m->name[i], name))
			return i;
	if (m->n == MAPS)
		return MAPS - 1; /* the rest, counted together */
	snprintf(m->name[m->n], sizeof(m->name[0]), "%s", name);
	return m->n++;
}

static void maps_read(struct maps *m)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], path[400];
	int cur = -1;
	long kb;

	memset(m, 0, sizeof(*m));
	if (!f)
		rc_fail("/proc/self/smaps", errno);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		path[0] = '\0';
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %399s", &lo, &hi,
			   path) >= 2) {
			cur = maps_slot(m, path[0] ? path : "[anon]");
			m->vmas[cur]++;
		} else if (cur >= 0 && sscanf(line, "Rss: %ld kB", &kb) == 1) {
			m->rss[cur] += kb * 1024;
			m->rss_total += kb * 1024;
		} else if (sscanf(line, "Anonymous: %ld kB", &kb) == 1) {
			m->anon_total += kb * 1024;
		}
	}
	fclose(f);
}

/* "ptmem smaps PHASE" lines: what grew, per QP */
static void maps_print(const char *phase, const struct maps *a,
		       const struct maps *b, int nqp)
{
	int i, j;

	if (!nqp)
		return;
	printf("ptmem smaps %s total rss_per_qp=%.1f anon_per_qp=%.1f "
	       "file_per_qp=%.1f\n",
	       phase, (double)(b->rss_total - a->rss_total) / nqp,
	       (double)(b->anon_total - a->anon_total) / nqp,
	       (double)(b->rss_total - b->anon_total - a->rss_total +
			a->anon_total) /
		       nqp);

	for (j = 0; j < b->n; j++) {
		long rss = b->rss[j], vmas = b->vmas[j];

		for (i = 0; i < a->n; i++)
			if (!strcmp(a->name[i], b->name[j])) {
				rss -= a->rss[i];
				vmas -= a->vmas[i];
				break;
			}
		if (rss || vmas)
			printf("ptmem smaps %s name=%s rss_per_qp=%.1f "
			       "vmas_per_qp=%.2f\n",
			       phase, b->name[j], (double)rss / nqp,
			       (double)vmas / nqp);
	}
}

/* bytes the process has malloc'ed (heap and mmap'ed chunks) */
static long heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (long)(mi.uordblks + mi.hblkhd);
}

static struct ibv_qp *make_qp(struct rc_dev *d, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp)
		rc_fail(d->name, errno);
	return qp;
}

/* One signaled WRITE with a priority on qp; wait for its completion. */
static void write_prio(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		       struct ibv_mr *rmr, uint64_t id)
{
	struct ibv_wc wc;
	long spins = 0;
	int n;

	rc_post_write(qp, mr, rmr, id, 64, 1, true);
	do {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			rc_fail("ibv_poll_cq", EIO);
		if (++spins > 2000000000L)
			rc_fail("no completion", ETIMEDOUT);
	} while (!n);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id) {
		fprintf(stderr, "ptmem_e2e: completion wr_id %llu status %s\n",
			(unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct rc_dev s, t;
	struct ibv_qp **qp, **peer;
	struct ibv_cq **cq, *tcq;
	struct ibv_mr *mr, *rmr;
	long r0, r1, r2, a0, a1, f0, f1, s0, s1, h0, h1;
	static struct maps m0, m1;
	int nqp, nleave, ncq, i;
	void *buf, *rbuf;

	if (argc < 3) {
		fprintf(stderr, "usage: ptmem_e2e NQP NLEAVE [NCQ]\n");
		return 2;
	}
	nqp = atoi(argv[1]);
	nleave = atoi(argv[2]);
	ncq = argc > 3 ? atoi(argv[3]) : 1;
	if (nqp < 1 || nleave < 0 || nleave > nqp || ncq < 1 || ncq > nqp)
		return 2;
	qp = calloc((size_t)nqp, sizeof(*qp));
	peer = calloc((size_t)nleave + 1, sizeof(*peer));
	cq = calloc((size_t)ncq, sizeof(*cq));
	buf = aligned_alloc(BUF, BUF);
	rbuf = aligned_alloc(BUF, BUF);
	if (!qp || !peer || !cq || !buf || !rbuf)
		rc_fail("calloc", ENOMEM);
	rc_prog = "ptmem_e2e";
	rc_open_dev(&s, "rxe0");
	rc_open_dev(&t, "rxe1");
	mr = ibv_reg_mr(s.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(t.pd, rbuf, BUF,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	tcq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	if (!mr || !rmr || !tcq)
		rc_fail("reg_mr / create_cq", errno);
	for (i = 0; i < ncq; i++) {
		cq[i] = ibv_create_cq(s.ctx, 256, NULL, NULL, 0);
		if (!cq[i])
			rc_fail("ibv_create_cq", errno);
	}
	r0 = rss_bytes();
	a0 = status_bytes("RssAnon");
	f0 = status_bytes("RssFile");
	s0 = status_bytes("RssShmem");
	h0 = heap_bytes();
	maps_read(&m0);
	for (i = 0; i < nqp; i++)
		qp[i] = make_qp(&s, cq[i % ncq]);
	r1 = rss_bytes();
	a1 = status_bytes("RssAnon");
	f1 = status_bytes("RssFile");
	s1 = status_bytes("RssShmem");
	h1 = heap_bytes();
	printf("ptmem create nqp=%d ncq=%d rss_before=%ld rss_after=%ld "
	       "per_qp=%.1f anon_per_qp=%.1f file_per_qp=%.1f "
	       "shmem_per_qp=%.1f heap_per_qp=%.1f cq_cqe=%d\n",
	       nqp, ncq, r0, r1, (double)(r1 - r0) / nqp,
	       (double)(a1 - a0) / nqp, (double)(f1 - f0) / nqp,
	       (double)(s1 - s0) / nqp, (double)(h1 - h0) / nqp, cq[0]->cqe);
	maps_read(&m1);
	maps_print("create", &m0, &m1, nqp);
	for (i = 0; i < nleave; i++) {
		peer[i] = make_qp(&t, tcq);
		rc_connect(&s, qp[i], &t, peer[i]);
		rc_connect(&t, peer[i], &s, qp[i]);
	}
	r1 = rss_bytes();
	maps_read(&m0);
	for (i = 0; i < nleave; i++)
		write_prio(qp[i], cq[i % ncq], mr, rmr, 1000 + (uint64_t)i);
	r2 = rss_bytes();
	maps_read(&m1);
	maps_print("leave", &m0, &m1, nleave);
	printf("ptmem leave nleave=%d rss_before=%ld rss_after=%ld "
	       "per_qp=%.1f\n",
	       nleave, r1, r2, nleave ? (double)(r2 - r1) / nleave : 0.0);
	for (i = 0; i < nqp; i++)
		if (ibv_destroy_qp(qp[i]))
			rc_fail("ibv_destroy_qp", errno);
	for (i = 0; i < nleave; i++)
		if (ibv_destroy_qp(peer[i]))
			rc_fail("ibv_destroy_qp (peer)", errno);
	for (i = 0; i < ncq; i++)
		ibv_destroy_cq(cq[i]);
	ibv_destroy_cq(tcq);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(rmr);
	rc_close_dev(&s);
	rc_close_dev(&t);
	free(qp);
	free(peer);
	free(cq);
	free(buf);
	free(rbuf);
	return 0;
}
