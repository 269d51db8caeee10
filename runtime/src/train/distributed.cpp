// Distributed (halformer/distributed.h): MPI when launched by mpirun.
#include "halformer/distributed.h"
#include "halformer/error.h"

#include <cstdlib>
#include <string>

#ifdef HALFORMER_HAS_MPI
#include <mpi.h>
#endif

namespace halformer {

Distributed &Distributed::get() {
    static Distributed d;
    return d;
}

Distributed::Distributed() {
    const char *size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!size || std::atoi(size) <= 1) return;
#ifdef HALFORMER_HAS_MPI
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    mpi_ = true;
#else
    throw Error(std::string("started by mpirun with ") + size +
                " ranks, but this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

Distributed::~Distributed() {
#ifdef HALFORMER_HAS_MPI
    if (mpi_) MPI_Finalize();
#endif
}

// Large buffers go in chunks: MPI counts are ints.
void Distributed::sum(float *data, size_t n) {
#ifdef HALFORMER_HAS_MPI
    if (!mpi_) return;
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {
        const int c = (int)std::min(n - off, (size_t)1 << 30);
        MPI_Allreduce(MPI_IN_PLACE, data + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
#else
    (void)data;
    (void)n;
#endif
}

void Distributed::sum(double *data, size_t n) {
#ifdef HALFORMER_HAS_MPI
    if (!mpi_) return;
    MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)data;
    (void)n;
#endif
}

void Distributed::barrier() {
#ifdef HALFORMER_HAS_MPI
    if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void Distributed::abort(int code) {
#ifdef HALFORMER_HAS_MPI
    if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::exit(code);
}

}  // namespace halformer
