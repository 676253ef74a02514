// Pass: schedule (fusion).
//
// Requires: a loop program from Lower.
// Guarantees: every value is either realized into a buffer or inlined into
// each consumer's loop body. Realized: graph inputs, extern, reduction,
// scan and scatter results, aliases (and the values extern calls, aliases,
// bounded and gathered loads read through), pointwise values that are graph
// outputs or have more than one consumer, and those whose consumer's kernel
// would otherwise hold more than kMaxFusedCalls calls.
// Everything else is inlined, so a pointwise chain ends up as one loop per
// kMaxFusedCalls calls, and
// the pointwise producers of a reduction (or a scan, or a scatter's start,
// index and added elements) end up in its body. Kernels are listed in
// execution order, each with every realized value it reads (views and inlined producers resolved),
// and a copy kernel for each graph output that no kernel writes itself (an input, a view, or a
// value returned twice).
#ifndef KILN_CODEGEN_PASSES_SCHEDULE_H_
#define KILN_CODEGEN_PASSES_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"

namespace kiln {

// A realized value read at `map(kernel loop variables)`; a gathered read's
// map has one more variable, the last, for the index (ir::Expr::gathered):
// it may touch any element along that coordinate, so it is never identity,
// and row-local only when that coordinate is not a row's.
struct Access {
  int value = -1;
  ir::AffineMap map;
};

struct Kernel {
  enum class Kind { kPointwise, kReduction, kExtern, kCopy, kConcat, kScan, kScatter };
  Kind kind = Kind::kPointwise;
  int value = -1;   // the value computed (kCopy: the value copied)
  int output = -1;  // kCopy only: the graph output it writes
  // The calls its body evaluates, its inlined producers' included, each
  // counted once per load that reads it (see kMaxFusedCalls).
  int64_t calls = 0;
  std::vector<Access> reads;
  // kScatter: reads[0, point_reads) are its points' (the index and the
  // elements, over the points), the rest its start's (over the result).
  int point_reads = 0;
  // The leading output dims a group's shared loops run over (see Schedule).
  int outer_rank = 0;
};

// The most calls one kernel, and one group of kernels (one generated
// function), holds: past it, inlined producers are realized into kernels
// of their own and groups end. clang's time grows faster than linearly
// with a function's size (register allocation); so bounded, it grows
// linearly with the graph. A value whose own definition has more calls is
// one kernel still.
inline constexpr int64_t kMaxFusedCalls = 256;

// Consecutive loop kernels over the same outer dims whose reads of each
// other are row-local (element [r, ...] reads only row r of a value the
// group wrote) form a group: one loop nest over the outer dims, the kernels
// one after another inside it. A row softmax (max, exp, sum, divide) runs
// row by row with its intermediates hot in cache, and the group's outer
// loop is what runs in parallel. Extern, concat, scan and scatter kernels
// are groups of their own.
struct KernelGroup {
  int begin = 0, end = 0;  // kernels [begin, end)
  int outer_rank = 0;      // loops shared by the group's kernels
};

struct Schedule {
  std::vector<bool> realized;  // per value
  std::vector<Kernel> kernels;
  // Per graph output: the kernel that writes it.
  std::vector<int> output_kernel;
  std::vector<KernelGroup> groups;  // cover `kernels` in order
  std::vector<int> group_of;        // per kernel
};

absl::StatusOr<Schedule> ScheduleProgram(const ir::Graph& graph, const ir::LoopProgram& program);

// Follows views from `value` read at `map` down to a non-view value.
Access ResolveViews(const ir::LoopProgram& program, int value, ir::AffineMap map);

std::string ToString(const Schedule& schedule, const ir::Graph& graph,
                     const ir::LoopProgram& program);

}  // namespace kiln

#endif  // KILN_CODEGEN_PASSES_SCHEDULE_H_
