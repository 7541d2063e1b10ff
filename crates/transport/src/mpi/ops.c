/* MPI handles the mpi-sys bindings do not export (its rsmpi shim stops at the arithmetic and
 * logical operations), used with the choice of crates/transport/src/rma_calls.rs (mpi/rma.rs, mpi/started.rs). In Open MPI an MPI_Op is
 * the address of a library object and in MPICH an integer: only C code compiled against the
 * MPI's own header knows either. */
#include <mpi.h>

const MPI_Op ARMA_MPI_REPLACE = MPI_REPLACE;
const MPI_Op ARMA_MPI_NO_OP = MPI_NO_OP;
