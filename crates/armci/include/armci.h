/* armci.h: the ARMCI one-sided communication API, implemented by activerma (libarmci).
 *
 * Source compatible with programs written for ARMCI: the same names, types, constants and
 * meanings. Start programs with `activerma run -n N ./prog`. Every call that is given bad
 * input (a rank outside the job, a remote address outside that rank's ARMCI allocations, a
 * NULL buffer with a non-zero size, ...) prints what is wrong and ends the job with a non-zero
 * status, as ARMCI_Error does.
 *
 * Two builds share this header. The default (smp) build has no MPI and does not include
 * <mpi.h>. The MPI builds (scripts/install.sh --mpi openmpi|mpich) install it with
 * ARMCI_ACTIVERMA_MPI set to 1: they include <mpi.h>, declare the calls that take an MPI
 * communicator, and every ARMCI_Group carries one; programs there call MPI_Init themselves
 * (any thread level) and start under the MPI's own mpirun.
 */
#ifndef ACTIVERMA_ARMCI_H
#define ACTIVERMA_ARMCI_H

/* 1 in the MPI builds (scripts/install.sh --mpi rewrites this line), 0 in the smp build. */
#define ARMCI_ACTIVERMA_MPI 0

#if ARMCI_ACTIVERMA_MPI
#include <mpi.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Set by this implementation so programs can tell which ARMCI they were built against. */
#define ARMCI_ACTIVERMA 1

/* Element types of the accumulate calls; the order (and so the values) is ARMCI's. */
enum ARMCI_Acc_e {
    ARMCI_ACC_INT, /* int */
    ARMCI_ACC_LNG, /* long */
    ARMCI_ACC_FLT, /* float */
    ARMCI_ACC_DBL, /* double */
    ARMCI_ACC_CPL, /* complex float: two floats, real part first */
    ARMCI_ACC_DCP  /* complex double: two doubles, real part first */
};

typedef long armci_size_t;

/* Start-up and shut-down. Initialisation nests: every ARMCI_Init* call needs its
 * ARMCI_Finalize, and only the last one ends the runtime. */
int ARMCI_Init(void);
int ARMCI_Init_args(int *argc, char ***argv);
/* The thread level is the one MPI was initialized with (the smp build: any). */
int ARMCI_Init_thread(int armci_requested);
#if ARMCI_ACTIVERMA_MPI
/* ARMCI over `comm`, which must hold every rank of MPI_COMM_WORLD in the same order (a
 * communicator over part of the job ends the job with a message saying so). */
int ARMCI_Init_mpi_comm(MPI_Comm comm);
int ARMCI_Init_thread_comm(int armci_requested, MPI_Comm comm);
#endif
int ARMCI_Initialized(void);
int ARMCI_Finalize(void);
void ARMCI_Cleanup(void);
/* Prints msg and code, then ends the job with a non-zero exit status (never returns). */
void ARMCI_Error(const char *msg, int code);

/* Memory. ARMCI_Malloc is collective; each rank may ask for a different size (0 included: its
 * entry of base_ptrs is then NULL). base_ptrs[i] receives rank i's address of the block. */
int ARMCI_Malloc(void **base_ptrs, armci_size_t size);
int ARMCI_Free(void *ptr);
void *ARMCI_Malloc_local(armci_size_t size);
int ARMCI_Free_local(void *ptr);
/* ARMCI-MPI's memory-device variants: one kind of memory here, so the device is ignored. */
int ARMCI_Malloc_memdev(void **base_ptrs, armci_size_t size, const char *device);
int ARMCI_Free_memdev(void *ptr);
/* Accepted and ignored: the room for allocations is ACTIVERMA_SEGMENT_SIZE, set at job start. */
void ARMCI_Set_shm_limit(unsigned long shmemlimit);

/* Completion and synchronisation. */
void ARMCI_Barrier(void);
void ARMCI_Fence(int proc);
void ARMCI_AllFence(void);
void ARMCI_Access_begin(void *ptr);
void ARMCI_Access_end(void *ptr);

/* Contiguous transfers: src and dst are byte addresses, proc is the remote rank. */
void ARMCI_Copy(void *src, void *dst, int size);
int ARMCI_Get(void *src, void *dst, int size, int target);
int ARMCI_Put(void *src, void *dst, int size, int target);
/* dst[i] += scale * src[i] for the elements of type datatype in bytes (atomic per element). */
int ARMCI_Acc(int datatype, void *scale, void *src, void *dst, int bytes, int proc);

/* Strided transfers: count[0] is the byte length of the contiguous piece, count[1..levels]
 * the number of pieces along each further dimension, *_stride_ar[k] the byte distance between
 * consecutive pieces of dimension k+1. */
int ARMCI_PutS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels,
               int proc);
int ARMCI_GetS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels,
               int proc);
int ARMCI_AccS(int datatype, void *scale, void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[],
               int count[], int stride_levels, int proc);
/* The data first, then *flag = value on proc once the data is visible there. */
int ARMCI_Put_flag(void *src, void *dst, int size, int *flag, int value, int proc);
int ARMCI_PutS_flag(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[],
                    int stride_levels, int *flag, int value, int proc);
/* Local packing of a strided block at ptr (stride_arr and count as above) from / into the
 * contiguous buf. */
void armci_write_strided(void *ptr, int stride_levels, int stride_arr[], int count[], char *buf);
void armci_read_strided(void *ptr, int stride_levels, int stride_arr[], int count[], char *buf);

/* A handle of a non-blocking call. Programs allocate it (and set it up with ARMCI_INIT_HANDLE). */
typedef struct armci_hdl_s {
    int target;    /* rank of the last operation started with it, -1 if none */
    int aggregate; /* set by ARMCI_SET_AGGREGATE_HANDLE */
} armci_hdl_t;

void ARMCI_INIT_HANDLE(armci_hdl_t *hdl);
void ARMCI_SET_AGGREGATE_HANDLE(armci_hdl_t *handle);
void ARMCI_UNSET_AGGREGATE_HANDLE(armci_hdl_t *handle);
int ARMCI_NbPut(void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int ARMCI_NbGet(void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int ARMCI_NbAcc(int datatype, void *scale, void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int ARMCI_NbPutS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels,
                 int proc, armci_hdl_t *hdl);
int ARMCI_NbGetS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels,
                 int proc, armci_hdl_t *hdl);
int ARMCI_NbAccS(int datatype, void *scale, void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[],
                 int count[], int stride_levels, int proc, armci_hdl_t *hdl);
/* Wait returns 0 once the operation is complete; Test returns 0 if it is complete. */
int ARMCI_Wait(armci_hdl_t *hdl);
int ARMCI_Test(armci_hdl_t *hdl);
int ARMCI_WaitProc(int proc);
int ARMCI_WaitAll(void);

/* I/O vectors: descriptor k moves ptr_array_len pieces of `bytes` bytes each, from
 * src_ptr_array[i] to dst_ptr_array[i]. */
typedef struct {
    void **src_ptr_array;
    void **dst_ptr_array;
    int bytes;
    int ptr_array_len;
} armci_giov_t;

int ARMCI_PutV(armci_giov_t *iov, int iov_len, int proc);
int ARMCI_GetV(armci_giov_t *iov, int iov_len, int proc);
int ARMCI_AccV(int datatype, void *scale, armci_giov_t *iov, int iov_len, int proc);
int ARMCI_NbPutV(armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);
int ARMCI_NbGetV(armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);
int ARMCI_NbAccV(int datatype, void *scale, armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);

/* Single values. */
int ARMCI_PutValueInt(int src, void *dst, int proc);
int ARMCI_PutValueLong(long src, void *dst, int proc);
int ARMCI_PutValueFloat(float src, void *dst, int proc);
int ARMCI_PutValueDouble(double src, void *dst, int proc);
int ARMCI_NbPutValueInt(int src, void *dst, int proc, armci_hdl_t *hdl);
int ARMCI_NbPutValueLong(long src, void *dst, int proc, armci_hdl_t *hdl);
int ARMCI_NbPutValueFloat(float src, void *dst, int proc, armci_hdl_t *hdl);
int ARMCI_NbPutValueDouble(double src, void *dst, int proc, armci_hdl_t *hdl);
int ARMCI_GetValueInt(void *src, int proc);
long ARMCI_GetValueLong(void *src, int proc);
float ARMCI_GetValueFloat(void *src, int proc);
double ARMCI_GetValueDouble(void *src, int proc);

/* Mutexes: ARMCI_Create_mutexes is collective (each rank creates `count` of its own);
 * ARMCI_Lock(m, proc) takes mutex m of rank proc. An ARMCI_Unlock of a mutex this rank does
 * not hold ends the job with a message. */
int ARMCI_Create_mutexes(int count);
int ARMCI_Destroy_mutexes(void);
void ARMCI_Lock(int mutex, int proc);
void ARMCI_Unlock(int mutex, int proc);
/* Locks rank proc's memory [pstart, pend] (inclusive, inside one of its ARMCI_Malloc
 * allocations) against every other armci_lockmem of proc's memory, until armci_unlockmem(proc).
 * One memory lock per rank: any two locked ranges of one rank exclude each other. A process
 * holds at most one at a time on each rank. */
void armci_lockmem(void *pstart, void *pend, int proc);
void armci_unlockmem(int proc);

/* Notifications (Global Arrays' ARMCI): armci_notify(proc) makes every write of this rank to
 * proc so far complete and visible, then signals proc; it returns how many it has sent to
 * proc. armci_notify_wait(proc, &n) waits for the next signal from proc, stores its number in
 * n and returns how many have arrived from proc. */
int armci_notify(int proc);
int armci_notify_wait(int proc, int *pval);

/* Atomic read-modify-write on rank proc's *prem, the old value stored in *ploc:
 * FETCH_AND_ADD (int) and _LONG (long) add `value`; SWAP (int) and _LONG (long) store *ploc. */
enum ARMCI_Rmw_e { ARMCI_FETCH_AND_ADD, ARMCI_FETCH_AND_ADD_LONG, ARMCI_SWAP, ARMCI_SWAP_LONG };
int ARMCI_Rmw(int op, void *ploc, void *prem, int value, int proc);

/* Groups. The MPI builds keep a communicator over the group's members in `comm` (ARMCI-MPI's
 * field names; Global Arrays runs its own collectives on it); the smp build has two unused
 * pointers there. Programs read rank and size (or better, call ARMCI_Group_rank / _size). */
typedef struct {
#if ARMCI_ACTIVERMA_MPI
    MPI_Comm comm;
    MPI_Comm noncoll_pgroup_comm; /* the same communicator as comm */
#else
    void *comm_slot[2];
#endif
    int *grp_to_abs;    /* group rank -> rank in the job */
    int *abs_to_grp;    /* rank in the job -> group rank, -1 if not a member */
    int rank;           /* this rank's group rank, -1 if not a member */
    int size;
} ARMCI_Group;

void ARMCI_Group_create(int grp_size, int *pid_list, ARMCI_Group *group_out);
void ARMCI_Group_create_child(int grp_size, int *pid_list, ARMCI_Group *group_out, ARMCI_Group *group_parent);
void ARMCI_Group_free(ARMCI_Group *group);
int ARMCI_Group_rank(ARMCI_Group *group, int *rank);
void ARMCI_Group_size(ARMCI_Group *group, int *size);
void ARMCI_Group_set_default(ARMCI_Group *group);
void ARMCI_Group_get_default(ARMCI_Group *group_out);
void ARMCI_Group_get_world(ARMCI_Group *group_out);
int ARMCI_Absolute_id(ARMCI_Group *group, int group_rank);
int ARMCI_Malloc_group(void **ptr_arr, armci_size_t bytes, ARMCI_Group *group);
int ARMCI_Free_group(void *ptr, ARMCI_Group *group);
int ARMCI_Malloc_group_memdev(void **ptr_arr, armci_size_t bytes, ARMCI_Group *group, const char *device);
#if ARMCI_ACTIVERMA_MPI
/* The group's communicator (as group->comm). */
MPI_Comm armci_group_comm(ARMCI_Group *group);
#endif

#include <message.h>

/* Topology: SMP domains. Every rank of my domain (ARMCI_Same_node) has ARMCI_Malloc and
 * ARMCI_Malloc_group addresses this process may load from and store to directly (group blocks
 * come from each rank's group pool, ACTIVERMA_ARMCI_GROUP_POOL bytes set aside at ARMCI_Init;
 * with the setting 0 they are private memory, reached through ARMCI calls only, and a group
 * allocation that does not fit in the pool fails with a message). A domain is a host: the
 * whole job or an emulated host on the smp conduit; on the mpi conduit the ranks of one node,
 * which map each other's memory at its owners' addresses. A rank whose memory is not shared
 * (alone on its node, ACTIVERMA_MPI_SHARED=off, or a node where those addresses could not be
 * had) is its own domain, as every rank is in ARMCI-MPI. ARMCI_Uses_shm: 1 when a domain holds
 * several ranks. */
enum armci_domain_e { ARMCI_DOMAIN_SMP };
typedef int armci_domain_t;
int armci_domain_nprocs(armci_domain_t domain, int id);
int armci_domain_id(armci_domain_t domain, int glob_proc_id);
int armci_domain_glob_proc_id(armci_domain_t domain, int id, int loc_proc_id);
int armci_domain_my_id(armci_domain_t domain);
int armci_domain_count(armci_domain_t domain);
int armci_domain_same_id(armci_domain_t domain, int proc);
int ARMCI_Same_node(int proc);

int ARMCI_Uses_shm(void);
int ARMCI_Uses_shm_grp(ARMCI_Group *group);

/* The profiling interface: every call above that ARMCI-MPI also exports under a PARMCI_ name
 * (and the two barriers as parmci_msg_*), which runs this library's own function. A profiling
 * layer defines ARMCI_Put itself, records the call and calls PARMCI_Put; calls inside the
 * library never go through its ARMCI_ names, so the layer sees the program's calls only. */
int PARMCI_Acc(int datatype, void *scale, void *src, void *dst, int bytes, int proc);
int PARMCI_AccS(int datatype, void *scale, void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc);
int PARMCI_AccV(int datatype, void *scale, armci_giov_t *iov, int iov_len, int proc);
void PARMCI_Access_begin(void *ptr);
void PARMCI_Access_end(void *ptr);
void PARMCI_AllFence(void);
void PARMCI_Barrier(void);
int PARMCI_Create_mutexes(int count);
int PARMCI_Destroy_mutexes(void);
void PARMCI_Fence(int proc);
int PARMCI_Finalize(void);
int PARMCI_Free(void *ptr);
int PARMCI_Free_local(void *ptr);
int PARMCI_Free_memdev(void *ptr);
int PARMCI_Get(void *src, void *dst, int size, int target);
int PARMCI_GetS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc);
int PARMCI_GetV(armci_giov_t *iov, int iov_len, int proc);
double PARMCI_GetValueDouble(void *src, int proc);
float PARMCI_GetValueFloat(void *src, int proc);
int PARMCI_GetValueInt(void *src, int proc);
long PARMCI_GetValueLong(void *src, int proc);
int PARMCI_Init(void);
int PARMCI_Init_args(int *argc, char ***argv);
int PARMCI_Init_thread(int armci_requested);
int PARMCI_Initialized(void);
void PARMCI_Lock(int mutex, int proc);
int PARMCI_Malloc(void **base_ptrs, armci_size_t size);
int PARMCI_Malloc_group_memdev(void **ptr_arr, armci_size_t bytes, ARMCI_Group *group, const char *device);
void *PARMCI_Malloc_local(armci_size_t size);
int PARMCI_Malloc_memdev(void **base_ptrs, armci_size_t size, const char *device);
int PARMCI_NbAcc(int datatype, void *scale, void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int PARMCI_NbAccS(int datatype, void *scale, void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc, armci_hdl_t *hdl);
int PARMCI_NbAccV(int datatype, void *scale, armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);
int PARMCI_NbGet(void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int PARMCI_NbGetS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc, armci_hdl_t *hdl);
int PARMCI_NbGetV(armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);
int PARMCI_NbPut(void *src, void *dst, int bytes, int proc, armci_hdl_t *hdl);
int PARMCI_NbPutS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc, armci_hdl_t *hdl);
int PARMCI_NbPutV(armci_giov_t *iov, int iov_len, int proc, armci_hdl_t *handle);
int PARMCI_NbPutValueDouble(double src, void *dst, int proc, armci_hdl_t *hdl);
int PARMCI_NbPutValueFloat(float src, void *dst, int proc, armci_hdl_t *hdl);
int PARMCI_NbPutValueInt(int src, void *dst, int proc, armci_hdl_t *hdl);
int PARMCI_NbPutValueLong(long src, void *dst, int proc, armci_hdl_t *hdl);
int PARMCI_Put(void *src, void *dst, int size, int target);
int PARMCI_PutS(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int proc);
int PARMCI_PutS_flag(void *src_ptr, int src_stride_ar[], void *dst_ptr, int dst_stride_ar[], int count[], int stride_levels, int *flag, int value, int proc);
int PARMCI_PutV(armci_giov_t *iov, int iov_len, int proc);
int PARMCI_PutValueDouble(double src, void *dst, int proc);
int PARMCI_PutValueFloat(float src, void *dst, int proc);
int PARMCI_PutValueInt(int src, void *dst, int proc);
int PARMCI_PutValueLong(long src, void *dst, int proc);
int PARMCI_Put_flag(void *src, void *dst, int size, int *flag, int value, int proc);
int PARMCI_Rmw(int op, void *ploc, void *prem, int value, int proc);
int PARMCI_Test(armci_hdl_t *hdl);
void PARMCI_Unlock(int mutex, int proc);
int PARMCI_Wait(armci_hdl_t *hdl);
int PARMCI_WaitAll(void);
int PARMCI_WaitProc(int proc);
#if ARMCI_ACTIVERMA_MPI
int PARMCI_Init_thread_comm(int armci_requested, MPI_Comm comm);
#endif
void parmci_msg_barrier(void);
void parmci_msg_group_barrier(ARMCI_Group *group);

#ifdef __cplusplus
}
#endif

#endif /* ACTIVERMA_ARMCI_H */
