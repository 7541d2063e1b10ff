/* A rank that dies mid-job: rank 1 kills itself (SIGKILL) after the first barrier; every other
 * rank waits in a second barrier that can never complete. The launcher (srun, mpirun) must end
 * the job in bounded time and name the task; tests/slurm/run.sh checks both.
 */
#include <activerma.h>
#include <signal.h>
#include <stdio.h>

int main(void) {
    if (arma_init() != ARMA_OK || arma_barrier() != ARMA_OK) {
        fprintf(stderr, "dies: %s\n", arma_last_error());
        return 1;
    }
    if (arma_rank() == 1)
        raise(SIGKILL);
    arma_barrier();
    fprintf(stderr, "rank %d: the barrier completed without rank 1\n", arma_rank());
    return 1;
}
