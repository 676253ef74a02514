#include "codegen/emit/emit_cpp.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/emit/functions.h"
#include "common/status_macros.h"

extern const char kKilnAbiHeaderText[];
extern const char kKilnMathText[];

namespace kiln {
namespace {

using Kind = ir::Definition::Kind;
using ir::ComputeType;

// Conversions between storage and compute types that C does not spell
// directly: bfloat16 is stored as its upper 16 bits, rounded to nearest even
// on the way in, NaN kept NaN. (_Float16 converts with a plain cast.)
constexpr char kPrelude[] = R"(
#define KILN_EXPORT extern "C" __attribute__((visibility("default")))
#define KILN_ALIGN(bytes) ((((kiln_int64)(bytes)) + 63) / 64 * 64)
typedef unsigned short kiln_bf16;
static inline float kiln_bf16_to_float(kiln_bf16 h) {
  unsigned int bits = (unsigned int)h << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
static inline kiln_bf16 kiln_float_to_bf16(float f) {
  unsigned int bits;
  __builtin_memcpy(&bits, &f, 4);
  if (f != f) return (kiln_bf16)((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return (kiln_bf16)(bits >> 16);
}
)";

// Where a realized value's elements are: element c is at
// storage[offset + sum strides[d] * c[d]].
struct Layout {
  std::vector<ir::SymExpr> strides;
  ir::SymExpr offset;
};

// The C expression of a symbolic integer: symbols are kiln_run's
// `symbols[i]`.
std::string SymC(const ir::SymExpr& expr) {
  if (expr.terms.empty()) return "0";
  std::vector<std::string> terms;
  for (const auto& term : expr.terms) {
    std::vector<std::string> factors;
    for (int symbol : term.symbols) factors.push_back(absl::StrCat("symbols[", symbol, "]"));
    if (term.coefficient != 1 || factors.empty()) factors.push_back(absl::StrCat(term.coefficient));
    terms.push_back(absl::StrJoin(factors, " * "));
  }
  // One factor needs no parentheses: "symbols[0]", "64".
  if (terms.size() == 1 && terms[0].find(' ') == std::string::npos) return terms[0];
  return absl::StrCat("(", absl::StrJoin(terms, " + "), ")");
}

// The C expression of a size.
std::string Extent(const ir::Dim& dim) { return SymC(ir::SymExpr::Of(dim)); }

// An alias's offset adds to its source's, down its alias chain (a loop: a
// chain of reshapes is as long as the graph).
Layout MemoryLayout(const ir::Graph& graph, const ir::LoopProgram& program, int value) {
  const ir::Definition& definition = program.definitions[value];
  Layout layout;
  if (definition.kind == Kind::kAlias) {
    layout.strides = definition.strides;
    for (int alias = value; program.definitions[alias].kind == Kind::kAlias;
         alias = program.definitions[alias].source) {
      layout.offset += ir::SymExpr::Constant(program.definitions[alias].offset);
    }
    return layout;
  }
  const ir::TensorType& type = graph.values[value];
  layout.strides = definition.kind == Kind::kInput ? type.strides : ir::ContiguousStrides(type.sizes);
  return layout;
}

// An element offset, linear in the loop variables.
struct Linear {
  ir::SymExpr constant;
  std::vector<ir::SymExpr> coefficients;  // per loop variable

  std::string ToString() const {
    std::vector<std::string> terms;
    for (size_t c = 0; c < coefficients.size(); ++c) {
      if (coefficients[c] == 0) continue;
      terms.push_back(coefficients[c] == 1 ? absl::StrCat("i", c)
                                           : absl::StrCat("i", c, " * ", SymC(coefficients[c])));
    }
    if (constant != 0 || terms.empty()) terms.push_back(SymC(constant));
    return absl::StrJoin(terms, " + ");
  }
};

Linear Offset(const Layout& layout, const ir::AffineMap& map) {
  Linear linear;
  linear.constant = layout.offset;
  linear.coefficients.assign(map.num_variables, ir::SymExpr());
  for (int r = 0; r < map.num_coordinates(); ++r) {
    linear.constant += layout.strides[r] * map.offsets[r];
    for (int c = 0; c < map.num_variables; ++c) {
      linear.coefficients[c] += layout.strides[r] * map.coefficients[r][c];
    }
  }
  return linear;
}

// Storage -> compute conversion of the element `text` of type `stored`.
std::string FromStorage(const std::string& text, ir::DType stored) {
  if (stored == ir::DType::kBFloat16) return absl::StrCat("kiln_bf16_to_float(", text, ")");
  if (stored == ir::DType::kFloat16) return absl::StrCat("(float)", text);
  return text;
}

std::string ToStorage(const std::string& text, ir::DType stored) {
  if (stored == ir::DType::kBFloat16) return absl::StrCat("kiln_float_to_bf16(", text, ")");
  if (stored == ir::DType::kFloat16) return absl::StrCat("(_Float16)", text);
  return text;
}

std::string StorageName(int storage) { return absl::StrCat("b", storage); }

// The parameters of one group function: one pointer per storage it
// touches, in order of first use; row buffers are locals, not parameters.
class Params {
 public:
  explicit Params(const BufferPlan& plan) : plan_(plan) {}

  std::string For(int storage) {
    if (plan_.storages[storage].kind == Storage::Kind::kRow) {
      if (std::find(rows_.begin(), rows_.end(), storage) == rows_.end()) rows_.push_back(storage);
      return absl::StrCat("row", storage);
    }
    for (size_t p = 0; p < storages_.size(); ++p) {
      if (storages_[p] == storage) return absl::StrCat("p", p);
    }
    storages_.push_back(storage);
    return absl::StrCat("p", storages_.size() - 1);
  }
  const std::vector<int>& storages() const { return storages_; }
  const std::vector<int>& rows() const { return rows_; }

 private:
  const BufferPlan& plan_;
  std::vector<int> storages_;
  std::vector<int> rows_;
};

// A row buffer holds one row: the group's outer loop variables drop out of
// its index (reads of it are row-local by construction).
Linear ForStorage(Linear offset, const Storage& storage, int outer_rank) {
  if (storage.kind == Storage::Kind::kRow) {
    for (int c = 0; c < outer_rank && c < static_cast<int>(offset.coefficients.size()); ++c) {
      offset.coefficients[c] = ir::SymExpr();
    }
  }
  return offset;
}

// Emits expressions into one loop body. Names are deterministic (one counter
// per kernel); equal expression text is computed once per body.
//
// Expansion is iterative: an inlined pointwise chain is as deep as the
// graph is long (a 100,000-node chain), so it walks an explicit stack, never
// the C++ one. The names and lines are those of a depth-first walk over
// each call's operands in order; an expression expanded before at the same
// map reuses its name (a second expansion would only find its text
// memoized), which also keeps a chain of x + x from expanding 2^n times.
// Every call is bound to a named temporary, so the C++ is flat however deep
// the chain: no nested expression for clang to recurse through.
class BodyEmitter {
 public:
  BodyEmitter(const ir::Graph& graph, const ir::LoopProgram& program, const Schedule& schedule,
              const BufferPlan& plan, Params& params, int& next_var, std::string indent,
              std::string& out, int outer_rank)
      : outer_rank_(outer_rank),
        graph_(graph),
        program_(program),
        schedule_(schedule),
        plan_(plan),
        params_(params),
        next_var_(next_var),
        indent_(std::move(indent)),
        out_(out) {}

  // `value` at map(loop variables), in compute type `want`.
  absl::StatusOr<std::string> Value(int value, const ir::AffineMap& map, ir::DType want) {
    return Run(Task::ForValue(value, map, want));
  }

  // The definition of `value` itself, expanded at map(loop variables).
  absl::StatusOr<std::string> Expression(int value, int index, const ir::AffineMap& map) {
    return Run(Task::ForExpression(value, index, map));
  }

  std::string Bind(ir::DType dtype, const std::string& text) {
    auto it = memo_.find(text);
    if (it != memo_.end()) return it->second;
    const std::string name = absl::StrCat("v", next_var_++);
    absl::StrAppend(&out_, indent_, "const ", StorageCType(dtype), " ", name, " = ", text, ";\n");
    memo_.emplace(text, name);
    return name;
  }

  void Line(const std::string& text) { absl::StrAppend(&out_, indent_, text, "\n"); }

  // Whether anything emitted so far computes a kiln_math.h polynomial.
  bool calls_polynomial() const { return calls_polynomial_; }

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

    static Task ForValue(int value, const ir::AffineMap& map, ir::DType want) {
      Task task;
      task.is_value = true;
      task.value = value;
      task.map = map;
      task.want = want;
      return task;
    }
    static Task ForExpression(int value, int index, const ir::AffineMap& map) {
      Task task;
      task.value = value;
      task.index = index;
      task.map = map;
      return task;
    }
  };
  // What one step does: finishes its task with a name, or asks for a child.
  struct Step {
    std::optional<std::string> name;
    std::optional<Task> child;
  };
  using ExpressionKey = std::tuple<int, int, int, std::vector<std::vector<int64_t>>,
                                   std::vector<int64_t>>;
  static ExpressionKey KeyOf(const Task& task) {
    return {task.value, task.index, task.map.num_variables, task.map.coefficients,
            task.map.offsets};
  }

  absl::StatusOr<std::string> Run(Task root) {
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
  absl::StatusOr<Step> ValueStep(Task& task) {
    if (task.started) return Step{Convert(task.operands[0], task.have, task.want), std::nullopt};
    task.started = true;
    const Access base = ResolveViews(program_, task.value, task.map);
    if (!schedule_.realized[base.value]) {
      const ir::Definition& definition = program_.definitions[base.value];
      task.have = definition.exprs[definition.root].dtype;
      return Step{std::nullopt, Task::ForExpression(base.value, definition.root, base.map)};
    }
    const ir::DType stored = graph_.values[base.value].dtype;
    const int storage = plan_.storage_of[base.value];
    const std::string param = params_.For(storage);
    const Linear offset = ForStorage(Offset(MemoryLayout(graph_, program_, base.value), base.map),
                                     plan_.storages[storage], outer_rank_);
    const ir::DType have = ComputeType(stored);
    const std::string name =
        Bind(have, FromStorage(absl::StrCat(param, "[", offset.ToString(), "]"), stored));
    return Step{Convert(name, have, task.want), std::nullopt};
  }

  std::string Convert(const std::string& name, ir::DType have, ir::DType want) {
    if (have == want) return name;
    return Bind(want, absl::StrCat("(", StorageCType(want), ")", name));
  }

  // One expression: leaves at once; a load through its value task; a call
  // once each operand, in order, has a name.
  absl::StatusOr<Step> ExpressionStep(Task& task) {
    if (!task.started) {
      auto it = expanded_.find(KeyOf(task));
      if (it != expanded_.end()) return Step{it->second, std::nullopt};
    }
    const ir::Expr& expr = program_.definitions[task.value].exprs[task.index];
    const ir::AffineMap& map = task.map;
    switch (expr.kind) {
      case ir::Expr::Kind::kLoad:
        if (task.started) return Step{task.operands[0], std::nullopt};
        task.started = true;
        return Step{std::nullopt, Task::ForValue(expr.value, expr.index.After(map), expr.dtype)};
      case ir::Expr::Kind::kConstant:
        return Step{EmitLiteral(expr.constant, expr.dtype), std::nullopt};
      case ir::Expr::Kind::kSize:
        return Step{Bind(expr.dtype,
                         absl::StrCat("(", StorageCType(expr.dtype), ")", SymC(expr.size))),
                    std::nullopt};
      case ir::Expr::Kind::kIndex: {
        Linear linear;
        linear.constant = ir::SymExpr::Constant(map.offsets[expr.variable]);
        for (int64_t coefficient : map.coefficients[expr.variable]) {
          linear.coefficients.push_back(ir::SymExpr::Constant(coefficient));
        }
        return Step{Bind(expr.dtype, absl::StrCat("(", StorageCType(expr.dtype), ")(",
                                                  linear.ToString(), ")")),
                    std::nullopt};
      }
      case ir::Expr::Kind::kCall: {
        task.started = true;
        if (task.operands.size() < expr.operands.size()) {
          return Step{std::nullopt, Task::ForExpression(task.value,
                                                        expr.operands[task.operands.size()], map)};
        }
        auto text = EmitFunction(expr.function, task.operands, expr.dtype);
        if (!text.ok()) return absl::InternalError(std::string(text.status().message()));
        calls_polynomial_ |= CallsPolynomial(expr.function, expr.dtype);
        return Step{Bind(expr.dtype, *text), std::nullopt};
      }
    }
    return absl::InternalError("unknown expression kind");
  }

  const int outer_rank_;
  const ir::Graph& graph_;
  const ir::LoopProgram& program_;
  const Schedule& schedule_;
  const BufferPlan& plan_;
  Params& params_;
  int& next_var_;
  const std::string indent_;
  std::string& out_;
  bool calls_polynomial_ = false;
  std::map<std::string, std::string> memo_;  // expression text -> its name
  std::map<ExpressionKey, std::string> expanded_;  // expression at a map -> its name
};

// A storage's element type: its first value's, or (an output written by a
// copy, which holds no value) the output's.
ir::DType StorageDType(const ir::Graph& graph, const Storage& storage) {
  const int value = storage.values.empty() ? graph.outputs[storage.index] : storage.values.front();
  return graph.values[value].dtype;
}

int WrittenStorage(const Kernel& kernel, const BufferPlan& plan) {
  if (kernel.kind != Kernel::Kind::kCopy) return plan.storage_of[kernel.value];
  // An output written by a copy has a storage of its own (the only one of its index).
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    if (plan.storages[s].kind == Storage::Kind::kOutput && plan.storages[s].index == kernel.output) {
      return s;
    }
  }
  return -1;
}

std::string For(int variable, const std::string& extent, const std::string& indent) {
  if (extent == "1") return absl::StrCat(indent, "{\n", indent, "  const kiln_int64 i", variable, " = 0;\n");
  return absl::StrCat(indent, "for (kiln_int64 i", variable, " = 0; i", variable, " < ", extent,
                      "; ++i", variable, ") {\n");
}

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
  // the last levels of the tree) are selects, not branches (attention's
  // softmax without its GEMMs: 109 -> 90 us).
  if (name == "max") {
    return Combiner{boolean ? 0.0 : -INFINITY,
                    floating ? "((({a} != {a}) | ({a} > {b})) ? {a} : {b})"
                             : "({a} > {b} ? {a} : {b})"};
  }
  if (name == "max_nan_unspecified") return Combiner{-INFINITY, "({a} > {b} ? {a} : {b})"};
  if (name == "min") {
    return Combiner{boolean ? 1.0 : INFINITY,
                    floating ? "((({a} != {a}) | ({a} < {b})) ? {a} : {b})"
                             : "({a} < {b} ? {a} : {b})"};
  }
  return absl::InternalError(absl::StrCat("unknown combiner ", name));
}

std::string Step(const Combiner& combiner, const std::string& a, const std::string& b) {
  return absl::StrReplaceAll(combiner.step, {{"{a}", a}, {"{b}", b}});
}

// The lanes' final combine, an explicit tree in clang's vector types (so it
// stays in registers: as loops over `lanes` it went through the stack, each
// narrower load waiting on a wider store; softmax 406 -> 377 us) into one
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
      absl::StrAppend(&tree, indent, "  l16[", k, "] = ",
                      Step(combiner, absl::StrCat("l16[", k, "]"),
                           absl::StrCat("l16[", k + vectors / 2, "]")),
                      ";\n");
    }
  }
  absl::StrAppend(&tree, indent, "  const kiln_lanes8 l8 = ", Step(combiner, "l16[0].lo", "l16[0].hi"),
                  ";\n");
  absl::StrAppend(&tree, indent, "  const kiln_lanes4 l4 = ", Step(combiner, "l8.lo", "l8.hi"), ";\n");
  absl::StrAppend(&tree, indent, "  const kiln_lanes2 l2 = ", Step(combiner, "l4.lo", "l4.hi"), ";\n");
  absl::StrAppend(&tree, indent, "  lanes[0] = ", Step(combiner, "l2.x", "l2.y"), ";\n", indent,
                  "}\n");
  return tree;
}

// Partial accumulators per reduction: clang vectorizes the lanes, and the
// final combine is an explicit tree (it would otherwise be a serial chain).
// 16 lanes are one 512-bit float vector, whose every step waits for the
// last; long rows (512 or more, a multiple of 64: no long scalar tail) get
// 64 lanes, four independent chains (the chunk loop fully unrolled keeps
// them in registers). Measured: softmax over 1024-wide rows 537 -> 474 us;
// attention's 128-wide rows 84 -> 135 us (the longer tree combine per row
// costs more than the chains save), hence the threshold.
int LanesFor(const ir::Dim& extent) {
  return !extent.is_symbolic() && extent.constant >= 512 && extent.constant % 64 == 0 ? 64 : 16;
}

// One kernel's loops over its output dims from `first_dim` on (the group's
// loops cover the ones before), its body, and its store.
absl::Status EmitKernelBody(const Kernel& kernel, int first_dim, const ir::Graph& graph,
                            const ir::LoopProgram& program, const Schedule& schedule,
                            const BufferPlan& plan, Params& params, int& next_var,
                            std::string indent, std::string& body) {
  const ir::TensorType& type = graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  const ir::DType stored = type.dtype;
  const int written_storage = WrittenStorage(kernel, plan);
  const std::string out = params.For(written_storage);
  const std::string outer_indent = indent;
  size_t innermost = body.size();  // where the innermost loop starts, and its indent
  std::string innermost_indent = indent;
  for (int d = first_dim; d < rank; ++d) {
    innermost = body.size();
    innermost_indent = indent;
    body += For(d, Extent(type.sizes[d]), indent);
    indent += "  ";
  }
  const std::string target = absl::StrCat(
      out, "[",
      ForStorage(Offset(Layout{ir::ContiguousStrides(type.sizes), ir::SymExpr()},
                        ir::AffineMap::Identity(rank)),
                 plan.storages[written_storage], first_dim)
          .ToString(),
      "]");

  if (kernel.kind != Kernel::Kind::kReduction) {
    BodyEmitter emitter(graph, program, schedule, plan, params, next_var, indent, body, first_dim);
    std::string result;
    if (kernel.kind == Kernel::Kind::kCopy) {
      ASSIGN_OR_RETURN(result, emitter.Value(kernel.value, ir::AffineMap::Identity(rank),
                                             ComputeType(stored)));
    } else {
      const ir::Definition& definition = program.definitions[kernel.value];
      ASSIGN_OR_RETURN(result, emitter.Expression(kernel.value, definition.root,
                                                  ir::AffineMap::Identity(rank)));
    }
    emitter.Line(absl::StrCat(target, " = ", ToStorage(result, stored), ";"));
    // A polynomial makes the body long enough that clang's cost model
    // leaves the vector loop uninterleaved; two vectors per iteration
    // overlap better. Measured on softmax's exp pass (354 -> 344 us);
    // gelu's erf loop is unchanged (126 us), and the rest is assumed alike.
    if (emitter.calls_polynomial() && rank > first_dim && Extent(type.sizes[rank - 1]) != "1") {
      body.insert(innermost,
                  absl::StrCat(innermost_indent, "#pragma clang loop interleave_count(2)\n"));
    }
  } else {
    const ir::Definition& definition = program.definitions[kernel.value];
    const ir::DType accumulate = definition.exprs[definition.root].dtype;
    const char* acc_type = StorageCType(accumulate);
    const int reductions = static_cast<int>(definition.reduction_sizes.size());
    const int variables = rank + reductions;
    const ir::AffineMap identity = ir::AffineMap::Identity(variables);
    const bool arg = definition.combiner == "argmax" || definition.combiner == "argmin";
    const ir::Dim inner = reductions > 0 ? definition.reduction_sizes.back() : ir::Dim::Constant(1);
    const int num_lanes = LanesFor(inner);
    const bool lanes = !arg && reductions > 0 && (inner.is_symbolic() || inner.constant >= 32);
    Combiner combiner{0, ""};
    if (!arg) {
      ASSIGN_OR_RETURN(combiner, CombinerFor(definition.combiner, accumulate));
    }
    const std::string init = EmitLiteral(arg ? (definition.combiner == "argmax" ? -INFINITY : INFINITY)
                                             : combiner.init,
                                         accumulate);
    absl::StrAppend(&body, indent, acc_type, " acc = ", init, ";\n");
    if (arg) absl::StrAppend(&body, indent, "kiln_int64 acc_index = 0;\n");
    if (lanes) absl::StrAppend(&body, indent, acc_type, " lanes[", num_lanes, "];\n");
    std::string loop_indent = indent;
    for (int r = 0; r + 1 < reductions; ++r) {
      body += For(rank + r, Extent(definition.reduction_sizes[r]), loop_indent);
      loop_indent += "  ";
    }
    // The lanes fold one innermost run at a time, then into acc: over
    // several reduced dims (a mean of [n, n]) each lane then sums a row's
    // share, not n * n / lanes values in one chain (1024 x 1024: 3.5e-6
    // relative error -> eager's).
    if (lanes) {
      absl::StrAppend(&body, loop_indent, "for (int k = 0; k < ", num_lanes, "; ++k) lanes[k] = ",
                      init, ";\n");
    }
    const int last = variables - 1;
    // One fold of the body at the current variables into `into`.
    auto fold = [&](const std::string& fold_indent, const std::string& into) -> absl::Status {
      BodyEmitter emitter(graph, program, schedule, plan, params, next_var, fold_indent, body,
                          first_dim);
      ASSIGN_OR_RETURN(const std::string element,
                       emitter.Expression(kernel.value, definition.root, identity));
      if (!arg) {
        emitter.Line(absl::StrCat(into, " = ", Step(combiner, into, element), ";"));
        return absl::OkStatus();
      }
      // The flat position over the reduced dims, first occurrence wins; a
      // NaN counts as the extreme, as in eager.
      std::vector<std::string> terms;
      ir::SymExpr stride = ir::SymExpr::Constant(1);
      for (int r = reductions - 1; r >= 0; --r) {
        terms.push_back(stride == 1 ? absl::StrCat("i", rank + r)
                                    : absl::StrCat("i", rank + r, " * ", SymC(stride)));
        stride = stride * ir::SymExpr::Of(definition.reduction_sizes[r]);
      }
      const char* better = definition.combiner == "argmax" ? ">" : "<";
      const std::string nan_wins =
          ir::IsFloatingPoint(accumulate)
              ? absl::StrCat(" || (", element, " != ", element, " && acc == acc)")
              : "";
      emitter.Line(absl::StrCat("if (", element, " ", better, " acc", nan_wins, ") { acc = ",
                                element, "; acc_index = ",
                                terms.empty() ? "0" : absl::StrJoin(terms, " + "), "; }"));
      return absl::OkStatus();
    };
    if (reductions == 0) {
      RETURN_IF_ERROR(fold(indent, "acc"));
    } else if (lanes) {
      // i<last> = chunk + k over full chunks, then a scalar tail.
      absl::StrAppend(&body, loop_indent, "kiln_int64 chunk = 0;\n", loop_indent, "for (; chunk + ",
                      num_lanes, " <= ", Extent(inner), "; chunk += ", num_lanes, ") {\n", loop_indent,
                      num_lanes > 16 ? "  #pragma clang loop unroll(full)\n" + loop_indent : "",
                      "  for (int k = 0; k < ", num_lanes, "; ++k) {\n", loop_indent,
                      "    const kiln_int64 i", last, " = chunk + k;\n");
      RETURN_IF_ERROR(fold(loop_indent + "    ", "lanes[k]"));
      absl::StrAppend(&body, loop_indent, "  }\n", loop_indent, "}\n", loop_indent,
                      "for (kiln_int64 i", last, " = chunk; i", last, " < ", Extent(inner), "; ++i", last,
                      ") {\n");
      RETURN_IF_ERROR(fold(loop_indent + "  ", "acc"));
      absl::StrAppend(&body, loop_indent, "}\n");
      absl::StrAppend(&body, LaneTree(combiner, acc_type, num_lanes, loop_indent));
      absl::StrAppend(&body, loop_indent, "acc = ", Step(combiner, "lanes[0]", "acc"), ";\n");
    } else {
      body += For(last, Extent(inner), loop_indent);
      RETURN_IF_ERROR(fold(loop_indent + "  ", "acc"));
      absl::StrAppend(&body, loop_indent, "}\n");
    }
    for (int r = reductions - 1; r > 0; --r) {
      absl::StrAppend(&body, std::string(indent.size() + 2 * (r - 1), ' '), "}\n");
    }
    const std::string result = arg ? "acc_index" : "acc";
    const ir::DType result_type = arg ? ir::DType::kInt64 : accumulate;
    std::string value = result;
    if (ComputeType(stored) != result_type) {
      value = absl::StrCat("(", StorageCType(ComputeType(stored)), ")", result);
    }
    absl::StrAppend(&body, indent, target, " = ", ToStorage(value, stored), ";\n");
  }
  for (int d = rank - 1; d >= first_dim; --d) {
    absl::StrAppend(&body, outer_indent, std::string(2 * (d - first_dim), ' '), "}\n");
  }
  return absl::OkStatus();
}

// Work (elements written or folded) below which a group runs on the
// calling thread, and the work each parallel chunk should get at least.
constexpr int64_t kParallelWork = 1 << 16;
constexpr int64_t kChunkWork = 1 << 15;

// Work per row of the group's first outer dim.
ir::SymExpr RowWork(const Kernel& kernel, const ir::Graph& graph, const ir::LoopProgram& program) {
  ir::SymExpr work = ir::Product(graph.values[kernel.value].sizes, 1);
  if (kernel.kind == Kernel::Kind::kReduction) {
    work = work * ir::Product(program.definitions[kernel.value].reduction_sizes);
  }
  return work;
}

// A group of loop kernels: one static function whose outer loops the
// kernels share, called directly or in chunks of its first outer dim on the
// runtime's pool.
absl::StatusOr<std::string> EmitGroup(int index, const KernelGroup& group, const ir::Graph& graph,
                                      const ir::LoopProgram& program, const Schedule& schedule,
                                      const BufferPlan& plan, std::string* call) {
  const Kernel& first = schedule.kernels[group.begin];
  const ir::TensorType& type = graph.values[first.value];
  const int outer = group.outer_rank;
  Params params(plan);
  int next_var = 0;
  std::string body, inner, indent = "  ";
  for (int d = 0; d < outer; ++d) {
    body += d == 0 ? absl::StrCat(indent, "for (kiln_int64 i0 = begin; i0 < end; ++i0) {\n")
                   : For(d, Extent(type.sizes[d]), indent);
    indent += "  ";
  }
  ir::SymExpr row_work;
  for (int k = group.begin; k < group.end; ++k) {
    const Kernel& kernel = schedule.kernels[k];
    // Each kernel of a group in a block of its own: two reductions both
    // declare `acc`.
    const bool block = group.end - group.begin > 1;
    if (block) absl::StrAppend(&inner, indent, "{  // kernel ", k, "\n");
    RETURN_IF_ERROR(EmitKernelBody(kernel, outer, graph, program, schedule, plan, params, next_var,
                                   block ? indent + "  " : indent, inner));
    if (block) absl::StrAppend(&inner, indent, "}\n");
    row_work += RowWork(kernel, graph, program);
  }
  // Row buffers: one row each, private to the thread running the row: on
  // the stack, or (symbolic lengths) in the runtime's per-thread scratch,
  // fetched once per chunk.
  std::string row_decls, row_bytes = "0";
  for (int storage : params.rows()) {
    const Storage& slot = plan.storages[storage];
    const ir::DType dtype = graph.values[slot.values.front()].dtype;
    const char* ctype = StorageCType(dtype);
    if (!slot.is_symbolic()) {
      absl::StrAppend(&body, indent, ctype, " row", storage, "[",
                      slot.bytes.constant() / ir::DTypeSize(dtype), "] __attribute__((aligned(64)));\n");
      continue;
    }
    absl::StrAppend(&row_decls, "  ", ctype, "* __restrict__ const row", storage, " = (", ctype,
                    "*)(rows + ", row_bytes, ");\n");
    absl::StrAppend(&row_bytes, " + KILN_ALIGN(", SymC(slot.bytes), ")");
  }
  if (!row_decls.empty()) {
    body = absl::StrCat("  char* const rows = (char*)rt->thread_scratch(rt->context, ", row_bytes,
                        ");\n", row_decls, body);
  }
  body += inner;
  for (int d = outer; d > 0; --d) absl::StrAppend(&body, std::string(2 * d, ' '), "}\n");

  // Distinct storages never overlap: every pointer is __restrict__; a value
  // computed in place reads and writes through one pointer. The first
  // storage of each kernel is written; a storage read by one kernel and
  // written by another in the group is written.
  std::vector<bool> written(params.storages().size(), false);
  for (int k = group.begin; k < group.end; ++k) {
    const int storage = WrittenStorage(schedule.kernels[k], plan);
    for (size_t p = 0; p < params.storages().size(); ++p) {
      if (params.storages()[p] == storage) written[p] = true;
    }
  }
  const std::string name = absl::StrCat("kiln_group_", index);
  std::vector<std::string> declarations = {"const kiln_runtime* rt", "const kiln_int64* symbols",
                                           "kiln_int64 begin", "kiln_int64 end"};
  std::vector<std::string> fields = {"const kiln_runtime* rt;", "const kiln_int64* symbols;"};
  std::vector<std::string> arguments, unpacked;
  for (size_t p = 0; p < params.storages().size(); ++p) {
    const int storage = params.storages()[p];
    const ir::DType dtype = StorageDType(graph, plan.storages[storage]);
    const std::string pointer = absl::StrCat(written[p] ? "" : "const ", StorageCType(dtype), "*");
    declarations.push_back(absl::StrCat(pointer, " __restrict__ p", p));
    fields.push_back(absl::StrCat(pointer, " p", p, ";"));
    arguments.push_back(StorageName(storage));
    unpacked.push_back(absl::StrCat("c->p", p));
  }
  std::string text = absl::StrCat("static void ", name, "(", absl::StrJoin(declarations, ", "),
                                  ") {\n  (void)rt;\n  (void)symbols;\n  (void)begin;\n  (void)end;\n",
                                  body, "}\n\n");
  const ir::Dim rows = outer > 0 ? type.sizes[0] : ir::Dim::Constant(1);
  // Symbolic work may be large: parallel_for runs it inline when it is not.
  const bool parallel =
      outer > 0 && (rows.is_symbolic() || !row_work.is_constant() ||
                    (rows.constant >= 2 && rows.constant * row_work.constant() >= kParallelWork));
  if (!parallel) {
    *call = absl::StrCat("  ", name, "(rt, symbols, 0, ", Extent(rows), arguments.empty() ? "" : ", ",
                         absl::StrJoin(arguments, ", "), ");\n");
    return text;
  }
  const std::string grain =
      row_work.is_constant()
          ? absl::StrCat(std::max<int64_t>(1, kChunkWork / std::max<int64_t>(1, row_work.constant())))
          : absl::StrCat("(", kChunkWork, " / ", SymC(row_work), " > 0 ? ", kChunkWork, " / ",
                         SymC(row_work), " : 1)");
  absl::StrAppend(&text, "typedef struct { ", absl::StrJoin(fields, " "), " } ", name, "_closure;\n",
                  "static void ", name, "_chunk(void* closure, kiln_int64 begin, kiln_int64 end) {\n",
                  "  const ", name, "_closure* c = (const ", name, "_closure*)closure;\n", "  ", name,
                  "(c->rt, c->symbols, begin, end", unpacked.empty() ? "" : ", ",
                  absl::StrJoin(unpacked, ", "),
                  ");\n}\n\n");
  *call = absl::StrCat("  {\n    const ", name, "_closure closure = {rt, symbols",
                       arguments.empty() ? "" : ", ", absl::StrJoin(arguments, ", "), "};\n",
                       "    rt->parallel_for(rt->context, ", Extent(rows), ", ", grain, ", ", name,
                       "_chunk, (void*)&closure);\n  }\n");
  return text;
}

// A concat kernel: one loop nest per part, over the part's own shape,
// writing at the part's offset along the axis; parts' pointwise producers
// are inlined into their loops.
absl::StatusOr<std::string> EmitConcat(int index, const Kernel& kernel, const ir::Graph& graph,
                                       const ir::LoopProgram& program, const Schedule& schedule,
                                       const BufferPlan& plan, std::string* call) {
  const ir::Definition& definition = program.definitions[kernel.value];
  const ir::TensorType& type = graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  Params params(plan);
  const std::string out = params.For(plan.storage_of[kernel.value]);
  const std::vector<ir::SymExpr> strides = ir::ContiguousStrides(type.sizes);
  int next_var = 0;
  std::string body;
  ir::SymExpr offset;  // along the axis
  for (int operand : definition.operands) {
    const ir::TensorType& part = graph.values[operand];
    std::string indent = "  ";
    absl::StrAppend(&body, indent, "{  // part %", operand, "\n");
    indent += "  ";
    for (int d = 0; d < rank; ++d) {
      body += For(d, Extent(part.sizes[d]), indent);
      indent += "  ";
    }
    BodyEmitter emitter(graph, program, schedule, plan, params, next_var, indent, body, 0);
    ASSIGN_OR_RETURN(const std::string value,
                     emitter.Value(operand, ir::AffineMap::Identity(rank), ComputeType(type.dtype)));
    Linear target = Offset(Layout{strides, ir::SymExpr()}, ir::AffineMap::Identity(rank));
    target.constant += offset * strides[definition.axis];
    emitter.Line(absl::StrCat(out, "[", target.ToString(), "] = ", ToStorage(value, type.dtype), ";"));
    for (int d = rank; d >= 0; --d) absl::StrAppend(&body, std::string(2 * d + 2, ' '), "}\n");
    offset += ir::SymExpr::Of(part.sizes[definition.axis]);
  }
  std::vector<std::string> declarations = {"const kiln_runtime* rt", "const kiln_int64* symbols"};
  std::vector<std::string> arguments = {"rt", "symbols"};
  for (size_t p = 0; p < params.storages().size(); ++p) {
    const int storage = params.storages()[p];
    const ir::DType dtype = StorageDType(graph, plan.storages[storage]);
    declarations.push_back(absl::StrCat(p == 0 ? "" : "const ", StorageCType(dtype),
                                        "* __restrict__ p", p));
    arguments.push_back(StorageName(storage));
  }
  const std::string name = absl::StrCat("kiln_group_", index);
  *call = absl::StrCat("  ", name, "(", absl::StrJoin(arguments, ", "), ");\n");
  return absl::StrCat("static void ", name, "(", absl::StrJoin(declarations, ", "),
                      ") {\n  (void)rt;\n  (void)symbols;\n", body, "}\n\n");
}

// An extern kernel: a GEMM call through the runtime table, inline in kiln_run
// (bmm: one call for the batch, which the runtime spreads across its pool).
absl::StatusOr<std::string> EmitExternCall(const Kernel& kernel, const ir::Graph& graph,
                                           const ir::LoopProgram& program,
                                           const BufferPlan& plan) {
  const ir::Definition& definition = program.definitions[kernel.value];
  if (definition.function != "mm" && definition.function != "bmm") {
    return absl::InternalError(absl::StrCat("unknown extern '", definition.function, "'"));
  }
  const bool batched = definition.function == "bmm";
  const ir::TensorType& type = graph.values[kernel.value];
  const bool single = type.dtype == ir::DType::kFloat32;
  const int first = batched ? 1 : 0;
  const std::string batch = batched ? Extent(type.sizes[0]) : "1";
  const std::string m = Extent(type.sizes[first]);
  const std::string n = Extent(type.sizes[first + 1]);
  const std::string k = Extent(graph.values[definition.operands[0]].sizes[first + 1]);
  // "pointer + offset, [batch stride, ]row stride, column stride"
  auto operand = [&](const Access& access) {
    const Linear offset = Offset(MemoryLayout(graph, program, access.value), access.map);
    return absl::StrCat(StorageName(plan.storage_of[access.value]), " + ", SymC(offset.constant),
                        ", ", batched ? absl::StrCat(SymC(offset.coefficients[0]), ", ") : "",
                        SymC(offset.coefficients[first]), ", ", SymC(offset.coefficients[first + 1]));
  };
  // x @ x.T: one operand read twice, transposed the second time. A
  // symmetric rank-k update does half the multiplies.
  const Access& left = kernel.reads[0];
  const Access& right = kernel.reads[1];
  if (!batched && single && left.value == right.value) {
    const Layout layout = MemoryLayout(graph, program, left.value);
    const Linear a = Offset(layout, left.map), b = Offset(layout, right.map);
    if (a.constant == b.constant && a.coefficients[0] == b.coefficients[1] &&
        a.coefficients[1] == b.coefficients[0]) {
      return absl::StrCat("  rt->syrk_f32(rt->context, ", m, ", ", k, ", ",
                          StorageName(plan.storage_of[left.value]), " + ", SymC(a.constant), ", ",
                          SymC(a.coefficients[0]), ", ", SymC(a.coefficients[1]), ", ",
                          StorageName(plan.storage_of[kernel.value]), ", ", n, ");\n");
    }
  }
  const std::string c = StorageName(plan.storage_of[kernel.value]);
  if (!batched) {
    return absl::StrCat("  rt->", single ? "gemm_f32" : "gemm_f64", "(rt->context, ", m, ", ", n,
                        ", ", k, ", ", EmitLiteral(1.0, type.dtype), ", ", operand(kernel.reads[0]),
                        ", ", operand(kernel.reads[1]), ", ", EmitLiteral(0.0, type.dtype), ", ", c,
                        ", ", n, ");\n");
  }
  return absl::StrCat(
      "  rt->", single ? "bmm_f32" : "bmm_f64", "(rt->context, ", batch, ", ", m, ", ", n, ", ", k,
      ", ", operand(kernel.reads[0]), ", ", operand(kernel.reads[1]), ", ", c, ", ",
      SymC(ir::SymExpr::Of(type.sizes[first]) * ir::SymExpr::Of(type.sizes[first + 1])), ", ", n,
      ");\n");
}

}  // namespace

absl::StatusOr<std::string> EmitCpp(const ir::Graph& graph, const ir::LoopProgram& program,
                                    const Schedule& schedule, const BufferPlan& plan) {
  std::string kernels, calls;
  for (size_t g = 0; g < schedule.groups.size(); ++g) {
    const KernelGroup& group = schedule.groups[g];
    const Kernel& first = schedule.kernels[group.begin];
    std::string call;
    if (first.kind == Kernel::Kind::kExtern) {
      ASSIGN_OR_RETURN(call, EmitExternCall(first, graph, program, plan));
    } else if (first.kind == Kernel::Kind::kConcat) {
      ASSIGN_OR_RETURN(std::string text, EmitConcat(g, first, graph, program, schedule, plan, &call));
      kernels += text;
    } else {
      ASSIGN_OR_RETURN(std::string text,
                       EmitGroup(g, group, graph, program, schedule, plan, &call));
      kernels += text;
    }
    calls += call;
  }

  // Static scratch slices sit at their planned offsets; symbolic slots
  // follow the static part in order, 64-byte aligned (kiln_scratch_bytes
  // computes the same sum).
  std::vector<std::string> slot_offsets;
  std::string symbolic_offsets = absl::StrCat(plan.scratch_bytes);
  for (const ir::SymExpr& bytes : plan.slots) {
    slot_offsets.push_back(symbolic_offsets);
    symbolic_offsets = absl::StrCat(symbolic_offsets, " + KILN_ALIGN(", SymC(bytes), ")");
  }
  std::string storages;
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    const Storage& storage = plan.storages[s];
    if (storage.values.empty() && storage.kind != Storage::Kind::kOutput) continue;
    if (storage.kind == Storage::Kind::kRow) continue;  // declared in its group
    const char* ctype = StorageCType(StorageDType(graph, storage));
    const bool input = storage.kind == Storage::Kind::kInput;
    std::string address;
    switch (storage.kind) {
      case Storage::Kind::kInput: address = absl::StrCat("inputs[", storage.index, "]"); break;
      case Storage::Kind::kOutput: address = absl::StrCat("outputs[", storage.index, "]"); break;
      case Storage::Kind::kScratch:
        address = absl::StrCat("(char*)scratch + ", storage.is_symbolic()
                                                         ? slot_offsets[storage.slot]
                                                         : absl::StrCat(storage.offset));
        break;
      case Storage::Kind::kRow:
        break;
    }
    absl::StrAppend(&storages, "  ", input ? "const " : "", ctype, "* const ", StorageName(s),
                    " = (", input ? "const " : "", ctype, "*)(", address, ");\n");
  }

  // The name is for humans and not in the key: only safe characters reach
  // the comment (a newline or a trailing backslash would change the code).
  std::string name = graph.name.empty() ? "(unnamed)" : graph.name.substr(0, 80);
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.' && c != ' ') c = '_';
  }
  return absl::StrCat(
      "// Generated by Kiln. Graph: ", name,
      ". Do not edit.\n", kKilnAbiHeaderText, kPrelude, kKilnMathText, "\n", kernels,
      "KILN_EXPORT const kiln_artifact_info* kiln_info(void) {\n"
      "  static const kiln_artifact_info info = {KILN_ABI_VERSION, ",
      graph.inputs.size(), ", ", graph.outputs.size(), ", ", graph.symbols.size(), ", ",
      plan.symbolic_scratch ? -1 : plan.scratch_bytes, "};\n  return &info;\n}\n\n",
      "KILN_EXPORT kiln_int64 kiln_scratch_bytes(const kiln_int64* symbols) {\n"
      "  (void)symbols;\n  return ", symbolic_offsets, ";\n}\n\n",
      "KILN_EXPORT kiln_int32 kiln_run(const kiln_runtime* rt, const kiln_int64* symbols,\n"
      "                                void* const* inputs, void* const* outputs, void* scratch) {\n"
      "  (void)rt;\n  (void)symbols;\n  (void)inputs;\n  (void)scratch;\n",
      storages, calls, "  return 0;\n}\n");
}

}  // namespace kiln
