#include "codegen/emit/reduction.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/emit/c_text.h"
#include "codegen/emit/functions.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// How a reduction folds: its accumulator's start and one combining step.
struct Combiner {
  double init;
  std::string step;  // {a} the accumulator, {b} the new element
};

absl::StatusOr<Combiner> CombinerFor(const std::string& name, ir::DType accumulate) {
  const bool floating = ir::IsFloatingPoint(accumulate);
  const bool boolean = accumulate == ir::DType::kBool;
  if (name == "sum") return Combiner{0, "({a} + {b})"};
  if (name == "prod") return Combiner{1, "({a} * {b})"};
  // NaN wins, as in eager's max/min; integers need no NaN test. The start
  // is the type's lowest (highest) value: -inf as a bool would be true. A
  // bitwise | rather than ||: no short circuit, so the scalar steps (tails,
  // the last levels of the tree) are selects, not data-dependent branches.
  if (name == "max") {
    return Combiner{boolean ? 0.0 : -INFINITY, floating
                                                   ? "((({a} != {a}) | ({a} > {b})) ? {a} : {b})"
                                                   : "({a} > {b} ? {a} : {b})"};
  }
  if (name == "max_nan_unspecified") return Combiner{-INFINITY, "({a} > {b} ? {a} : {b})"};
  // Eager's max pooling: an element replaces the accumulator when it is
  // greater or NaN, so ties keep the first (-0.0 before 0.0) and the last
  // NaN wins. Folded in order only (no lanes), which ties need.
  if (name == "pool_max") {
    return Combiner{-INFINITY, floating ? "((({b} > {a}) | ({b} != {b})) ? {b} : {a})"
                                        : "({b} > {a} ? {b} : {a})"};
  }
  if (name == "min") {
    return Combiner{boolean ? 1.0 : INFINITY, floating
                                                  ? "((({a} != {a}) | ({a} < {b})) ? {a} : {b})"
                                                  : "({a} < {b} ? {a} : {b})"};
  }
  return absl::InternalError(absl::StrCat("unknown combiner ", name));
}

std::string Step(const Combiner& combiner, const std::string& a, const std::string& b) {
  return absl::StrReplaceAll(combiner.step, {{"{a}", a}, {"{b}", b}});
}

// The lanes' final combine, an explicit tree in clang's vector types (so it
// stays in registers: as loops over `lanes` it goes through the stack, each
// narrower load waiting on a wider store) into one
// scalar, lanes[0]. Lane k meets lane k + n/2, then k + n/4, ...: the same
// order as a loop would take.
std::string LaneTree(const Combiner& combiner, const char* acc_type, int num_lanes,
                     const std::string& indent) {
  // Type names of their own: generated values are v0, v1, ...
  std::string tree = absl::StrCat(indent, "{\n");
  for (int width : {16, 8, 4, 2}) {
    absl::StrAppend(&tree, indent, "  typedef ", acc_type, " kiln_lanes", width,
                    " __attribute__((ext_vector_type(", width, ")));\n");
  }
  absl::StrAppend(&tree, indent, "  kiln_lanes16 l16[", num_lanes / 16, "];\n", indent,
                  "  __builtin_memcpy(l16, lanes, sizeof(l16));\n");
  for (int vectors = num_lanes / 16; vectors > 1; vectors /= 2) {
    for (int k = 0; k < vectors / 2; ++k) {
      absl::StrAppend(
          &tree, indent, "  l16[", k, "] = ",
          Step(combiner, absl::StrCat("l16[", k, "]"), absl::StrCat("l16[", k + vectors / 2, "]")),
          ";\n");
    }
  }
  absl::StrAppend(&tree, indent,
                  "  const kiln_lanes8 l8 = ", Step(combiner, "l16[0].lo", "l16[0].hi"), ";\n");
  absl::StrAppend(&tree, indent, "  const kiln_lanes4 l4 = ", Step(combiner, "l8.lo", "l8.hi"),
                  ";\n");
  absl::StrAppend(&tree, indent, "  const kiln_lanes2 l2 = ", Step(combiner, "l4.lo", "l4.hi"),
                  ";\n");
  absl::StrAppend(&tree, indent, "  lanes[0] = ", Step(combiner, "l2.x", "l2.y"), ";\n", indent,
                  "}\n");
  return tree;
}

// Partial accumulators per reduction: clang vectorizes the lanes, and the
// final combine is an explicit tree (it would otherwise be a serial chain).
// 16 lanes are one 512-bit float vector, whose every step waits for the
// last; long rows (512 or more, a multiple of 64: no long scalar tail) get
// 64 lanes, four independent chains (the chunk loop fully unrolled keeps
// them in registers). Short rows keep 16: there the longer tree combine per
// row costs more than the extra chains save, hence the threshold.
int LanesFor(const ir::Dim& extent) {
  return !extent.is_symbolic() && extent.constant >= 512 && extent.constant % 64 == 0 ? 64 : 16;
}

// A small static window (pooling's 3x3) is unrolled in full, so that the
// loop over the last output dim holds no loop and vectorizes (resnet18's
// max pooling is the case in docs/BENCHMARKS.md).
constexpr int64_t kMaxUnrolledWindow = 16;

bool UnrollsWindow(const std::vector<ir::Dim>& reduction_sizes) {
  int64_t total = 1;
  for (const ir::Dim& size : reduction_sizes) {
    if (size.is_symbolic()) return false;
    total *= size.constant;
  }
  return total <= kMaxUnrolledWindow;
}

// One reduction kernel's body. Its variables are the output dims' i0 ..
// i<rank - 1>, then one per reduced dim.
class ReductionEmitter {
 public:
  ReductionEmitter(const KernelSite& site, FunctionWriter& function)
      : site_(site),
        function_(function),
        definition_(function.inputs().program.definitions[site.kernel.value]),
        stored_(function.inputs().graph.values[site.kernel.value].dtype),
        rank_(static_cast<int>(function.inputs().graph.values[site.kernel.value].rank())),
        reductions_(static_cast<int>(definition_.reduction_sizes.size())),
        accumulate_(definition_.exprs[definition_.root].dtype),
        acc_type_(StorageCType(accumulate_)),
        arg_(definition_.combiner == "argmax" || definition_.combiner == "argmin" ||
             definition_.combiner == "pool_argmax"),
        inner_(reductions_ > 0 ? definition_.reduction_sizes.back() : ir::Dim::Constant(1)),
        num_lanes_(LanesFor(inner_)),
        lanes_(!arg_ && definition_.combiner != "pool_max" && reductions_ > 0 &&
               (inner_.is_symbolic() || inner_.constant >= 32)),
        unroll_(UnrollsWindow(definition_.reduction_sizes)) {}

  absl::Status Emit() {
    if (!arg_) {
      ASSIGN_OR_RETURN(combiner_, CombinerFor(definition_.combiner, accumulate_));
    }
    init_ = EmitLiteral(
        arg_ ? (definition_.combiner == "argmin" ? INFINITY : -INFINITY) : combiner_.init,
        accumulate_);
    if (site_.columns.dim >= 0) return EmitColumns();
    const std::string& indent = site_.indent;
    std::string& text = function_.text();
    absl::StrAppend(&text, indent, acc_type_, " acc = ", init_, ";\n");
    if (arg_) {
      std::string start = "0";
      if (definition_.position >= 0) {
        // The position at reduced coordinates 0: the output's variables,
        // then zeros.
        ir::AffineMap at_start = ir::AffineMap::Identity(rank_);
        at_start.coefficients.resize(rank_ + reductions_, std::vector<int64_t>(rank_, 0));
        at_start.offsets.resize(rank_ + reductions_, 0);
        const ir::TensorType& type = function_.inputs().graph.values[site_.kernel.value];
        BodyEmitter body(function_, indent, site_.outer_rank, type.sizes);
        ASSIGN_OR_RETURN(start,
                         body.Expression(site_.kernel.value, definition_.position, at_start));
      }
      absl::StrAppend(&text, indent, "kiln_int64 acc_index = ", start, ";\n");
    }
    if (lanes_) absl::StrAppend(&text, indent, acc_type_, " lanes[", num_lanes_, "];\n");
    std::string loop_indent = indent;
    for (int r = 0; r + 1 < reductions_; ++r) {
      text += ReducedLoopHeader(rank_ + r, definition_.reduction_sizes[r], loop_indent);
      loop_indent += "  ";
    }
    if (reductions_ == 0) {
      RETURN_IF_ERROR(Fold(indent, "acc"));
    } else if (lanes_) {
      RETURN_IF_ERROR(EmitLanedInnermost(loop_indent));
    } else {
      text += ReducedLoopHeader(last(), inner_, loop_indent);
      RETURN_IF_ERROR(Fold(loop_indent + "  ", "acc"));
      absl::StrAppend(&text, loop_indent, "}\n");
    }
    for (int r = reductions_ - 1; r > 0; --r) {
      absl::StrAppend(&text, std::string(indent.size() + 2 * (r - 1), ' '), "}\n");
    }
    const std::string result = arg_ ? "acc_index" : "acc";
    const ir::DType result_type = arg_ ? ir::DType::kInt64 : accumulate_;
    std::string value = result;
    if (ir::ComputeType(stored_) != result_type) {
      value = absl::StrCat("(", StorageCType(ir::ComputeType(stored_)), ")", result);
    }
    absl::StrAppend(&text, indent, site_.target, " = ", ToStorage(value, stored_), ";\n");
    return absl::OkStatus();
  }

 private:
  int last() const { return rank_ + reductions_ - 1; }

  // A loop over a reduced dim, unrolled in a small window (an extent of 1
  // is a block, not a loop).
  std::string ReducedLoopHeader(int variable, const ir::Dim& size,
                                const std::string& indent) const {
    const std::string extent = Extent(size);
    return absl::StrCat(
        unroll_ && extent != "1" ? indent + "#pragma clang loop unroll(full)\n" : "",
        LoopHeader(variable, extent, indent));
  }

  // The innermost reduced dim in lanes: i<last> = chunk + k over full
  // chunks, then a scalar tail, then the lanes' tree into acc. The lanes
  // fold one innermost run at a time, then into acc: over several reduced
  // dims (a mean of [n, n]) each lane then sums a row's share, not
  // n * n / lanes values in one chain (1024 x 1024: 3.5e-6 relative error
  // -> eager's).
  absl::Status EmitLanedInnermost(const std::string& loop_indent) {
    std::string& text = function_.text();
    absl::StrAppend(&text, loop_indent, "for (int k = 0; k < ", num_lanes_,
                    "; ++k) lanes[k] = ", init_, ";\n");
    absl::StrAppend(&text, loop_indent, "kiln_int64 chunk = 0;\n", loop_indent, "for (; chunk + ",
                    num_lanes_, " <= ", Extent(inner_), "; chunk += ", num_lanes_, ") {\n",
                    loop_indent,
                    num_lanes_ > 16 ? "  #pragma clang loop unroll(full)\n" + loop_indent : "",
                    "  for (int k = 0; k < ", num_lanes_, "; ++k) {\n", loop_indent,
                    "    const kiln_int64 i", last(), " = chunk + k;\n");
    RETURN_IF_ERROR(Fold(loop_indent + "    ", "lanes[k]"));
    absl::StrAppend(&text, loop_indent, "  }\n", loop_indent, "}\n", loop_indent,
                    "for (kiln_int64 i", last(), " = chunk; i", last(), " < ", Extent(inner_),
                    "; ++i", last(), ") {\n");
    RETURN_IF_ERROR(Fold(loop_indent + "  ", "acc"));
    absl::StrAppend(&text, loop_indent, "}\n");
    absl::StrAppend(&text, LaneTree(combiner_, acc_type_, num_lanes_, loop_indent));
    absl::StrAppend(&text, loop_indent, "acc = ", Step(combiner_, "lanes[0]", "acc"), ";\n");
    return absl::OkStatus();
  }

  // The columns [begin, end) of the output, a block of
  // kColumnBlock at a time: one accumulator per column, every reduced dim's
  // loop around the loop over the block's columns. The innermost reduced dim
  // folds in runs of at most kColumnRun into partial accumulators, added
  // into the block's, so no column is one long serial chain.
  absl::Status EmitColumns() {
    constexpr int kColumnBlock = 256;
    constexpr int kColumnRun = 64;
    std::string& text = function_.text();
    const std::string& indent = site_.indent;
    const std::string column = absl::StrCat("i", site_.columns.dim);
    const std::string& end = site_.columns.end;
    const bool runs = inner_.is_symbolic() || inner_.constant > kColumnRun || reductions_ > 1;
    const std::string into = runs ? "part[j]" : "cols[j]";
    auto over_block = [&](const std::string& at, const std::string& statement) {
      return absl::StrCat(at, "for (kiln_int64 j = 0; j < width; ++j) ", statement, "\n");
    };
    absl::StrAppend(&text, indent, acc_type_, " cols[", kColumnBlock,
                    "] __attribute__((aligned(64)));\n");
    if (runs) {
      absl::StrAppend(&text, indent, acc_type_, " part[", kColumnBlock,
                      "] __attribute__((aligned(64)));\n");
    }
    absl::StrAppend(&text, indent, "for (kiln_int64 col = ", site_.columns.begin, "; col < ", end,
                    "; col += ", kColumnBlock, ") {\n", indent, "  const kiln_int64 width = ", end,
                    " - col < ", kColumnBlock, " ? ", end, " - col : ", kColumnBlock, ";\n");
    std::string loop_indent = indent + "  ";
    text += over_block(loop_indent, absl::StrCat("cols[j] = ", init_, ";"));
    for (int r = 0; r + 1 < reductions_; ++r) {
      text += LoopHeader(rank_ + r, Extent(definition_.reduction_sizes[r]), loop_indent);
      loop_indent += "  ";
    }
    const std::string extent = Extent(inner_);
    const std::string innermost = absl::StrCat("i", last());
    if (runs) {
      absl::StrAppend(&text, loop_indent, "for (kiln_int64 run = 0; run < ", extent,
                      "; run += ", kColumnRun, ") {\n");
      loop_indent += "  ";
      text += over_block(loop_indent, absl::StrCat("part[j] = ", init_, ";"));
      absl::StrAppend(&text, loop_indent, "const kiln_int64 stop = ", extent, " - run < ",
                      kColumnRun, " ? ", extent, " : run + ", kColumnRun, ";\n", loop_indent,
                      "for (kiln_int64 ", innermost, " = run; ", innermost, " < stop; ++",
                      innermost, ") {\n");
    } else {
      text += LoopHeader(last(), extent, loop_indent);
    }
    absl::StrAppend(&text, loop_indent, "  for (kiln_int64 j = 0; j < width; ++j) {\n", loop_indent,
                    "    const kiln_int64 ", column, " = col + j;\n");
    RETURN_IF_ERROR(Fold(loop_indent + "    ", into));
    absl::StrAppend(&text, loop_indent, "  }\n", loop_indent, "}\n");
    if (runs) {
      text += over_block(loop_indent,
                         absl::StrCat("cols[j] = ", Step(combiner_, "cols[j]", "part[j]"), ";"));
      loop_indent.resize(loop_indent.size() - 2);
      absl::StrAppend(&text, loop_indent, "}\n");
    }
    for (int r = reductions_ - 2; r >= 0; --r) {
      loop_indent.resize(loop_indent.size() - 2);
      absl::StrAppend(&text, loop_indent, "}\n");
    }
    std::string value = "cols[j]";
    if (ir::ComputeType(stored_) != accumulate_) {
      value = absl::StrCat("(", StorageCType(ir::ComputeType(stored_)), ")", value);
    }
    absl::StrAppend(&text, loop_indent, "for (kiln_int64 j = 0; j < width; ++j) {\n", loop_indent,
                    "  const kiln_int64 ", column, " = col + j;\n", loop_indent, "  ", site_.target,
                    " = ", ToStorage(value, stored_), ";\n", loop_indent, "}\n", indent, "}\n");
    return absl::OkStatus();
  }

  // One fold of the body at the current variables into `into`, each fold
  // a body of its own (its names memoized apart from the others').
  absl::Status Fold(const std::string& indent, const std::string& into) {
    std::vector<ir::Dim> extents = function_.inputs().graph.values[site_.kernel.value].sizes;
    extents.insert(extents.end(), definition_.reduction_sizes.begin(),
                   definition_.reduction_sizes.end());
    BodyEmitter body(function_, indent, site_.outer_rank, std::move(extents));
    const ir::AffineMap identity = ir::AffineMap::Identity(rank_ + reductions_);
    ASSIGN_OR_RETURN(const std::string element,
                     body.Expression(site_.kernel.value, definition_.root, identity));
    if (!arg_) {
      body.Line(absl::StrCat(into, " = ", Step(combiner_, into, element), ";"));
      return absl::OkStatus();
    }
    // The flat position over the reduced dims, or the definition's own.
    std::string position;
    if (definition_.position >= 0) {
      ASSIGN_OR_RETURN(position,
                       body.Expression(site_.kernel.value, definition_.position, identity));
    } else {
      std::vector<std::string> terms;
      ir::SymExpr stride = ir::SymExpr::Constant(1);
      for (int r = reductions_ - 1; r >= 0; --r) {
        terms.push_back(stride == 1 ? absl::StrCat("i", rank_ + r)
                                    : absl::StrCat("i", rank_ + r, " * ", SymC(stride)));
        stride = stride * ir::SymExpr::Of(definition_.reduction_sizes[r]);
      }
      position = terms.empty() ? "0" : absl::StrJoin(terms, " + ");
    }
    const bool floating = ir::IsFloatingPoint(accumulate_);
    std::string better;
    if (definition_.combiner == "pool_argmax") {
      // pool_max's rule: ties keep the first, the last NaN wins.
      better = floating ? absl::StrCat("(", element, " > acc) | (", element, " != ", element, ")")
                        : absl::StrCat(element, " > acc");
    } else {
      // The first occurrence wins; a NaN counts as the extreme, as in eager.
      better = absl::StrCat(
          element, definition_.combiner == "argmax" ? " > " : " < ", "acc",
          floating ? absl::StrCat(" || (", element, " != ", element, " && acc == acc)") : "");
    }
    body.Line(
        absl::StrCat("if (", better, ") { acc = ", element, "; acc_index = ", position, "; }"));
    return absl::OkStatus();
  }

  const KernelSite& site_;
  FunctionWriter& function_;
  const ir::Definition& definition_;
  const ir::DType stored_;
  const int rank_;
  const int reductions_;
  const ir::DType accumulate_;
  const char* const acc_type_;
  const bool arg_;       // argmax / argmin: the position, not the value
  const ir::Dim inner_;  // the innermost reduced dim
  const int num_lanes_;
  const bool lanes_;   // whether the innermost reduced dim runs in lanes
  const bool unroll_;  // whether the reduced dims' loops are unrolled
  Combiner combiner_{0, ""};
  std::string init_;
};

}  // namespace

absl::Status EmitReductionBody(const KernelSite& site, FunctionWriter& function) {
  return ReductionEmitter(site, function).Emit();
}

bool FoldsColumns(const KernelGroup& group, const EmitInputs& in) {
  if (group.end - group.begin != 1 || group.outer_rank == 0) return false;
  const Kernel& kernel = in.schedule.kernels[group.begin];
  if (kernel.kind != Kernel::Kind::kReduction) return false;
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const std::string& combiner = definition.combiner;
  if (definition.reduction_sizes.empty() ||
      (combiner != "sum" && combiner != "prod" && combiner != "max" && combiner != "min" &&
       combiner != "max_nan_unspecified")) {
    return false;
  }
  // Emit the body once, aside, for the offsets it reads.
  std::vector<ir::Dim> extents = in.graph.values[kernel.value].sizes;
  extents.insert(extents.end(), definition.reduction_sizes.begin(),
                 definition.reduction_sizes.end());
  const int column = group.outer_rank - 1;
  const int innermost = static_cast<int>(extents.size()) - 1;
  FunctionWriter aside(in);
  BodyEmitter body(aside, "", group.outer_rank, extents);
  if (!body.Expression(kernel.value, definition.root, ir::AffineMap::Identity(innermost + 1))
           .ok()) {
    return false;
  }
  bool along_columns = false;
  for (const Linear& read : body.reads()) {
    const ir::SymExpr& across = read.coefficients[column];
    if (across == 0) continue;  // the same element for every column
    if (across != 1 || read.coefficients[innermost] == 1) return false;
    along_columns = true;
  }
  return along_columns;
}

}  // namespace kiln
