// Pass: plan buffers.
//
// Requires: a schedule.
// Guarantees: every realized value has a storage: its graph input, its graph
// output, or a slice of one scratch arena; arena slices of values alive at
// the same time never overlap (liveness by kernel index). A value is
// computed in place in the storage of a value it reads when that value dies
// in the same kernel, is read there only at the element being written, and
// is not observable (not a graph input or output); and a value written and
// read only inside one kernel group (softmax's exp) keeps just one row, on
// the stack, when a row is small — the mm result of
// relu(x @ x.T + 1) lives in the output buffer, but in
// (x @ x.T, relu(x @ x.T + 1)) it is output 0 and stays apart.
//
// An output the graph says is an input's new value (Graph::output_aliases)
// is written in that input's storage, which then holds both values, when
// docs/ARCHITECTURE.md's "Outputs that are inputs" proves it safe: a
// pointwise kernel of its own writes it (or a scatter, whose points then
// may not read the input: a step writes only the rows they name), the
// input has its dtype and sizes and is contiguous, that kernel reads the
// input last, only at identity, and no other kernel of its group reads the
// input. Nothing is computed in
// place into such a storage. Otherwise a note says which condition failed.
#ifndef KILN_CODEGEN_PASSES_PLAN_BUFFERS_H_
#define KILN_CODEGEN_PASSES_PLAN_BUFFERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/schedule.h"

namespace kiln {

struct Storage {
  // kRow: a value that lives and dies inside one kernel group, row by row:
  // one row of it (bytes = one row), on the stack of the group's loop, or
  // in the runtime's per-thread scratch when its length is symbolic.
  enum class Kind { kInput, kOutput, kScratch, kRow };
  Kind kind = Kind::kScratch;
  int index = -1;  // kInput / kOutput: position; kRow: the group
  // kOutput: the input whose storage it is (an output alias the planner
  // proved safe, see below), or -1.
  int aliased_input = -1;
  int64_t offset = 0;  // kScratch: byte offset in the arena (static slices)
  ir::SymExpr bytes;   // size: symbolic when the value's sizes are
  int slot = -1;       // symbolic kScratch: its run-time slot (BufferPlan::slots)

  bool is_symbolic() const { return !bytes.is_constant(); }
  std::vector<int> values;  // the values it holds, in order
};

struct BufferPlan {
  std::vector<int> storage_of;  // per value; -1 when not realized
  // Per value: the realized value whose memory it is (itself, unless it is
  // an alias: then the root of its alias chain).
  std::vector<int> alias_root;
  std::vector<Storage> storages;
  // The static part of the arena. Symbolic slices follow it in slots, laid
  // out at run time in order, each 64-byte aligned: a slot holds slices of
  // one symbolic unit (bytes c * s0, say) whose live intervals do not
  // overlap, and is as large as the largest.
  int64_t scratch_bytes = 0;
  std::vector<ir::SymExpr> slots;  // bytes of each slot
  bool symbolic_scratch = false;
  std::vector<std::string> notes;  // in-place decisions, for explain
};

inline constexpr int64_t kScratchAlignment = 64;
inline constexpr int64_t kMaxRowBytes = 16 << 10;  // stack per row buffer

absl::StatusOr<BufferPlan> PlanBuffers(const ir::Graph& graph, const ir::LoopProgram& program,
                                       const Schedule& schedule);

std::string ToString(const BufferPlan& plan);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_PLAN_BUFFERS_H_
