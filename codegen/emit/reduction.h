// Reduction kernels' bodies: accumulators, the loops over the reduced
// dims, the fold, the lanes' combine and the store.
//
// Requires: a kReduction kernel whose definition names a combiner (sum,
// prod, max, max_nan_unspecified, min, argmax, argmin, pool_max,
// pool_argmax), with the loops over its output dims already open at
// `site.indent`.
// Guarantees: the result is stored at `site.target`; every block opened is
// closed; generated names are the function's (no clash with other kernels
// of the group but `acc`, `acc_index` and `lanes`, which the caller scopes).
#ifndef KILN_CODEGEN_EMIT_REDUCTION_H_
#define KILN_CODEGEN_EMIT_REDUCTION_H_

#include <string>

#include "absl/status/status.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/passes/schedule.h"

namespace kiln {

// A reduction folding down columns (FoldsColumns) runs the loop over one
// output dim itself, innermost, over [begin, end): C expressions.
struct Columns {
  int dim = -1;  // -1: none
  std::string begin, end;
};

// Where one loop kernel's body goes in its group's function: inside the
// loops over its output dims.
struct KernelSite {
  const Kernel& kernel;
  int outer_rank;      // loops the group shares (a row buffer's index leaves them out)
  std::string indent;  // the body's, inside every loop over the output
  std::string target;  // the output element to store, "p0[i0 * 64 + i1]"
  Columns columns;     // a reduction folding down columns: the loop it runs itself
};

absl::Status EmitReductionBody(const KernelSite& site, FunctionWriter& function);

// Whether a group of one reduction kernel folds down columns: its last outer
// dim is a column of what it reads: every element read is one element apart
// from the next column's, or the same, and none that moves along the columns
// is one element apart along the innermost reduced dim — a bias gradient,
// summed over the batch. Folding each column
// in turn would read with a stride; such a group leaves its last outer loop
// to the reduction (KernelSite::column), which runs it innermost, so the
// folds of neighbouring columns are one vector.
bool FoldsColumns(const KernelGroup& group, const EmitInputs& in);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_REDUCTION_H_
