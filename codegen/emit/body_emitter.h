// What a kernel's body is written with: the function being written
// (FunctionWriter) and the expressions of one loop body (BodyEmitter).
#ifndef KILN_CODEGEN_EMIT_BODY_EMITTER_H_
#define KILN_CODEGEN_EMIT_BODY_EMITTER_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/emit/c_text.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"

namespace kiln {

// What the emitter reads: one loop program, its schedule and its buffer
// plan. The same for every function of a source.
struct EmitInputs {
  const ir::Graph& graph;
  const ir::LoopProgram& program;
  const Schedule& schedule;
  const BufferPlan& plan;
};

// One generated function as it is written: its text, the storages it
// touches and the names of its values. Storages become pointer parameters
// p0, p1, ... in order of first use, except row buffers, which are locals
// row<storage>; values are v0, v1, ..., numbered across the function (two
// kernels of a group never share a name).
class FunctionWriter {
 public:
  explicit FunctionWriter(const EmitInputs& inputs) : inputs_(inputs) {}

  const EmitInputs& inputs() const { return inputs_; }

  // The name `storage` goes by in this function.
  std::string StorageParameter(int storage);
  // The storages passed as parameters, p0 first.
  const std::vector<int>& parameters() const { return parameters_; }
  // The row buffers used, in order of first use.
  const std::vector<int>& rows() const { return rows_; }

  std::string NewValueName() { return "v" + std::to_string(next_value_++); }

  std::string& text() { return text_; }

 private:
  const EmitInputs& inputs_;
  std::vector<int> parameters_;
  std::vector<int> rows_;
  int next_value_ = 0;
  std::string text_;
};

// Emits expressions into one loop body of `function`, each line at
// `indent`. Names are deterministic (the function's counter); equal
// expression text is computed once per body. `outer_rank` is the number of
// loops the group shares, which a row buffer's index leaves out;
// `extents` are the loop variables' ranges (i<c> in [0, extents[c])), from
// which a bounded load's coordinates are proved inside their value where
// they are, so only the others are tested.
//
// Expansion is iterative: an inlined pointwise chain is as deep as the
// graph is long (a 100,000-node chain), so it walks an explicit stack, never
// the C++ one. The names and lines are those of a depth-first walk over
// each call's operands in order; an expression expanded before at the same
// map reuses its name (a second expansion would only find its text
// memoized), which also keeps a chain of x + x from expanding 2^n times.
// Every call is bound to a named temporary, so the C++ is flat however deep
// the chain: no nested expression for clang to recurse through, and no
// const local whose initializer clang would try to fold through the chain.
class BodyEmitter {
 public:
  BodyEmitter(FunctionWriter& function, std::string indent, int outer_rank,
              std::vector<ir::Dim> extents)
      : function_(function),
        inputs_(function.inputs()),
        indent_(std::move(indent)),
        outer_rank_(outer_rank),
        extents_(std::move(extents)) {}

  // `value` at map(loop variables), in compute type `want`.
  absl::StatusOr<std::string> Value(int value, const ir::AffineMap& map, ir::DType want) {
    return Run(Task::ForValue(value, map, want));
  }

  // The definition of `value` itself, expanded at map(loop variables).
  absl::StatusOr<std::string> Expression(int value, int index, const ir::AffineMap& map) {
    return Run(Task::ForExpression(value, index, map));
  }

  // `text` bound to a named local of `dtype` (or the name it already has).
  std::string Bind(ir::DType dtype, const std::string& text);

  void Line(const std::string& text);

  // Whether anything emitted so far computes a kiln_math.h polynomial.
  bool calls_polynomial() const { return calls_polynomial_; }

  // The offsets of the realized elements read so far, per loop variable (a
  // gathered read's index left out).
  const std::vector<Linear>& reads() const { return reads_; }

 private:
  // One pending step of the walk: a value read at a map (resolving views,
  // loading it or expanding its definition), or one expression of a
  // definition. `operands` collects the names its children produced.
  struct Task {
    bool is_value = false;
    int value = -1;
    int index = -1;  // expression tasks: into the definition's exprs
    ir::AffineMap map;
    ir::DType want = ir::DType::kFloat32;  // value tasks: the type asked for
    ir::DType have = ir::DType::kFloat32;  // value tasks: the type expanded
    bool started = false;
    std::vector<std::string> operands;

    static Task ForValue(int value, const ir::AffineMap& map, ir::DType want);
    static Task ForExpression(int value, int index, const ir::AffineMap& map);
  };
  // What one step does: finishes its task with a name, or asks for a child.
  struct Step {
    std::optional<std::string> name;
    std::optional<Task> child;
  };
  using ExpressionKey =
      std::tuple<int, int, int, std::vector<std::vector<int64_t>>, std::vector<int64_t>>;
  static ExpressionKey KeyOf(const Task& task);

  absl::StatusOr<std::string> Run(Task root);
  absl::StatusOr<Step> ValueStep(Task& task);
  absl::StatusOr<Step> ExpressionStep(Task& task);
  std::string Convert(const std::string& name, ir::DType have, ir::DType want);
  // A realized value's element at `access`, in its compute type; for a
  // gathered read, `gathered_index` names the index its map's last variable
  // stands for.
  std::string Element(const Access& access, const std::string& gathered_index = "");
  // A gathered load (ir::Expr::gathered): its index, then a guarded read.
  absl::StatusOr<Step> GatheredLoadStep(Task& task, const ir::Expr& expr);
  // What a bounded load at `coordinates` must test (empty: nothing), in C.
  std::string OutOfBoundsGuard(const ir::AffineMap& coordinates,
                               const std::vector<ir::Dim>& sizes) const;

  FunctionWriter& function_;
  const EmitInputs& inputs_;
  const std::string indent_;
  const int outer_rank_;
  const std::vector<ir::Dim> extents_;
  bool calls_polynomial_ = false;
  std::vector<Linear> reads_;
  std::map<std::string, std::string> memo_;        // expression text -> its name
  std::map<ExpressionKey, std::string> expanded_;  // expression at a map -> its name
};

}  // namespace kiln

#endif  // KILN_CODEGEN_EMIT_BODY_EMITTER_H_
