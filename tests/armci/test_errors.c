/* Bad input ends the program with a non-zero status and a message that names the call and the
 * argument. Each case runs in a forked child (the checks happen before any communication, so
 * the child needs none of the runtime's threads); the parent checks the child's exit status and
 * its stderr. `test_errors abort` instead makes rank 1 call ARMCI_Error while the others wait
 * in a barrier, and `test_errors pool_full` makes the even ranks allocate more than the group
 * pool over their group: run.sh checks that the whole job then fails with the message. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <armcix.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static void **base;
static int me, n;
static char buf[64];

static void run_case(const char *what, const char *want, void (*f)(void)) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/armci-err-%d-%d.txt", (int)getpid(), me);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork");
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        f();
        _exit(0); /* the call returned: a failure */
    }
    int st;
    waitpid(pid, &st, 0);
    char text[2048] = {0};
    FILE *fp = fopen(path, "r");
    if (fp) {
        size_t k = fread(text, 1, sizeof text - 1, fp);
        text[k] = 0;
        fclose(fp);
    }
    unlink(path);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s: the child exited %s %d (stderr: %s)", what,
           WIFEXITED(st) ? "with status" : "by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), text);
    EXPECT(strstr(text, want) != NULL, "%s: stderr lacks \"%s\": %s", what, want, text);
    if (me == 0)
        printf("  %-40s -> %s", what, text);
}

static void fence_rank_too_big(void) { ARMCI_Fence(n); }
static void wait_proc_negative(void) { ARMCI_WaitProc(-2); }
static void put_rank_too_big(void) { ARMCI_Put(buf, base[0], 8, n); }
static void put_rank_negative(void) { ARMCI_Put(buf, base[0], 8, -1); }
static void put_null_src(void) { ARMCI_Put(NULL, base[0], 8, 0); }
static void put_negative_size(void) { ARMCI_Put(buf, base[0], -4, 0); }
static void put_outside(void) { ARMCI_Put(buf, buf, 8, 0); }
static void get_past_end(void) { ARMCI_Get((char *)base[0] + 1020, buf, 8, 0); }
static void puts_bad_levels(void) {
    int c[2] = {8, 1}, s[1] = {8};
    ARMCI_PutS(buf, s, base[0], s, c, -1, 0);
}
static void puts_past_end(void) {
    int c[2] = {8, 200}, s[1] = {8};
    ARMCI_PutS(buf, s, base[0], s, c, 1, 0);
}
static void acc_bad_type(void) {
    int one = 1;
    ARMCI_Acc(9, &one, buf, base[0], 8, 0);
}
static void rmw_bad_op(void) {
    int v;
    ARMCI_Rmw(7, &v, base[0], 1, 0);
}
static void lock_without_mutexes(void) { ARMCI_Lock(0, 0); }
static void lock_out_of_range_after(void) { ARMCI_Lock(5, 0); }
static void putv_null_array(void) {
    armci_giov_t iov = {NULL, NULL, 8, 3};
    ARMCI_PutV(&iov, 1, 0);
}
static void getv_piece_outside(void) {
    void *src[2] = {base[0], (char *)base[0] + 2048}, *dst[2] = {buf, buf + 8};
    armci_giov_t iov = {src, dst, 8, 2};
    ARMCI_GetV(&iov, 1, 0);
}
static void putv_null_piece(void) {
    void *src[2] = {buf, NULL}, *dst[2] = {base[0], (char *)base[0] + 8};
    armci_giov_t iov = {src, dst, 8, 2};
    ARMCI_PutV(&iov, 1, 0);
}
static void forged_mutex_handle(void) { ARMCIX_Lock_hdl((armcix_mutex_hdl_t)buf, 0, 0); }
static void notify_rank_too_big(void) { armci_notify(n); }
static void user_error(void) { ARMCI_Error("the program gave up", 3); }
static void unlock_not_held(void) { ARMCI_Unlock(1, 0); }
static void unlock_again(void) { ARMCI_Unlock(0, me); }
static void unlockmem_not_held(void) { armci_unlockmem(0); }
static void lockmem_outside(void) { armci_lockmem(buf, buf + 8, 0); }
static void lockmem_backwards(void) { armci_lockmem((char *)base[0] + 8, base[0], 0); }
static void grp_clus_brdcst_past_the_group(void) {
    ARMCI_Group world;
    ARMCI_Group_get_world(&world);
    armci_grp_clus_brdcst(buf, 8, n - 1, 2, &world);
}

int main(int argc, char **argv) {
    ARMCI_Init();
    me = armci_msg_me();
    n = armci_msg_nproc();
    if (argc > 1 && strcmp(argv[1], "abort") == 0) {
        if (me == 1)
            ARMCI_Error("deliberate failure of rank 1", 7);
        ARMCI_Barrier();
        return 0; /* not reached: the launcher ends the job */
    }
    if (argc > 1 && strcmp(argv[1], "pool_full") == 0) {
        /* A group allocation larger than the group pool: every member fails with the message
         * (none waits for the others), and the job ends. */
        int evens = (n + 1) / 2, list[64];
        for (int i = 0; i < evens; i++) list[i] = 2 * i;
        ARMCI_Group even;
        ARMCI_Group_create(evens, list, &even);
        void *b[64];
        if (me % 2 == 0) ARMCI_Malloc_group(b, 1L << 40, &even);
        ARMCI_Barrier();
        return 0; /* not reached */
    }
    base = malloc(sizeof(void *) * n);
    ARMCI_Malloc(base, 1024);
    run_case("ARMCI_Put to rank n", "ARMCI_Put: argument proc", put_rank_too_big);
    run_case("ARMCI_Put to rank -1", "argument proc = -1 is not a rank", put_rank_negative);
    run_case("ARMCI_Fence of rank n", "ARMCI_Fence: argument proc", fence_rank_too_big);
    run_case("ARMCI_WaitProc of rank -2", "ARMCI_WaitProc: argument proc = -2 is not a rank", wait_proc_negative);
    run_case("ARMCI_Put from NULL", "argument src is NULL", put_null_src);
    run_case("ARMCI_Put of -4 bytes", "argument bytes = -4 is negative", put_negative_size);
    run_case("ARMCI_Put to a non-ARMCI address", "is not inside an ARMCI_Malloc allocation of rank 0", put_outside);
    run_case("ARMCI_Get past the end", "ARMCI_Get: argument src", get_past_end);
    run_case("ARMCI_PutS with -1 levels", "stride_levels = -1", puts_bad_levels);
    run_case("ARMCI_PutS past the end", "ARMCI_PutS: argument dst_ptr", puts_past_end);
    run_case("ARMCI_Acc of type 9", "ARMCI_Acc: argument datatype = 9", acc_bad_type);
    run_case("ARMCI_Rmw op 7", "ARMCI_Rmw: argument op = 7", rmw_bad_op);
    run_case("ARMCI_Lock before Create_mutexes", "ARMCI_Lock: no mutexes exist", lock_without_mutexes);
    run_case("ARMCI_PutV with NULL arrays", "ARMCI_PutV: iov[0] has a NULL pointer array", putv_null_array);
    run_case("ARMCI_GetV with a piece past the end", "ARMCI_GetV: argument iov[0].src_ptr_array[1]", getv_piece_outside);
    run_case("ARMCI_PutV with a NULL piece", "ARMCI_PutV: argument iov[0].src_ptr_array[1] is NULL", putv_null_piece);
    run_case("ARMCIX_Lock_hdl with a forged handle", "ARMCIX_Lock_hdl: argument hdl", forged_mutex_handle);
    run_case("armci_notify to rank n", "armci_notify: argument proc", notify_rank_too_big);
    run_case("ARMCI_Error", "the program gave up (code 3)", user_error);
    run_case("armci_unlockmem without armci_lockmem", "armci_unlockmem: this rank holds no memory lock on rank 0", unlockmem_not_held);
    run_case("armci_lockmem of a non-ARMCI range", "armci_lockmem: argument pstart", lockmem_outside);
    run_case("armci_lockmem with pend before pstart", "armci_lockmem: argument pend", lockmem_backwards);
    run_case("armci_grp_clus_brdcst past the group", "armci_grp_clus_brdcst: arguments grp_master", grp_clus_brdcst_past_the_group);
    ARMCI_Create_mutexes(2);
    run_case("ARMCI_Lock of mutex 5", "ARMCI_Lock: argument mutex = 5 is out of range", lock_out_of_range_after);
    run_case("ARMCI_Unlock without ARMCI_Lock", "ARMCI_Unlock: mutex 1 of rank 0 is not held by this rank", unlock_not_held);
    /* Locked and unlocked here; the child's second unlock is refused before any
     * communication. */
    ARMCI_Lock(0, me);
    ARMCI_Unlock(0, me);
    run_case("a second ARMCI_Unlock", "ARMCI_Unlock: mutex 0 of rank", unlock_again);
    ARMCI_Destroy_mutexes();
    ARMCI_Barrier();
    ARMCI_Free(base[me]);
    ARMCI_Finalize();
    if (me == 0)
        printf("test_errors: ok on %d ranks\n", n);
    return 0;
}
