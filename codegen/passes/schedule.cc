#include "codegen/passes/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

using Kind = ir::Definition::Kind;

// Appends every realized value that reading `value` at `map` touches.
void CollectReads(const ir::LoopProgram& program, const std::vector<bool>& realized, int value,
                  const ir::AffineMap& map, std::vector<Access>& reads) {
  Access base = ResolveViews(program, value, map);
  if (realized[base.value]) {
    reads.push_back(std::move(base));
    return;
  }
  const ir::Definition& definition = program.definitions[base.value];
  for (const ir::Expr& expr : definition.exprs) {
    if (expr.kind != ir::Expr::Kind::kLoad) continue;
    CollectReads(program, realized, expr.value, expr.index.After(base.map), reads);
  }
}

}  // namespace

Access ResolveViews(const ir::LoopProgram& program, int value, ir::AffineMap map) {
  while (program.definitions[value].kind == Kind::kView) {
    const ir::Definition& view = program.definitions[value];
    map = view.map.After(map);
    value = view.source;
  }
  return Access{value, std::move(map)};
}

absl::StatusOr<Schedule> ScheduleProgram(const ir::Graph& graph, const ir::LoopProgram& program) {
  const int num_values = static_cast<int>(graph.values.size());
  auto base_of = [&](int value) {
    return ResolveViews(program, value, ir::AffineMap::Identity(graph.values[value].rank())).value;
  };

  // Consumers per non-view value, counted once per consuming definition.
  std::vector<int> consumers(num_values, 0);
  std::vector<bool> must_realize(num_values, false);
  for (int v = 0; v < num_values; ++v) {
    const ir::Definition& definition = program.definitions[v];
    std::vector<int> read;
    if (definition.kind == Kind::kPointwise || definition.kind == Kind::kReduction) {
      for (const ir::Expr& expr : definition.exprs) {
        if (expr.kind == ir::Expr::Kind::kLoad) read.push_back(base_of(expr.value));
      }
    } else if (definition.kind == Kind::kExtern) {
      for (int operand : definition.operands) {
        read.push_back(base_of(operand));
        must_realize[read.back()] = true;  // extern calls read memory
      }
    } else if (definition.kind == Kind::kAlias) {
      read.push_back(base_of(definition.source));
      must_realize[read.back()] = true;  // an alias is the source's memory
      if (read.back() != definition.source) {
        return absl::InternalError(absl::StrCat("alias %", v, " of view %", definition.source));
      }
    }
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (int base : read) ++consumers[base];
  }
  for (int output : graph.outputs) {
    ++consumers[base_of(output)];
    if (program.definitions[output].kind == Kind::kPointwise) must_realize[output] = true;
  }

  Schedule schedule;
  schedule.realized.assign(num_values, false);
  for (int v = 0; v < num_values; ++v) {
    const Kind kind = program.definitions[v].kind;
    schedule.realized[v] = kind == Kind::kInput || kind == Kind::kExtern ||
                           kind == Kind::kReduction || kind == Kind::kAlias ||
                           (kind == Kind::kPointwise && (must_realize[v] || consumers[v] > 1));
  }

  // Values are in topological order, so realized values in value order is a
  // valid execution order.
  for (int v = 0; v < num_values; ++v) {
    const ir::Definition& definition = program.definitions[v];
    if (!schedule.realized[v] || definition.kind == Kind::kInput ||
        definition.kind == Kind::kAlias) {
      continue;
    }
    Kernel kernel;
    kernel.value = v;
    if (definition.kind == Kind::kReduction) kernel.kind = Kernel::Kind::kReduction;
    if (definition.kind == Kind::kExtern) {
      kernel.kind = Kernel::Kind::kExtern;
      for (int operand : definition.operands) {
        kernel.reads.push_back(ResolveViews(
            program, operand, ir::AffineMap::Identity(graph.values[operand].rank())));
      }
    } else {
      for (const ir::Expr& expr : definition.exprs) {
        if (expr.kind != ir::Expr::Kind::kLoad) continue;
        CollectReads(program, schedule.realized, expr.value, expr.index, kernel.reads);
      }
    }
    schedule.kernels.push_back(std::move(kernel));
  }

  std::vector<bool> written(num_values, false);
  for (int output : graph.outputs) {
    const Kind kind = program.definitions[output].kind;
    if ((kind == Kind::kPointwise || kind == Kind::kExtern || kind == Kind::kReduction) &&
        !written[output]) {
      written[output] = true;
      for (size_t k = 0; k < schedule.kernels.size(); ++k) {
        if (schedule.kernels[k].value == output) schedule.output_kernel.push_back(k);
      }
      continue;
    }
    Kernel copy;
    copy.kind = Kernel::Kind::kCopy;
    copy.value = output;
    copy.output = static_cast<int>(schedule.output_kernel.size());
    CollectReads(program, schedule.realized, output,
                 ir::AffineMap::Identity(graph.values[output].rank()), copy.reads);
    schedule.output_kernel.push_back(schedule.kernels.size());
    schedule.kernels.push_back(std::move(copy));
  }
  return schedule;
}

std::string ToString(const Schedule& schedule, const ir::Graph& graph,
                     const ir::LoopProgram& program) {
  std::string text;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const Kernel& kernel = schedule.kernels[k];
    const ir::TensorType& type = graph.values[kernel.value];
    switch (kernel.kind) {
      case Kernel::Kind::kPointwise:
      case Kernel::Kind::kReduction: {
        // The inlined values: pointwise definitions reached without passing
        // through a realized one.
        std::vector<int> inlined;
        std::vector<int> stack = {kernel.value};
        while (!stack.empty()) {
          const int v = stack.back();
          stack.pop_back();
          for (const ir::Expr& expr : program.definitions[v].exprs) {
            if (expr.kind != ir::Expr::Kind::kLoad) continue;
            const int base =
                ResolveViews(program, expr.value,
                             ir::AffineMap::Identity(graph.values[expr.value].rank()))
                    .value;
            if (schedule.realized[base]) continue;
            inlined.push_back(base);
            stack.push_back(base);
          }
        }
        std::sort(inlined.begin(), inlined.end());
        inlined.erase(std::unique(inlined.begin(), inlined.end()), inlined.end());
        absl::StrAppend(&text, "kernel ", k,
                        kernel.kind == Kernel::Kind::kReduction
                            ? absl::StrCat(": ", program.definitions[kernel.value].combiner,
                                           " reduction %")
                            : std::string(": pointwise %"),
                        kernel.value, " ", ir::ToString(type, graph));
        if (!inlined.empty()) {
          absl::StrAppend(&text, ", fused with ",
                          absl::StrJoin(inlined, ", ", [](std::string* out, int v) {
                            absl::StrAppend(out, "%", v);
                          }));
        }
        break;
      }
      case Kernel::Kind::kExtern:
        absl::StrAppend(&text, "kernel ", k, ": extern ", program.definitions[kernel.value].function,
                        " -> %", kernel.value, " ", ir::ToString(type, graph));
        break;
      case Kernel::Kind::kCopy:
        absl::StrAppend(&text, "kernel ", k, ": copy %", kernel.value, " -> output ",
                        kernel.output);
        break;
    }
    std::vector<std::string> reads;
    for (const Access& access : kernel.reads) {
      reads.push_back(absl::StrCat("%", access.value, " at ", access.map.ToString()));
    }
    if (!reads.empty()) absl::StrAppend(&text, "\n    reads ", absl::StrJoin(reads, "; "));
    text += "\n";
  }
  return text;
}

}  // namespace kiln
