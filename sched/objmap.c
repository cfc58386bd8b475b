// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * verbs object -> sverbs object.  The extended-CQ and ibv_wr_* ops that
 * sverbs installs receive only the verbs object (struct ibv_cq_ex *,
 * struct ibv_qp_ex *); this process-wide table finds the sverbs object.
 *
 * Open addressing with linear probing over a fixed table (no allocation):
 * insert and remove under a mutex (object creation and destruction), lookup
 * lock-free.  A removed key leaves a tombstone so later probes continue.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "sched_int.h"

#define SV_OBJMAP_BITS 12
#define SV_OBJMAP_SIZE (1u << SV_OBJMAP_BITS)
#define SV_KEY_EMPTY   ((uintptr_t)0)
#define SV_KEY_TOMB    ((uintptr_t)1)

struct sv_objmap_ent {
	_Atomic uintptr_t key;
	_Atomic(void *) val;
};

static struct sv_objmap_ent objmap[SV_OBJMAP_SIZE];
static pthread_mutex_t objmap_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t objmap_hash(uintptr_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9e3779b97f4a7c15ull) >>
			  (64 - SV_OBJMAP_BITS));
}

bool sv_objmap_insert(const void *key, void *val)
{
	uintptr_t k = (uintptr_t)key;
	uint32_t i = objmap_hash(k), n;
	bool ok = false;

	pthread_mutex_lock(&objmap_lock);
	for (n = 0; n < SV_OBJMAP_SIZE; n++, i = (i + 1) % SV_OBJMAP_SIZE) {
		uintptr_t cur = atomic_load_explicit(&objmap[i].key,
						     memory_order_relaxed);

		if (cur != SV_KEY_EMPTY && cur != SV_KEY_TOMB)
			continue;
		atomic_store_explicit(&objmap[i].val, val,
				      memory_order_relaxed);
		atomic_store_explicit(&objmap[i].key, k, memory_order_release);
		ok = true;
		break;
	}
	pthread_mutex_unlock(&objmap_lock);
	return ok;
}

void *sv_objmap_lookup(const void *key)
{
	uintptr_t k = (uintptr_t)key;
	uint32_t i = objmap_hash(k), n;

	for (n = 0; n < SV_OBJMAP_SIZE; n++, i = (i + 1) % SV_OBJMAP_SIZE) {
		uintptr_t cur = atomic_load_explicit(&objmap[i].key,
						     memory_order_acquire);

		if (cur == k)
			return atomic_load_explicit(&objmap[i].val,
						    memory_order_relaxed);
		if (cur == SV_KEY_EMPTY)
			return NULL;
	}
	return NULL;
}

void sv_objmap_remove(const void *key)
{
	uintptr_t k = (uintptr_t)key;
	uint32_t i = objmap_hash(k), n;

	pthread_mutex_lock(&objmap_lock);
	for (n = 0; n < SV_OBJMAP_SIZE; n++, i = (i + 1) % SV_OBJMAP_SIZE) {
		uintptr_t cur = atomic_load_explicit(&objmap[i].key,
						     memory_order_relaxed);

		if (cur == k) {
			atomic_store_explicit(&objmap[i].key, SV_KEY_TOMB,
					      memory_order_release);
			break;
		}
		if (cur == SV_KEY_EMPTY)
			break;
	}
	pthread_mutex_unlock(&objmap_lock);
}
