/* Checks an MPI job: an allreduce, a ping-pong between the first and the last rank, and an
 * all-to-all, each verifying every element it receives. Prints one line per check and
 * exits non-zero (through MPI_Abort) on the first wrong element. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char *what, long at, long got, long want)
{
    fprintf(stderr, "rank %d: %s: element %ld is %ld, expected %ld\n", rank, what, at, got,
            want);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void allreduce(void)
{
    const long n = 1 << 18; /* 2 MiB of int64 */
    int64_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (long i = 0; i < n; i++) in[i] = (int64_t)rank * 1000003 + i;
    MPI_Allreduce(in, out, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int64_t ranks = (int64_t)size * (size - 1) / 2;
    for (long i = 0; i < n; i++) {
        int64_t want = ranks * 1000003 + (int64_t)size * i;
        if (out[i] != want) fail("allreduce", i, out[i], want);
    }
    if (rank == 0) printf("allreduce: %d ranks, %ld int64 each: ok\n", size, n);
    free(in);
    free(out);
}

static void pingpong(void)
{
    const int peer = size - 1, sizes[] = {8, 4096, 65536, 1 << 20};
    if (rank != 0 && rank != peer) return;
    unsigned char *buf = malloc(1 << 20);
    for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int len = sizes[s], rounds = len > 65536 ? 20 : 200;
        double start = MPI_Wtime();
        for (int r = 0; r < rounds; r++) {
            unsigned char seed = (unsigned char)(r * 31 + s);
            if (rank == 0) {
                for (int i = 0; i < len; i++) buf[i] = (unsigned char)(seed + i * 7);
                MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD);
                MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < len; i++)
                    if (buf[i] != (unsigned char)(seed + i * 7 + 1))
                        fail("ping-pong", i, buf[i], (unsigned char)(seed + i * 7 + 1));
            } else {
                MPI_Recv(buf, len, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int i = 0; i < len; i++) {
                    if (buf[i] != (unsigned char)(seed + i * 7))
                        fail("ping-pong", i, buf[i], (unsigned char)(seed + i * 7));
                    buf[i]++;
                }
                MPI_Send(buf, len, MPI_BYTE, 0, r, MPI_COMM_WORLD);
            }
        }
        if (rank == 0)
            printf("ping-pong: rank 0 <-> rank %d, %d bytes x %d round trips: ok (%.1f us per "
                   "round trip)\n",
                   peer, len, rounds, (MPI_Wtime() - start) * 1e6 / rounds);
    }
    free(buf);
}

static void alltoall(void)
{
    const long block = 16384; /* int32 per pair: 64 KiB */
    int32_t *out = malloc(block * size * sizeof *out), *in = malloc(block * size * sizeof *in);
    for (int to = 0; to < size; to++)
        for (long k = 0; k < block; k++) out[to * block + k] = (rank << 24) | (to << 16) | (k & 0xffff);
    MPI_Alltoall(out, (int)block, MPI_INT32_T, in, (int)block, MPI_INT32_T, MPI_COMM_WORLD);
    for (int from = 0; from < size; from++)
        for (long k = 0; k < block; k++) {
            int32_t want = (from << 24) | (rank << 16) | (k & 0xffff);
            if (in[from * block + k] != want) fail("all-to-all", from * block + k, in[from * block + k], want);
        }
    if (rank == 0) printf("all-to-all: %d ranks, %ld int32 per pair: ok\n", size, block);
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *ns = getenv("XROCE_NETNS");
    snprintf(host, sizeof host, "%s", ns ? ns : "?");
    printf("rank %d of %d in %s\n", rank, size, host);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    allreduce();
    pingpong();
    alltoall();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("all checks passed\n");
    MPI_Finalize();
    return 0;
}
