// The C text the emitter builds every function from: symbolic sizes,
// element offsets, storage conversions, loop headers. Pure functions of
// their arguments, so the same program always gives the same text.
#ifndef KILN_CODEGEN_EMIT_C_TEXT_H_
#define KILN_CODEGEN_EMIT_C_TEXT_H_

#include <string>
#include <vector>

#include "codegen/ir.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"

namespace kiln {

// The C expression of a symbolic integer: symbols are kiln_run's
// `symbols[i]`.
std::string SymC(const ir::SymExpr& expr);

// The C expression of a size.
std::string Extent(const ir::Dim& dim);

// Where a realized value's elements are: element c is at
// storage[offset + sum strides[d] * c[d]].
struct Layout {
  std::vector<ir::SymExpr> strides;
  ir::SymExpr offset;
};

// `value`'s layout in its storage: an input's strides, an alias's strides
// and offset (added up down its alias chain), else contiguous.
Layout MemoryLayout(const ir::Graph& graph, const ir::LoopProgram& program, int value);

// An element offset, linear in the loop variables i0, i1, ...
struct Linear {
  ir::SymExpr constant;
  std::vector<ir::SymExpr> coefficients;  // per loop variable

  std::string ToString() const;
};

// The offset of element map(loop variables) in `layout`.
Linear Offset(const Layout& layout, const ir::AffineMap& map);

// A row buffer holds one row: the group's outer loop variables drop out of
// its index (reads of it are row-local by construction). Other storages
// keep `offset` as it is.
Linear ForStorage(Linear offset, const Storage& storage, int outer_rank);

// Storage <-> compute conversion of the element `text` of type `stored`.
std::string FromStorage(const std::string& text, ir::DType stored);
std::string ToStorage(const std::string& text, ir::DType stored);

// kiln_run's local pointer to a storage: "b3".
std::string StorageName(int storage);

// A storage's element type: its first value's, or (an output written by a
// copy, which holds no value) the output's.
ir::DType StorageDType(const ir::Graph& graph, const Storage& storage);

// The storage a kernel writes; -1 when a copy's output has none (a broken
// plan, which check_plan refuses first).
int WrittenStorage(const Kernel& kernel, const BufferPlan& plan);

// The header of a loop of variable i<variable> over [0, extent), opening a
// block; an extent of 1 is a block binding the variable to 0.
std::string LoopHeader(int variable, const std::string& extent, const std::string& indent);

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_C_TEXT_H_
