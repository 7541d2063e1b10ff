/* message.h: ARMCI's message-passing helpers (rank, size, barrier, broadcast, reductions),
 * implemented by activerma (libarmci) with its own collectives. */
#ifndef ACTIVERMA_ARMCI_MESSAGE_H
#define ACTIVERMA_ARMCI_MESSAGE_H

#include <armci.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scopes of the *_scope calls (and armci_msg_bintree): SCOPE_ALL every rank, SCOPE_NODE the
 * ranks of the caller's SMP domain (armci.h's topology), SCOPE_MASTERS the first rank of every
 * domain (only they call). The group variants run over the group, whatever the scope. */
enum armci_scope_e { SCOPE_ALL, SCOPE_NODE, SCOPE_MASTERS };
/* Element types of armci_msg_gop_scope. */
enum armci_type_e { ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG, ARMCI_FLOAT, ARMCI_DOUBLE };

/* Global Arrays' ARMCI calls these around ARMCI_Init / ARMCI_Finalize. The MPI build's
 * armci_msg_init starts MPI (MPI_THREAD_MULTIPLE) unless it runs, and armci_msg_finalize ends
 * it; the smp build has nothing to start: messages work from ARMCI_Init on. */
void armci_msg_init(int *argc, char ***argv);
void armci_msg_finalize(void);

int armci_msg_me(void);
int armci_msg_nproc(void);
/* Ends the job with exit status `code` (1 if code is 0). */
void armci_msg_abort(int code);
/* Seconds since an arbitrary point in the past (monotonic). */
double armci_timer(void);

void armci_msg_barrier(void);
void armci_msg_group_barrier(ARMCI_Group *group);
/* Every rank receives root's len bytes of buffer. */
void armci_msg_bcast(void *buffer, int len, int root);
void armci_msg_brdcst(void *buffer, int len, int root);
void armci_msg_bcast_scope(int scope, void *buffer, int len, int root);
/* root is a rank of the group. */
void armci_msg_group_bcast_scope(int scope, void *buf, int len, int root, ARMCI_Group *group);

/* Tagged point-to-point messages. armci_msg_rcv takes the oldest message with `tag` from
 * `from` (at most buflen bytes: a longer one is an error) and stores its length in *msglen
 * (if not NULL); armci_msg_rcvany takes one from any rank and returns that rank. */
void armci_msg_snd(int tag, void *buffer, int len, int to);
void armci_msg_rcv(int tag, void *buffer, int buflen, int *msglen, int from);
int armci_msg_rcvany(int tag, void *buffer, int buflen, int *msglen);
/* The binary tree over the scope's ranks in rank order, as job ranks: Root its first rank, Up
 * the parent, Left / Right the children (-1: none). */
void armci_msg_bintree(int scope, int *Root, int *Up, int *Left, int *Right);
/* Selection: among the ranks with `contribute` set, the one whose buffer x (n bytes) starts
 * with the smallest ("min") or largest ("max") value of `type`; every rank receives that
 * rank's n bytes in x (the lowest rank wins a tie). */
void armci_msg_sel_scope(int scope, void *x, int n, char *op, int type, int contribute);
void armci_msg_sel(void *x, int n, char *op, int type, int contribute);

/* Element-wise reductions over all ranks, the result in x on every rank. op is one of "+",
 * "*", "max", "min", "absmax", "absmin" (the abs ones return absolute values). */
void armci_msg_igop(int *x, int n, char *op);
void armci_msg_lgop(long *x, int n, char *op);
void armci_msg_llgop(long long *x, int n, char *op);
void armci_msg_fgop(float *x, int n, char *op);
void armci_msg_dgop(double *x, int n, char *op);
void armci_msg_gop_scope(int scope, void *x, int n, char *op, int type);
void armci_msg_group_igop(int *x, int n, char *op, ARMCI_Group *group);
void armci_msg_group_lgop(long *x, int n, char *op, ARMCI_Group *group);
void armci_msg_group_llgop(long long *x, int n, char *op, ARMCI_Group *group);
void armci_msg_group_fgop(float *x, int n, char *op, ARMCI_Group *group);
void armci_msg_group_dgop(double *x, int n, char *op, ARMCI_Group *group);
void armci_msg_group_gop_scope(int scope, void *x, int n, char *op, int type, ARMCI_Group *group);
/* Classic ARMCI's "cluster" calls, over the caller's SMP domain (SCOPE_NODE): every rank of the
 * domain calls; clus_brdcst sends the domain's first rank's len bytes to the others.
 * armci_grp_clus_brdcst broadcasts among group ranks grp_master .. grp_master + grp_clus_nproc
 * - 1 of mastergroup, from grp_master; only those ranks call. */
void armci_msg_clus_brdcst(void *buf, int len);
void armci_msg_clus_igop(int *x, int n, char *op);
void armci_msg_clus_fgop(float *x, int n, char *op);
void armci_msg_clus_lgop(long *x, int n, char *op);
void armci_msg_clus_llgop(long long *x, int n, char *op);
void armci_msg_clus_dgop(double *x, int n, char *op);
void armci_grp_clus_brdcst(void *buf, int len, int grp_master, int grp_clus_nproc, ARMCI_Group *mastergroup);
/* Reductions whose result ARMCI promises at rank 0; here every rank receives it. */
void armci_msg_reduce(void *x, int n, char *op, int type);
void armci_msg_reduce_scope(int scope, void *x, int n, char *op, int type);

#ifdef __cplusplus
}
#endif

#endif /* ACTIVERMA_ARMCI_MESSAGE_H */
