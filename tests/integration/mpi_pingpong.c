// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mpi_pingpong: two MPI ranks bounce messages of 8 B to 512 KiB (eager and
 * rendezvous protocols) and check every byte; tests/integration/ucx.sh runs
 * it over UCX's rc_verbs on our rdma-core build.  Prints
 * "mpi_pingpong: ok <messages> messages, <bytes> bytes" on rank 0 and exits
 * 0, or names the first bad byte and aborts the job (MPI_Abort, exit 1).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_BYTES (1u << 20)
#define ROUNDS	  10

static unsigned char pattern(size_t i, unsigned int round, unsigned int size)
{
	return (unsigned char)(i * 31u + round * 7u + size);
}

static void check(const unsigned char *buf, size_t n, unsigned int round,
		  unsigned int size, int rank)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (buf[i] != pattern(i, round, size)) {
			fprintf(stderr,
				"mpi_pingpong: rank %d: size %u round %u: byte "
				"%zu is %u, want %u\n",
				rank, size, round, i, buf[i],
				pattern(i, round, size));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
}

int main(int argc, char **argv)
{
	unsigned long long msgs = 0, bytes = 0;
	unsigned int size, round;
	int rank, nranks;
	unsigned char *buf;
	size_t i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (!rank)
			fprintf(stderr, "mpi_pingpong: needs 2 ranks, got %d\n",
				nranks);
		MPI_Finalize();
		return 2;
	}
	buf = malloc(MAX_BYTES);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size = 8; size <= MAX_BYTES; size *= 4) {
		for (round = 0; round < ROUNDS; round++) {
			if (rank == 0) {
				for (i = 0; i < size; i++)
					buf[i] = pattern(i, round, size);
				MPI_Send(buf, (int)size, MPI_BYTE, 1, 1,
					 MPI_COMM_WORLD);
				MPI_Recv(buf, (int)size, MPI_BYTE, 1, 2,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				/* rank 1 sends it back with round + 1 */
				check(buf, size, round + 1, size, rank);
			} else {
				MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(buf, size, round, size, rank);
				for (i = 0; i < size; i++)
					buf[i] = pattern(i, round + 1, size);
				MPI_Send(buf, (int)size, MPI_BYTE, 0, 2,
					 MPI_COMM_WORLD);
			}
			msgs += 2;
			bytes += 2ull * size;
		}
	}
	if (!rank)
		printf("mpi_pingpong: ok %llu messages, %llu bytes\n", msgs,
		       bytes);
	free(buf);
	MPI_Finalize();
	return 0;
}
