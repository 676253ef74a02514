// Each thread's scratch arena for the kernels it runs, grown as needed and
// reused across calls, so that a steady-state Run allocates nothing.
#ifndef KILN_CLIENT_SCRATCH_H_
#define KILN_CLIENT_SCRATCH_H_

#include <cstdint>

namespace kiln {

// This thread's arena of at least `bytes`; nullptr when the memory is not
// there. After a TrimScratch, an arena more than twice what the call needs
// is given back first.
void* ThreadScratch(int64_t bytes);

// Has every thread trim its arena on its next ThreadScratch call.
void TrimScratch();

}  // namespace kiln

#endif  // KILN_CLIENT_SCRATCH_H_
