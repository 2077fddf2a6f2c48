#include "runtime/compute_threads.h"

#ifdef LLMUX_WITH_OPENMP
#include <omp.h>
#endif

namespace llmux::runtime {

void ReleaseComputeThreads() {
#ifdef LLMUX_WITH_OPENMP
  omp_pause_resource_all(omp_pause_soft);
#endif
}

}  // namespace llmux::runtime
