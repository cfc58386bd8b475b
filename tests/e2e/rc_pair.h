/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * rc_pair.c: what the small e2e programs (ptmem_e2e.c, resize_e2e.c) share:
 * open an rxe device of the guest with a PD, and connect two RC QPs of two
 * devices (GID index 1, RoCE v2).  Any failure prints "<prog>: FAIL: what:
 * error" on stderr and exits 1.
 */
#ifndef SVERBS_E2E_RC_PAIR_H
#define SVERBS_E2E_RC_PAIR_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct rc_dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

/* The program's name in messages (set once by main). */
extern const char *rc_prog;

__attribute__((noreturn)) void rc_fail(const char *what, int err);
void rc_open_dev(struct rc_dev *d, const char *name);
void rc_close_dev(struct rc_dev *d);
/* qp (on d) to RTS, connected to peer (on pd); call it for both sides */
void rc_connect(struct rc_dev *d, struct ibv_qp *qp, struct rc_dev *pd,
		struct ibv_qp *peer);
/* Post one RDMA WRITE of len bytes from mr's start to rmr's start, with
 * sverbs priority prio, signaled or not. */
void rc_post_write(struct ibv_qp *qp, struct ibv_mr *mr, struct ibv_mr *rmr,
		   uint64_t id, uint32_t len, unsigned int prio, bool signaled);

#endif /* SVERBS_E2E_RC_PAIR_H */
