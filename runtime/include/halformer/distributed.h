// Data-parallel training over Open MPI (Debian's libopenmpi-dev): every rank
// reads its own shard of every batch (train_data.h, shard()), the gradient
// sums are added across ranks with MPI_Allreduce, and only rank 0 writes
// checkpoints and logs.
//
//   mpirun -np 2 halformer train OUT ...     (each process: rank r of 2)
//
// MPI is initialised only when the process was started by mpirun (Open MPI
// sets OMPI_COMM_WORLD_SIZE); a plain run is rank 0 of 1 and never touches
// MPI. In a build without MPI, a run under mpirun with more than one rank is
// an Error.
#pragma once

#include <cstddef>
#include <cstdint>

namespace halformer {

class Distributed {
public:
    // The process's communicator (initialised on first use).
    static Distributed &get();
    int rank() const { return rank_; }
    int world() const { return world_; }
    bool leader() const { return rank_ == 0; }
    // In-place sums across ranks (no-ops on one rank).
    void sum(float *data, size_t n);
    void sum(double *data, size_t n);
    void barrier();
    // Ends every rank (after an error on one of them).
    [[noreturn]] void abort(int code);
    ~Distributed();

private:
    Distributed();
    int rank_ = 0, world_ = 1;
    bool mpi_ = false;
};

}  // namespace halformer
