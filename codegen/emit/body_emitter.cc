#include "codegen/emit/body_emitter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  // Not const: clang tries to fold a const arithmetic local's initializer
  // into a constant, through every const local it names, so a chain of
  // them costs super-linear time and a recursion as deep as the chain
  // (clang++ crashed on a 10,000-node relu chain).
  absl::StrAppend(&function_.text(), indent_, StorageCType(dtype), " ", name, " = ", text, ";\n");
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
  const ir::DType have = ir::ComputeType(inputs_.graph.values[base.value].dtype);
  const std::string name = Bind(have, Element(base));
  return Step{Convert(name, have, task.want), std::nullopt};
}

std::string BodyEmitter::Element(const Access& access, const std::string& gathered_index) {
  const ir::DType stored = inputs_.graph.values[access.value].dtype;
  const int storage = inputs_.plan.storage_of[access.value];
  const std::string param = function_.StorageParameter(storage);
  Linear offset =
      ForStorage(Offset(MemoryLayout(inputs_.graph, inputs_.program, access.value), access.map),
                 inputs_.plan.storages[storage], outer_rank_);
  std::string text;
  if (gathered_index.empty()) {
    text = offset.ToString();
  } else {
    // The last variable is the index (ir::AffineMap::WithGatheredCoordinate).
    const ir::SymExpr stride = offset.coefficients.back();
    offset.coefficients.pop_back();
    text = absl::StrCat(offset.ToString(), " + ", gathered_index, " * ", SymC(stride));
  }
  reads_.push_back(std::move(offset));
  return FromStorage(absl::StrCat(param, "[", text, "]"), stored);
}

// Per coordinate, the range the loop variables give it: a side that stays
// inside [0, size) is not tested. A symbolic extent bounds nothing but the
// one coordinate that is its own variable over a dim of the same size.
std::string BodyEmitter::OutOfBoundsGuard(const ir::AffineMap& coordinates,
                                          const std::vector<ir::Dim>& sizes) const {
  std::vector<std::string> tests;
  for (int r = 0; r < coordinates.num_coordinates(); ++r) {
    const std::vector<int64_t>& coefficients = coordinates.coefficients[r];
    int64_t low = coordinates.offsets[r], high = coordinates.offsets[r];
    bool low_known = true, high_known = true;
    int variables = 0, variable = -1;
    Linear text;
    text.constant = ir::SymExpr::Constant(coordinates.offsets[r]);
    for (int c = 0; c < coordinates.num_variables; ++c) {
      const int64_t coefficient = coefficients[c];
      text.coefficients.push_back(ir::SymExpr::Constant(coefficient));
      if (coefficient == 0) continue;
      ++variables;
      variable = c;
      const bool known = c < static_cast<int>(extents_.size()) && !extents_[c].is_symbolic();
      const int64_t reach =
          known ? coefficient * std::max<int64_t>(extents_[c].constant - 1, 0) : 0;
      if (coefficient > 0) {
        high_known &= known;
        high += reach;
      } else {
        low_known &= known;
        low += reach;
      }
    }
    const bool own_dim =
        variables == 1 && coefficients[variable] == 1 && coordinates.offsets[r] == 0 &&
        variable < static_cast<int>(extents_.size()) && extents_[variable] == sizes[r];
    if (own_dim) continue;
    if (!low_known || low < 0) tests.push_back(absl::StrCat("(", text.ToString(), " >= 0)"));
    if (!high_known || sizes[r].is_symbolic() || high >= sizes[r].constant) {
      tests.push_back(absl::StrCat("(", text.ToString(), " < ", Extent(sizes[r]), ")"));
    }
  }
  // & rather than &&: no short circuit, so the test is a select, not a branch.
  return absl::StrJoin(tests, " & ");
}

// The index first (an expression over the same variables), then one
// guarded read of the realized value: an index outside the dim reads no
// memory (the select is a C conditional: its other side is not evaluated).
absl::StatusOr<BodyEmitter::Step> BodyEmitter::GatheredLoadStep(Task& task, const ir::Expr& expr) {
  if (!task.started) {
    task.started = true;
    return Step{std::nullopt, Task::ForExpression(task.value, expr.operands[0], task.map)};
  }
  const std::string& index = task.operands[0];
  const Access base =
      ResolveViews(inputs_.program, expr.value, ir::LoadCoordinates(expr, task.map));
  if (!inputs_.schedule.realized[base.value]) {
    return absl::InternalError(
        absl::StrCat("gathered load of %", base.value, ", which is not realized"));
  }
  const ir::DType have = ir::ComputeType(inputs_.graph.values[base.value].dtype);
  std::string element = Element(base, index);
  if (have != expr.dtype) element = absl::StrCat("(", StorageCType(expr.dtype), ")", element);
  const std::string size = Extent(inputs_.graph.values[expr.value].sizes[expr.gathered]);
  return Step{
      Bind(expr.dtype, absl::StrCat("((", index, " >= 0) & (", index, " < ", size, ") ? ", element,
                                    " : ", EmitLiteral(expr.fill, expr.dtype), ")")),
      std::nullopt};
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
    case ir::Expr::Kind::kLoad: {
      if (expr.gathered >= 0) return GatheredLoadStep(task, expr);
      if (task.started) return Step{task.operands[0], std::nullopt};
      ir::AffineMap coordinates = expr.index.After(map);
      const std::string guard =
          expr.bounded ? OutOfBoundsGuard(coordinates, inputs_.graph.values[expr.value].sizes) : "";
      if (guard.empty()) {
        task.started = true;
        return Step{std::nullopt, Task::ForValue(expr.value, std::move(coordinates), expr.dtype)};
      }
      // The scheduler realized what bounded loads read: one guarded read.
      const Access base = ResolveViews(inputs_.program, expr.value, std::move(coordinates));
      if (!inputs_.schedule.realized[base.value]) {
        return absl::InternalError(
            absl::StrCat("bounded load of %", base.value, ", which is not realized"));
      }
      const ir::DType have = ir::ComputeType(inputs_.graph.values[base.value].dtype);
      std::string element = Element(base);
      if (have != expr.dtype) element = absl::StrCat("(", StorageCType(expr.dtype), ")", element);
      return Step{Bind(expr.dtype, absl::StrCat("(", guard, " ? ", element, " : ",
                                                EmitLiteral(expr.fill, expr.dtype), ")")),
                  std::nullopt};
    }
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
