/* armcix.h: ARMCI extensions as ARMCI-MPI names them, implemented by activerma (libarmci):
 * splitting and duplicating groups, sets of mutexes over a group (a library can own one
 * beside the program's ARMCI_Create_mutexes), and explicit progress. */
#ifndef ACTIVERMA_ARMCIX_H
#define ACTIVERMA_ARMCIX_H

#include <armci.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over parent's members: the ranks passing the same color form a new group,
 * ordered by key, then by their parent rank. A negative color (MPI_UNDEFINED) joins none:
 * new_group is then empty (rank -1, size 0) and only ARMCI_Group_free accepts it. */
int ARMCIX_Group_split(ARMCI_Group *parent, int color, int key, ARMCI_Group *new_group);
/* Collective over parent's members: a new group of the same members in the same order. */
int ARMCIX_Group_dup(ARMCI_Group *parent, ARMCI_Group *new_group);

/* A set of mutexes, opaque. */
typedef struct armcix_mutex_hdl_s *armcix_mutex_hdl_t;

/* Collective over the group's members: each creates `count` mutexes of its own (counts may
 * differ). The calls below name a mutex by its number and its owner's rank in the group. */
armcix_mutex_hdl_t ARMCIX_Create_mutexes_hdl(int count, ARMCI_Group *pgroup);
/* Collective over the group's members; the handle is invalid afterwards. */
int ARMCIX_Destroy_mutexes_hdl(armcix_mutex_hdl_t hdl);
/* Fair: waiting ranks take the mutex in the order they asked. */
void ARMCIX_Lock_hdl(armcix_mutex_hdl_t hdl, int mutex, int proc);
/* 0: taken; non-zero: another rank holds the mutex or waits for it (nothing changed). */
int ARMCIX_Trylock_hdl(armcix_mutex_hdl_t hdl, int mutex, int proc);
/* Writes made while holding the mutex are visible to its next holder. */
void ARMCIX_Unlock_hdl(armcix_mutex_hdl_t hdl, int mutex, int proc);

/* Serves requests waiting for this rank (atomics on its group allocations, transfers under
 * the buffered protocols) while the program computes without other ARMCI calls. */
void ARMCIX_Progress(void);

#ifdef __cplusplus
}
#endif

#endif
