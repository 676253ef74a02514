// Sorting and selection along rows (kiln_abi.h's kiln_select): sort,
// argsort, topk, kthvalue, median, nanmedian and mode in O(n log n) per
// row or better, rows spread across the runtime's pool.
//
// Equal elements come in the order eager PyTorch's CPU kernels give them,
// by the same algorithms: sort is stable; median and nanmedian are torch's
// std::nth_element with ties broken by position (the middle of the stable
// sort); topk is torch's std::partial_sort or std::nth_element over (value,
// position) pairs, kthvalue its quickselect and mode its std::sort of
// pairs, so the position returned among equal elements is the one eager
// returns.
#ifndef KILN_CLIENT_RUNTIME_SORT_H_
#define KILN_CLIENT_RUNTIME_SORT_H_

#include <cstdint>

#include "abi/kiln_abi.h"
#include "client/runtime/thread_pool.h"

namespace kiln {

// Writes `select`'s positions for every row of `x` into `out` (see
// kiln_select). The caller has checked the arguments: k in [0, n] for
// TOPK, in [1, n] for KTHVALUE, n >= 1 for the ops of width 1.
void SelectRows(ThreadPool& pool, const kiln_select& select, const void* x, int64_t* out);

}  // namespace kiln

#endif  // KILN_CLIENT_RUNTIME_SORT_H_
