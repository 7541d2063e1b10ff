/*
 * mg.c - the halo exchange of a NAS-MG-style 3-D grid on ARMCI (the ARMCI paper's §6): an
 * NX x NY x NZ grid of doubles, periodic in every direction, split into slabs along y; every
 * sweep puts each slab's two y-faces into the neighbours' ghost planes with strided puts
 * (ARMCI_PutS: NZ rows of NX doubles, a plane apart), then relaxes every point with a 7-point
 * Jacobi step (what MG's smoother does on each level).
 *
 *   local layout: u[z][y][x], y = -1 .. ny (ghost planes -1 and ny), ny = NY / P
 *   sweep:  PutS(face y=0     -> lower neighbour's ghost y=ny)
 *           PutS(face y=ny-1  -> upper neighbour's ghost y=-1)
 *           AllFence; Barrier; v = jacobi(u); swap(u, v)
 *
 * Each rank checks its slab against the same sweeps run serially over the whole grid (same
 * operations in the same order, so equal to the last bit). Output: one JSON line on stdout:
 * the time of the sweeps and of their halo exchanges (median over the repetitions, rank 0).
 *
 * usage: mg [-n N] [-s SWEEPS] [-r REPS] [-i IMPL]      (N = NX = NY = NZ)
 * One source for activerma's libarmci and ARMCI-MPI (WITH_MPI: MPI_Init first).
 */
#define _POSIX_C_SOURCE 200809L
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include <armci.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long nx, ny_all, nz, ny; /* ny: planes per rank */

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The right-hand side and the start value at a global point. */
static double f_at(long x, long y, long z) { return (double)((x * 3 + y * 5 + z * 7) % 11) - 5.0; }
static double u0_at(long x, long y, long z) { return (double)((x + 2 * y + 3 * z) % 13) * 0.25; }

/* One Jacobi step at a point from its six neighbours: the same expression, in the same order,
 * serially and in parallel. */
static double relax(double c, double xm, double xp, double ym, double yp, double zm, double zp, double f) {
    return 0.5 * c + (((xm + xp) + (ym + yp)) + (zm + zp) - f) * (0.5 / 6.0);
}

/* Index in a slab with planes -1 .. planes (two ghost planes). */
static long at(long planes, long x, long y, long z) { return (z * (planes + 2) + (y + 1)) * nx + x; }

/* One sweep over a slab whose ghost planes are filled: v = relax(u). */
static void sweep(long planes, const double *u, double *v, const double *f) {
    for (long z = 0; z < nz; z++)
        for (long y = 0; y < planes; y++)
            for (long x = 0; x < nx; x++) {
                long zm = (z + nz - 1) % nz, zp = (z + 1) % nz, xm = (x + nx - 1) % nx, xp = (x + 1) % nx;
                long i = at(planes, x, y, z);
                v[i] = relax(u[i], u[at(planes, xm, y, z)], u[at(planes, xp, y, z)], u[at(planes, x, y - 1, z)],
                             u[at(planes, x, y + 1, z)], u[at(planes, x, y, zm)], u[at(planes, x, y, zp)], f[i]);
            }
}

/* Periodic ghost planes of a whole grid (the serial reference). */
static void fill_ghosts(long planes, double *u) {
    for (long z = 0; z < nz; z++) {
        memcpy(&u[at(planes, 0, -1, z)], &u[at(planes, 0, planes - 1, z)], nx * sizeof(double));
        memcpy(&u[at(planes, 0, planes, z)], &u[at(planes, 0, 0, z)], nx * sizeof(double));
    }
}

int main(int argc, char **argv) {
    long n = 64;
    int sweeps = 10, reps = 5;
    const char *impl = "activerma";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            sweeps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc)
            impl = argv[++i];
    }
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    ARMCI_Init();
    int me = armci_msg_me(), p = armci_msg_nproc();
    nx = ny_all = nz = n;
    if (n % p != 0 || n / p < 1 || reps < 1 || reps > 64 || sweeps < 1)
        ARMCI_Error("mg: N must be a multiple of the number of ranks, REPS 1..64, SWEEPS >= 1", (int)n);
    ny = n / p;
    long slab = nz * (ny + 2) * nx;
    void **ub = malloc(sizeof(void *) * p), **vb = malloc(sizeof(void *) * p);
    ARMCI_Malloc(ub, slab * sizeof(double));
    ARMCI_Malloc(vb, slab * sizeof(double));
    double *f = malloc(slab * sizeof(double));
    int lower = (me + p - 1) % p, upper = (me + 1) % p;
    /* The face: NZ rows of NX doubles, one slab plane ((ny + 2) * nx doubles) apart. */
    int stride = (int)((ny + 2) * nx * sizeof(double)), count[2] = {(int)(nx * sizeof(double)), (int)nz};

    double times[64], comm[64];
    for (int r = 0; r < reps; r++) {
        double *u = ub[me], *v = vb[me];
        void **uu = ub, **vv = vb;
        for (long z = 0; z < nz; z++)
            for (long y = -1; y <= ny; y++)
                for (long x = 0; x < nx; x++) {
                    long gy = me * ny + y;
                    u[at(ny, x, y, z)] = (y < 0 || y >= ny) ? 0.0 : u0_at(x, gy, z);
                    f[at(ny, x, y, z)] = (y < 0 || y >= ny) ? 0.0 : f_at(x, gy, z);
                }
        ARMCI_Barrier();
        double t0 = now_us(), c_us = 0;
        for (int s = 0; s < sweeps; s++) {
            double tc = now_us();
            /* my first plane -> the lower neighbour's upper ghost; my last -> the upper's lower */
            ARMCI_PutS(&u[at(ny, 0, 0, 0)], &stride, (char *)uu[lower] + at(ny, 0, ny, 0) * sizeof(double), &stride, count, 1,
                       lower);
            ARMCI_PutS(&u[at(ny, 0, ny - 1, 0)], &stride, (char *)uu[upper] + at(ny, 0, -1, 0) * sizeof(double), &stride,
                       count, 1, upper);
            ARMCI_AllFence();
            ARMCI_Barrier();
            c_us += now_us() - tc;
            sweep(ny, u, v, f);
            double *t = u;
            u = v;
            v = t;
            void **tt = uu;
            uu = vv;
            vv = tt;
            /* nobody may put into the plane array it still reads */
            ARMCI_Barrier();
        }
        times[r] = now_us() - t0;
        comm[r] = c_us;
        if (r == reps - 1) {
            /* The serial reference over the whole grid, compared with this slab. */
            long all = nz * (ny_all + 2) * nx;
            double *su = malloc(all * sizeof(double)), *sv = malloc(all * sizeof(double)), *sf = malloc(all * sizeof(double));
            for (long z = 0; z < nz; z++)
                for (long y = -1; y <= ny_all; y++)
                    for (long x = 0; x < nx; x++) {
                        int in = y >= 0 && y < ny_all;
                        su[at(ny_all, x, y, z)] = in ? u0_at(x, y, z) : 0.0;
                        sf[at(ny_all, x, y, z)] = in ? f_at(x, y, z) : 0.0;
                    }
            for (int s = 0; s < sweeps; s++) {
                fill_ghosts(ny_all, su);
                sweep(ny_all, su, sv, sf);
                double *t = su;
                su = sv;
                sv = t;
            }
            long bad = 0;
            for (long z = 0; z < nz; z++)
                for (long y = 0; y < ny; y++)
                    for (long x = 0; x < nx; x++)
                        bad += su[at(ny_all, x, me * ny + y, z)] != u[at(ny, x, y, z)];
            if (bad) {
                fprintf(stderr, "mg: rank %d: %ld points differ from the serial sweeps\n", me, bad);
                ARMCI_Error("mg: wrong grid", (int)bad);
            }
            free(su);
            free(sv);
            free(sf);
        }
    }
    qsort(times, reps, sizeof(double), cmp);
    qsort(comm, reps, sizeof(double), cmp);
    ARMCI_Barrier();
    if (me == 0)
        printf("{\"app\":\"mg\",\"impl\":\"%s\",\"n\":%ld,\"ranks\":%d,\"sweeps\":%d,\"time_us\":%.1f,\"min_us\":%.1f,"
               "\"max_us\":%.1f,\"comm_us\":%.1f,\"check\":\"ok\"}\n",
               impl, n, p, sweeps, times[reps / 2], times[0], times[reps - 1], comm[reps / 2]);
    free(f);
    ARMCI_Free(vb[me]);
    ARMCI_Free(ub[me]);
    ARMCI_Finalize();
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}
