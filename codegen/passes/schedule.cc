#include "codegen/passes/schedule.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

using Kind = ir::Definition::Kind;

// The realized values one kernel reads: each (value, map) once, in the
// order of a depth-first walk through its loads and those of the values
// inlined into it. Iterative: an inlined chain is as deep as the graph is
// long. Listing each access once also bounds the walk: a chain of x + x
// would otherwise list its input 2^n times.
class ReadCollector {
 public:
  ReadCollector(const ir::LoopProgram& program, const std::vector<bool>& realized)
      : program_(program), realized_(realized) {}

  // Adds what reading `value` at `map` touches.
  void Add(int value, const ir::AffineMap& map) {
    std::vector<Access> stack = {ResolveViews(program_, value, map)};
    while (!stack.empty()) {
      Access access = std::move(stack.back());
      stack.pop_back();
      if (!seen_
               .insert({access.value, access.map.num_variables, access.map.coefficients,
                        access.map.offsets})
               .second) {
        continue;
      }
      if (realized_[access.value]) {
        reads_.push_back(std::move(access));
        continue;
      }
      // Pushed last to first, so they are walked first to last.
      const std::vector<ir::Expr>& exprs = program_.definitions[access.value].exprs;
      for (auto expr = exprs.rbegin(); expr != exprs.rend(); ++expr) {
        if (expr->kind != ir::Expr::Kind::kLoad) continue;
        stack.push_back(
            ResolveViews(program_, expr->value, ir::LoadCoordinates(*expr, access.map)));
      }
    }
  }

  std::vector<Access> Take() { return std::move(reads_); }

 private:
  const ir::LoopProgram& program_;
  const std::vector<bool>& realized_;
  std::set<std::tuple<int, int, std::vector<std::vector<int64_t>>, std::vector<int64_t>>> seen_;
  std::vector<Access> reads_;
};

// The outer dims of a loop kernel: all output dims but the last for
// pointwise and copy kernels (the last is the inner loop); the output dims
// without trailing 1s for reductions (the reduction is the inner loop).
std::vector<ir::Dim> OuterSizes(const Kernel& kernel, const ir::Graph& graph) {
  std::vector<ir::Dim> sizes = graph.values[kernel.value].sizes;
  if (kernel.kind == Kernel::Kind::kReduction) {
    while (!sizes.empty() && sizes.back() == ir::Dim::Constant(1)) sizes.pop_back();
  } else if (!sizes.empty()) {
    sizes.pop_back();
  }
  return sizes;
}

// Whether reading a value at `map` touches only the row given by the first
// `outer` loop variables.
bool RowLocal(const ir::AffineMap& map, int outer) {
  if (map.num_coordinates() < outer) return false;
  for (int r = 0; r < map.num_coordinates(); ++r) {
    for (int c = 0; c < outer && c < map.num_variables; ++c) {
      const int64_t want = r < outer && r == c ? 1 : 0;
      if (map.coefficients[r][c] != want) return false;
    }
    if (r < outer) {
      if (map.offsets[r] != 0) return false;
      for (int c = outer; c < map.num_variables; ++c) {
        if (map.coefficients[r][c] != 0) return false;
      }
    }
  }
  return true;
}

// Whether a kernel is a loop nest over its output (pointwise, reduction,
// copy), which may share its outer loops with others.
bool IsLoop(Kernel::Kind kind) {
  return kind == Kernel::Kind::kPointwise || kind == Kernel::Kind::kReduction ||
         kind == Kernel::Kind::kCopy;
}

void GroupKernels(const ir::Graph& graph, const ir::LoopProgram& program, Schedule& schedule) {
  // Reading an alias reads the memory of the value it aliases.
  auto root = [&](int value) {
    while (program.definitions[value].kind == Kind::kAlias)
      value = program.definitions[value].source;
    return value;
  };
  std::vector<int> written_by(graph.values.size(), -1);
  int64_t group_calls = 0;  // of the last group: a group is one function, held to kMaxFusedCalls
  for (int k = 0; k < static_cast<int>(schedule.kernels.size()); ++k) {
    Kernel& kernel = schedule.kernels[k];
    // Extern, concat, scan and scatter kernels are groups of their own.
    const bool loop = IsLoop(kernel.kind);
    const std::vector<ir::Dim> outer = loop ? OuterSizes(kernel, graph) : std::vector<ir::Dim>();
    kernel.outer_rank = static_cast<int>(outer.size());
    bool join = loop && !outer.empty() && !schedule.groups.empty() &&
                group_calls + kernel.calls <= kMaxFusedCalls;
    if (join) {
      const KernelGroup& group = schedule.groups.back();
      const Kernel& first = schedule.kernels[group.begin];
      join = IsLoop(first.kind) && OuterSizes(first, graph) == outer;
      for (const Access& access : kernel.reads) {
        const int writer = written_by[root(access.value)];
        if (join && writer >= group.begin &&
            (access.value != root(access.value) || !RowLocal(access.map, kernel.outer_rank))) {
          join = false;
        }
      }
    }
    if (join) {
      ++schedule.groups.back().end;
      group_calls += kernel.calls;
    } else {
      schedule.groups.push_back({k, k + 1, loop ? kernel.outer_rank : 0});
      group_calls = kernel.calls;
    }
    schedule.group_of.push_back(static_cast<int>(schedule.groups.size()) - 1);
    if (kernel.kind != Kernel::Kind::kCopy) written_by[kernel.value] = k;
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
    if (definition.kind == Kind::kPointwise || definition.kind == Kind::kReduction ||
        definition.kind == Kind::kScan || definition.kind == Kind::kScatter) {
      for (const ir::Expr& expr : definition.exprs) {
        if (expr.kind != ir::Expr::Kind::kLoad) continue;
        read.push_back(base_of(expr.value));
        // A bounded or gathered load guards a read of memory: an inlined
        // producer would be expanded at coordinates outside it (or at
        // coordinates that are no affine map of the loop variables).
        if (expr.bounded || expr.gathered >= 0) must_realize[read.back()] = true;
      }
      // A scatter's start is read at the element written, like a part of a
      // concat: a pointwise producer is inlined into the start's loop.
      if (definition.kind == Kind::kScatter && definition.source >= 0) {
        read.push_back(base_of(definition.source));
      }
    } else if (definition.kind == Kind::kExtern) {
      for (int operand : definition.operands) {
        read.push_back(base_of(operand));
        must_realize[read.back()] = true;  // extern calls read memory
      }
    } else if (definition.kind == Kind::kConcat) {
      for (int operand : definition.operands) read.push_back(base_of(operand));
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
                           kind == Kind::kConcat || kind == Kind::kScan || kind == Kind::kScatter ||
                           (kind == Kind::kPointwise && (must_realize[v] || consumers[v] > 1));
  }

  // What one kernel may hold: the calls of its value and of the values
  // inlined into it, each inlined value counted once per load that reads
  // it as written (the emitter expands it once per map it is read at). A
  // value whose count would pass kMaxFusedCalls realizes its inlined
  // producers instead, which then are kernels of their own: so no kernel
  // holds more calls than kMaxFusedCalls (or its own value's, if more).
  // Values are in topological order: a producer's count is final when its
  // consumer is counted.
  std::vector<int64_t> fused_calls(num_values, 0);
  for (int v = 0; v < num_values; ++v) {
    const ir::Definition& definition = program.definitions[v];
    std::set<std::tuple<int, std::vector<std::vector<int64_t>>, std::vector<int64_t>>> loads;
    std::vector<int> inlined;
    for (const ir::Expr& expr : definition.exprs) {
      if (expr.kind == ir::Expr::Kind::kCall) ++fused_calls[v];
      if (expr.kind == ir::Expr::Kind::kLoad &&
          loads.insert({expr.value, expr.index.coefficients, expr.index.offsets}).second) {
        inlined.push_back(base_of(expr.value));
      }
    }
    if (definition.kind == Kind::kScatter && definition.source >= 0) {
      inlined.push_back(base_of(definition.source));
    }
    if (definition.kind == Kind::kConcat) {
      for (int operand : definition.operands) inlined.push_back(base_of(operand));
    }
    int64_t total = fused_calls[v];
    for (int producer : inlined) {
      if (!schedule.realized[producer]) total += fused_calls[producer];
    }
    if (total > kMaxFusedCalls) {
      for (int producer : inlined) schedule.realized[producer] = true;
    } else {
      fused_calls[v] = total;
    }
  }

  // Values are in topological order, so realized values in value order is a
  // valid execution order.
  std::vector<int> kernel_of(num_values, -1);
  for (int v = 0; v < num_values; ++v) {
    const ir::Definition& definition = program.definitions[v];
    if (!schedule.realized[v] || definition.kind == Kind::kInput ||
        definition.kind == Kind::kAlias) {
      continue;
    }
    Kernel kernel;
    kernel.value = v;
    kernel.calls = fused_calls[v];
    if (definition.kind == Kind::kReduction) kernel.kind = Kernel::Kind::kReduction;
    if (definition.kind == Kind::kScan) kernel.kind = Kernel::Kind::kScan;
    if (definition.kind == Kind::kScatter) kernel.kind = Kernel::Kind::kScatter;
    if (definition.kind == Kind::kConcat) {
      kernel.kind = Kernel::Kind::kConcat;
      ReadCollector reads(program, schedule.realized);
      for (int operand : definition.operands) {
        reads.Add(operand, ir::AffineMap::Identity(graph.values[operand].rank()));
      }
      kernel.reads = reads.Take();
    } else if (definition.kind == Kind::kExtern) {
      kernel.kind = Kernel::Kind::kExtern;
      for (int operand : definition.operands) {
        kernel.reads.push_back(
            ResolveViews(program, operand, ir::AffineMap::Identity(graph.values[operand].rank())));
      }
    } else {
      ReadCollector reads(program, schedule.realized);
      for (const ir::Expr& expr : definition.exprs) {
        if (expr.kind != ir::Expr::Kind::kLoad) continue;
        const ir::AffineMap identity = ir::AffineMap::Identity(expr.index.num_variables);
        reads.Add(expr.value, ir::LoadCoordinates(expr, identity));
      }
      kernel.reads = reads.Take();
      kernel.point_reads = static_cast<int>(kernel.reads.size());
      if (definition.kind == Kind::kScatter && definition.source >= 0) {
        ReadCollector start(program, schedule.realized);
        start.Add(definition.source, ir::AffineMap::Identity(graph.values[v].rank()));
        for (Access& access : start.Take()) kernel.reads.push_back(std::move(access));
      }
    }
    kernel_of[v] = static_cast<int>(schedule.kernels.size());
    schedule.kernels.push_back(std::move(kernel));
  }

  std::vector<bool> written(num_values, false);
  for (int output : graph.outputs) {
    // An output that is its source's memory in order (a reshape of a bmm
    // result, a transpose of a transpose) is written where the source is
    // computed: no copy.
    int target = output;
    const ir::Definition& definition = program.definitions[output];
    const ir::TensorType& type = graph.values[output];
    if (definition.kind == Kind::kAlias && definition.offset == 0 &&
        program.definitions[definition.source].kind != Kind::kAlias &&
        type.dtype == graph.values[definition.source].dtype &&
        ir::SameElementCount(type, graph.values[definition.source])) {
      if (definition.strides == ir::ContiguousStrides(type.sizes)) target = definition.source;
    } else if (definition.kind == Kind::kView) {
      const Access base = ResolveViews(program, output, ir::AffineMap::Identity(type.rank()));
      if (base.map.IsIdentity() && graph.values[base.value].sizes == type.sizes &&
          kernel_of[base.value] >= 0) {
        target = base.value;
      }
    }
    const Kind kind = program.definitions[target].kind;
    if ((kind == Kind::kPointwise || kind == Kind::kExtern || kind == Kind::kReduction ||
         kind == Kind::kConcat || kind == Kind::kScan || kind == Kind::kScatter) &&
        !written[target]) {
      written[target] = true;
      schedule.output_kernel.push_back(kernel_of[target]);
      continue;
    }
    Kernel copy;
    copy.kind = Kernel::Kind::kCopy;
    copy.value = output;
    copy.output = static_cast<int>(schedule.output_kernel.size());
    const int copied = base_of(output);
    copy.calls = schedule.realized[copied] ? 0 : fused_calls[copied];
    ReadCollector reads(program, schedule.realized);
    reads.Add(output, ir::AffineMap::Identity(graph.values[output].rank()));
    copy.reads = reads.Take();
    schedule.output_kernel.push_back(schedule.kernels.size());
    schedule.kernels.push_back(std::move(copy));
  }
  GroupKernels(graph, program, schedule);
  return schedule;
}

std::string ToString(const Schedule& schedule, const ir::Graph& graph,
                     const ir::LoopProgram& program) {
  std::string text;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const Kernel& kernel = schedule.kernels[k];
    const KernelGroup& group = schedule.groups[schedule.group_of[k]];
    if (group.begin == static_cast<int>(k) && group.end - group.begin > 1) {
      absl::StrAppend(&text, "group of kernels ", group.begin, "-", group.end - 1,
                      ", row by row over ", group.outer_rank, " outer dim",
                      group.outer_rank == 1 ? "" : "s", ":\n");
    }
    const ir::TensorType& type = graph.values[kernel.value];
    switch (kernel.kind) {
      case Kernel::Kind::kPointwise:
      case Kernel::Kind::kReduction:
      case Kernel::Kind::kScan:
      case Kernel::Kind::kScatter: {
        // The inlined values: pointwise definitions reached without passing
        // through a realized one.
        std::vector<int> inlined;
        std::vector<bool> seen(graph.values.size(), false);  // each value walked once
        std::vector<int> stack = {kernel.value};
        while (!stack.empty()) {
          const ir::Definition& definition = program.definitions[stack.back()];
          stack.pop_back();
          std::vector<int> loaded;
          for (const ir::Expr& expr : definition.exprs) {
            if (expr.kind == ir::Expr::Kind::kLoad) loaded.push_back(expr.value);
          }
          if (definition.kind == ir::Definition::Kind::kScatter && definition.source >= 0) {
            loaded.push_back(definition.source);
          }
          for (int value : loaded) {
            const int base =
                ResolveViews(program, value, ir::AffineMap::Identity(graph.values[value].rank()))
                    .value;
            if (schedule.realized[base] || seen[base]) continue;
            seen[base] = true;
            inlined.push_back(base);
            stack.push_back(base);
          }
        }
        std::sort(inlined.begin(), inlined.end());
        absl::StrAppend(
            &text, "kernel ", k,
            kernel.kind == Kernel::Kind::kReduction
                ? absl::StrCat(": ", program.definitions[kernel.value].combiner, " reduction %")
            : kernel.kind == Kernel::Kind::kScan
                ? absl::StrCat(": ", program.definitions[kernel.value].combiner, " scan along dim ",
                               program.definitions[kernel.value].axis, " %")
            : kernel.kind == Kernel::Kind::kScatter
                ? absl::StrCat(program.definitions[kernel.value].combiner == "assign"
                                   ? ": scatter-write along dim "
                                   : ": scatter-add along dim ",
                               program.definitions[kernel.value].axis, " %")
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
        absl::StrAppend(&text, "kernel ", k, ": extern ",
                        program.definitions[kernel.value].function, " -> %", kernel.value, " ",
                        ir::ToString(type, graph));
        break;
      case Kernel::Kind::kCopy:
        absl::StrAppend(&text, "kernel ", k, ": copy %", kernel.value, " -> output ",
                        kernel.output);
        break;
      case Kernel::Kind::kConcat:
        absl::StrAppend(&text, "kernel ", k, ": concat -> %", kernel.value, " ",
                        ir::ToString(type, graph));
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
