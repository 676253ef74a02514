// The loop IR: what every graph value *is*, before anything is scheduled.
//
// Lowering turns each tensor-producing node into a Definition, not a loop:
//   - pointwise: a small expression DAG computing one element of the value
//     from load(value, index) terms, where an index maps the value's
//     coordinates affinely onto the loaded value's coordinates;
//   - view: an affine map from the view's coordinates onto its source's
//     (permute, transpose, expand, ...: no copy, ever);
//   - reduction: like pointwise, over the value's coordinates followed by
//     reduction coordinates, combined by sum / max / min / prod / argmax;
//   - scan: like pointwise, folded along one axis (cumsum): element i along
//     it combines the body's elements 0..i, in order;
//   - alias: the same memory as a realized source under other strides
//     (reshape of contiguous data, as_strided): realized without a kernel;
//   - extern: a call through the runtime table (GEMM) that writes a buffer;
//   - concat: parts written one after another along an axis, each by a loop
//     over its own shape (so no load is ever out of bounds);
//   - scatter: a start value, then each point of an iteration space folds
//     one element (adds: index_add, scatter_add, embedding's backward;
//     another fold: scatter_reduce's family; or writes: index_copy,
//     scatter) into coordinates of which one is an index tensor's value:
//     its loops run over the points, not the result.
// A load may be *bounded*: where its coordinates fall outside the loaded
// value's sizes it yields a constant instead of reading (pooling's padding:
// -inf for a max, 0 for a sum). See Expr::bounded.
// A load may be *gathered*: one of its coordinates is not affine but the
// value of another expression (an index tensor's element, loaded
// affinely): embedding, index_select, gather. See Expr::gathered.
// The scheduler (passes/schedule.h) then decides which definitions are
// inlined into their consumers and which are realized into buffers.
#ifndef KILN_CODEGEN_LOOP_IR_H_
#define KILN_CODEGEN_LOOP_IR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ir.h"

namespace kiln::ir {

// coordinate[r] = offsets[r] + sum_c coefficients[r][c] * variable[c]
struct AffineMap {
  int num_variables = 0;
  std::vector<std::vector<int64_t>> coefficients;  // [coordinate][variable]
  std::vector<int64_t> offsets;                    // [coordinate]

  int num_coordinates() const { return static_cast<int>(offsets.size()); }
  static AffineMap Identity(int rank);
  // Numpy-style broadcast: coordinates of a value of `source_sizes` read at
  // the coordinates of a value of rank `target_rank` (trailing dims aligned,
  // size-1 source dims pinned to 0).
  static AffineMap Broadcast(const std::vector<Dim>& source_sizes, int target_rank);
  // The map that applies `inner` first, then this.
  AffineMap After(const AffineMap& inner) const;
  bool IsIdentity() const;
  // This map with one more variable, the last, which coordinate
  // `coordinate` equals (its own row replaced): a gathered load's
  // coordinates, the extra variable standing for the index (Expr::gathered).
  AffineMap WithGatheredCoordinate(int coordinate) const;
  bool operator==(const AffineMap& other) const {
    return num_variables == other.num_variables && coefficients == other.coefficients &&
           offsets == other.offsets;
  }
  std::string ToString() const;  // "(i0, i1) -> (i1, i0)"
};

struct Expr {
  enum class Kind { kLoad, kConstant, kCall, kIndex, kSize };
  Kind kind = Kind::kConstant;
  DType dtype = DType::kFloat32;  // the type this expression computes in
  // kLoad: element `index(coordinates)` of `value`.
  int value = -1;
  AffineMap index;
  // kLoad, bounded: coordinates outside [0, size) in any dim of `value`
  // yield `fill` (in `dtype`) and touch no memory. Whatever the loop
  // variables' ranges make impossible is not tested (the emitter proves it
  // from the loop extents). The scheduler realizes every value read this
  // way (an inlined producer would be expanded at coordinates it does not
  // have), so a bounded load is always a guarded read of a buffer. A view
  // is bounded by its own sizes: coordinates inside them map inside its
  // source.
  bool bounded = false;
  double fill = 0;
  // kLoad, gathered (>= 0): coordinate `gathered` of `value` is the value of
  // exprs[operands[0]], an int64 expression over the same variables, not
  // index's row `gathered` (which must be all zero). An index outside
  // [0, size) of that dim yields `fill` and touches no memory; the other
  // coordinates are not tested (a gathered load is never also bounded).
  // Where it is resolved, the load's coordinates are an affine map of the
  // loop variables and one more, the last, standing for the index
  // (AffineMap::WithGatheredCoordinate): so views compose as for any load
  // and a kernel's read of the value says which dims it may touch
  // anywhere. Like a bounded load's, the value read is realized.
  int gathered = -1;
  // kConstant.
  double constant = 0;
  // kCall: a pointwise function from the emitter's table ("add", "relu").
  std::string function;
  std::vector<int> operands;  // indices into Definition::exprs (kLoad: the index)
  // kIndex: coordinate `variable` of the iteration space (arange, tril).
  int variable = -1;
  // kSize: the value of a symbolic size expression (a mean's count).
  SymExpr size;
};

struct Definition {
  enum class Kind {
    kInput,
    kPointwise,
    kReduction,
    kView,
    kAlias,
    kExtern,
    kConcat,
    kScan,
    kScatter
  };
  Kind kind = Kind::kInput;
  int node = -1;  // the node that defined the value (-1 for inputs)

  // kPointwise, kReduction, kScan and kScatter: exprs[root] is the element;
  // operands precede their users. A reduction or scan accumulates in the
  // root's dtype.
  std::vector<Expr> exprs;
  int root = -1;

  // kReduction: the body's variables are the value's coordinates followed by
  // one per reduced extent; `combiner` folds the body over those.
  // kScatter: the body's variables run over these extents (the points).
  std::vector<Dim> reduction_sizes;
  // "sum", "max", "min", "prod", "argmax", "argmin", "max_nan_unspecified",
  // and max pooling's "pool_max" / "pool_argmax" (emit/reduction.h); kScan:
  // "sum"; kScatter: "sum" (each 16-bit sum rounded to the dtype, as eager's
  // embedding_dense_backward) or "sum_rounded_once" (16-bit sums kept in
  // float32 and rounded at the end, as eager's index_add and scatter_add),
  // or "prod", "amax", "amin" (ops/scatter_reduce.cc), or "assign": the
  // point's element replaces the element (where several points name one,
  // the last in row-major order wins).
  std::string combiner;
  // argmax, argmin and pool_argmax: what is stored for the element kept.
  // -1: its flat position over the reduced dims; else exprs[position], an
  // int64 expression over the body's variables, and the result before any
  // element replaces the start is its value at reduced coordinates 0
  // (max pooling's flat position in the input plane, whose reduced
  // coordinates 0 are clamped into the input).
  // kScatter: exprs[position] is the index, an int64 expression over the
  // body's variables.
  int position = -1;

  // kAlias: element (c) is at source_storage[offset + sum strides[d] * c[d]].
  std::vector<SymExpr> strides;
  int64_t offset = 0;

  // kView: the source value's coordinates are map(view coordinates).
  // kAlias: the realized value whose storage it shares.
  // kScatter: every element starts as `source`'s at the same coordinates
  // (-1: as 0). Then, one point at a time in row-major order over
  // reduction_sizes, point p adds exprs[root] at coordinates map(p), except
  // coordinate `axis`, which is exprs[position] (map's row for it is all
  // zero). A point whose index falls outside [0, size) of that dim adds
  // nothing and touches no memory; with `checked_op` set, it stops the run
  // instead, before anything is written: the runtime's index_error hears
  // checked_op, the dim, the index and the size, and kiln_run returns
  // KILN_RUN_INDEX_ERROR (abi/kiln_abi.h).
  int source = -1;
  std::string checked_op;
  AffineMap map;

  // kExtern: runtime function ("mm") and its tensor operands.
  // kConcat: the parts, laid one after another along `axis`.
  // kScan: `axis` is the dim folded along. kScatter: see `source`.
  std::string function;
  std::vector<int> operands;
  int axis = -1;
};

// One Definition per graph value, indexed like Graph::values.
struct LoopProgram {
  std::vector<Definition> definitions;
};

// The coordinates load `load` reads when its definition's variables are
// `at`(loop variables): index.After(at), with one more variable for the
// index where the load is gathered.
AffineMap LoadCoordinates(const Expr& load, const AffineMap& at);

std::string ToString(const LoopProgram& program, const Graph& graph);

}  // namespace kiln::ir

#endif  // KILN_CODEGEN_LOOP_IR_H_
