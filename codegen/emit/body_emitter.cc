#include "codegen/emit/body_emitter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/emit/c_text.h"
#include "codegen/emit/functions.h"
#include "common/status_macros.h"

namespace kiln {

std::string FunctionWriter::StorageParameter(int storage) {
  if (inputs_.plan.storages[storage].kind == Storage::Kind::kRow) {
    if (std::find(rows_.begin(), rows_.end(), storage) == rows_.end()) rows_.push_back(storage);
    return absl::StrCat("row", storage);
  }
  for (size_t p = 0; p < parameters_.size(); ++p) {
    if (parameters_[p] == storage) return absl::StrCat("p", p);
  }
  parameters_.push_back(storage);
  return absl::StrCat("p", parameters_.size() - 1);
}

std::string BodyEmitter::Bind(ir::DType dtype, const std::string& text) {
  auto it = memo_.find(text);
  if (it != memo_.end()) return it->second;
  const std::string name = function_.NewValueName();
  absl::StrAppend(&function_.text(), indent_, "const ", StorageCType(dtype), " ", name, " = ", text,
                  ";\n");
  memo_.emplace(text, name);
  return name;
}

void BodyEmitter::Line(const std::string& text) {
  absl::StrAppend(&function_.text(), indent_, text, "\n");
}

BodyEmitter::Task BodyEmitter::Task::ForValue(int value, const ir::AffineMap& map, ir::DType want) {
  Task task;
  task.is_value = true;
  task.value = value;
  task.map = map;
  task.want = want;
  return task;
}

BodyEmitter::Task BodyEmitter::Task::ForExpression(int value, int index, const ir::AffineMap& map) {
  Task task;
  task.value = value;
  task.index = index;
  task.map = map;
  return task;
}

BodyEmitter::ExpressionKey BodyEmitter::KeyOf(const Task& task) {
  return {task.value, task.index, task.map.num_variables, task.map.coefficients, task.map.offsets};
}

absl::StatusOr<std::string> BodyEmitter::Run(Task root) {
  std::vector<Task> stack;
  stack.push_back(std::move(root));
  std::string name;
  while (true) {
    Task& task = stack.back();
    ASSIGN_OR_RETURN(Step step, task.is_value ? ValueStep(task) : ExpressionStep(task));
    if (step.child) {
      stack.push_back(*std::move(step.child));
      continue;
    }
    name = *std::move(step.name);
    if (!task.is_value) expanded_.emplace(KeyOf(task), name);
    stack.pop_back();
    if (stack.empty()) return name;
    stack.back().operands.push_back(name);
  }
}

// Resolves views; loads a realized value, else expands its definition's
// root at the resolved map; then converts to the type asked for.
absl::StatusOr<BodyEmitter::Step> BodyEmitter::ValueStep(Task& task) {
  if (task.started) return Step{Convert(task.operands[0], task.have, task.want), std::nullopt};
  task.started = true;
  const Access base = ResolveViews(inputs_.program, task.value, task.map);
  if (!inputs_.schedule.realized[base.value]) {
    const ir::Definition& definition = inputs_.program.definitions[base.value];
    task.have = definition.exprs[definition.root].dtype;
    return Step{std::nullopt, Task::ForExpression(base.value, definition.root, base.map)};
  }
  const ir::DType stored = inputs_.graph.values[base.value].dtype;
  const int storage = inputs_.plan.storage_of[base.value];
  const std::string param = function_.StorageParameter(storage);
  const Linear offset =
      ForStorage(Offset(MemoryLayout(inputs_.graph, inputs_.program, base.value), base.map),
                 inputs_.plan.storages[storage], outer_rank_);
  const ir::DType have = ir::ComputeType(stored);
  const std::string name =
      Bind(have, FromStorage(absl::StrCat(param, "[", offset.ToString(), "]"), stored));
  return Step{Convert(name, have, task.want), std::nullopt};
}

std::string BodyEmitter::Convert(const std::string& name, ir::DType have, ir::DType want) {
  if (have == want) return name;
  return Bind(want, absl::StrCat("(", StorageCType(want), ")", name));
}

// One expression: leaves at once; a load through its value task; a call
// once each operand, in order, has a name.
absl::StatusOr<BodyEmitter::Step> BodyEmitter::ExpressionStep(Task& task) {
  if (!task.started) {
    auto it = expanded_.find(KeyOf(task));
    if (it != expanded_.end()) return Step{it->second, std::nullopt};
  }
  const ir::Expr& expr = inputs_.program.definitions[task.value].exprs[task.index];
  const ir::AffineMap& map = task.map;
  switch (expr.kind) {
    case ir::Expr::Kind::kLoad:
      if (task.started) return Step{task.operands[0], std::nullopt};
      task.started = true;
      return Step{std::nullopt, Task::ForValue(expr.value, expr.index.After(map), expr.dtype)};
    case ir::Expr::Kind::kConstant:
      return Step{EmitLiteral(expr.constant, expr.dtype), std::nullopt};
    case ir::Expr::Kind::kSize:
      return Step{
          Bind(expr.dtype, absl::StrCat("(", StorageCType(expr.dtype), ")", SymC(expr.size))),
          std::nullopt};
    case ir::Expr::Kind::kIndex: {
      Linear linear;
      linear.constant = ir::SymExpr::Constant(map.offsets[expr.variable]);
      for (int64_t coefficient : map.coefficients[expr.variable]) {
        linear.coefficients.push_back(ir::SymExpr::Constant(coefficient));
      }
      return Step{Bind(expr.dtype,
                       absl::StrCat("(", StorageCType(expr.dtype), ")(", linear.ToString(), ")")),
                  std::nullopt};
    }
    case ir::Expr::Kind::kCall: {
      task.started = true;
      if (task.operands.size() < expr.operands.size()) {
        return Step{std::nullopt,
                    Task::ForExpression(task.value, expr.operands[task.operands.size()], map)};
      }
      auto text = EmitFunction(expr.function, task.operands, expr.dtype);
      if (!text.ok()) return absl::InternalError(std::string(text.status().message()));
      calls_polynomial_ |= CallsPolynomial(expr.function, expr.dtype);
      return Step{Bind(expr.dtype, *text), std::nullopt};
    }
  }
  return absl::InternalError("unknown expression kind");
}

}  // namespace kiln
