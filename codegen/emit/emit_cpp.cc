#include "codegen/emit/emit_cpp.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/functions.h"
#include "common/status_macros.h"

extern const char kKilnAbiHeaderText[];

namespace kiln {
namespace {

// Strides of a realized value in its storage: inputs as given, everything
// Kiln computes is contiguous.
std::vector<int64_t> MemoryStrides(const ir::Graph& graph, int value) {
  const bool is_input = graph.producer[value] < 0;
  const ir::TensorType& type = graph.values[value];
  const std::vector<ir::Dim> strides = is_input ? type.strides : ir::ContiguousStrides(type.sizes);
  std::vector<int64_t> result;
  for (const ir::Dim& dim : strides) result.push_back(dim.constant);
  return result;
}

// Element offset of `value` at map(loop variables), as a linear form.
struct Linear {
  int64_t constant = 0;
  std::vector<int64_t> coefficients;  // per loop variable

  std::string ToString() const {
    std::vector<std::string> terms;
    for (size_t c = 0; c < coefficients.size(); ++c) {
      if (coefficients[c] == 0) continue;
      terms.push_back(coefficients[c] == 1 ? absl::StrCat("i", c)
                                           : absl::StrCat("i", c, " * ", coefficients[c]));
    }
    if (constant != 0 || terms.empty()) terms.push_back(absl::StrCat(constant));
    return absl::StrJoin(terms, " + ");
  }
};

Linear LinearOffset(const std::vector<int64_t>& strides, const ir::AffineMap& map) {
  Linear linear;
  linear.coefficients.assign(map.num_variables, 0);
  for (int r = 0; r < map.num_coordinates(); ++r) {
    linear.constant += strides[r] * map.offsets[r];
    for (int c = 0; c < map.num_variables; ++c) {
      linear.coefficients[c] += strides[r] * map.coefficients[r][c];
    }
  }
  return linear;
}

Linear MemoryOffset(const ir::Graph& graph, int value, const ir::AffineMap& map) {
  return LinearOffset(MemoryStrides(graph, value), map);
}

const char* ComputeCType(ir::DType dtype) { return StorageCType(dtype); }

class KernelEmitter {
 public:
  KernelEmitter(const ir::Graph& graph, const ir::LoopProgram& program, const Schedule& schedule,
                const BufferPlan& plan, std::string* body)
      : graph_(graph), program_(program), schedule_(schedule), plan_(plan), body_(*body) {}

  // The variable holding `value` at map(loop variables), emitting what it needs.
  absl::StatusOr<std::string> Value(int value, const ir::AffineMap& map, ir::DType want) {
    const Access base = ResolveViews(program_, value, map);
    std::string name;
    ir::DType have;
    if (schedule_.realized[base.value]) {
      ASSIGN_OR_RETURN(name, Load(base));
      have = graph_.values[base.value].dtype;
    } else {
      const ir::Definition& definition = program_.definitions[base.value];
      ASSIGN_OR_RETURN(name, Expression(base.value, definition.root, base.map));
      have = definition.exprs[definition.root].dtype;
    }
    if (have == want) return name;
    return Bind(want, absl::StrCat("(", ComputeCType(want), ")", name));
  }

  // The variable holding the kernel's own value: its definition expanded at
  // the loop variables.
  absl::StatusOr<std::string> Compute(int value, int rank) {
    return Expression(value, program_.definitions[value].root, ir::AffineMap::Identity(rank));
  }

  const std::vector<int>& params() const { return params_; }

  // The parameter that points at `storage`, in order of first use.
  std::string Param(int storage) {
    for (size_t p = 0; p < params_.size(); ++p) {
      if (params_[p] == storage) return absl::StrCat("p", p);
    }
    params_.push_back(storage);
    return absl::StrCat("p", params_.size() - 1);
  }

  std::string Bind(ir::DType dtype, const std::string& text) {
    auto it = memo_.find(text);
    if (it != memo_.end()) return it->second;
    const std::string name = absl::StrCat("v", next_var_++);
    absl::StrAppend(&body_, indent_, "const ", ComputeCType(dtype), " ", name, " = ", text, ";\n");
    memo_.emplace(text, name);
    return name;
  }

  void set_indent(std::string indent) { indent_ = std::move(indent); }

 private:
  absl::StatusOr<std::string> Load(const Access& access) {
    const std::string param = Param(plan_.storage_of[access.value]);
    const Linear offset = MemoryOffset(graph_, access.value, access.map);
    return Bind(graph_.values[access.value].dtype,
                absl::StrCat(param, "[", offset.ToString(), "]"));
  }

  absl::StatusOr<std::string> Expression(int value, int index, const ir::AffineMap& map) {
    const ir::Expr& expr = program_.definitions[value].exprs[index];
    switch (expr.kind) {
      case ir::Expr::Kind::kLoad:
        return Value(expr.value, expr.index.After(map), expr.dtype);
      case ir::Expr::Kind::kConstant:
        return EmitLiteral(expr.constant, expr.dtype);
      case ir::Expr::Kind::kCall: {
        std::vector<std::string> operands;
        for (int operand : expr.operands) {
          ASSIGN_OR_RETURN(std::string name, Expression(value, operand, map));
          operands.push_back(std::move(name));
        }
        auto text = EmitFunction(expr.function, operands, expr.dtype);
        if (!text.ok()) return absl::InternalError(std::string(text.status().message()));
        return Bind(expr.dtype, *text);
      }
    }
    return absl::InternalError("unknown expression kind");
  }

  const ir::Graph& graph_;
  const ir::LoopProgram& program_;
  const Schedule& schedule_;
  const BufferPlan& plan_;
  std::string& body_;
  std::string indent_;
  std::vector<int> params_;
  std::map<std::string, std::string> memo_;
  int next_var_ = 0;
};

std::string StorageName(int storage) { return absl::StrCat("b", storage); }

// The storage a kernel writes.
int WrittenStorage(const Kernel& kernel, const BufferPlan& plan) {
  if (kernel.kind != Kernel::Kind::kCopy) return plan.storage_of[kernel.value];
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    const Storage& storage = plan.storages[s];
    if (storage.kind == Storage::Kind::kOutput && storage.index == kernel.output) return s;
  }
  return -1;
}

// A pointwise or copy kernel: a static function with one loop nest.
absl::StatusOr<std::string> EmitLoopKernel(int index, const Kernel& kernel, const ir::Graph& graph,
                                           const ir::LoopProgram& program,
                                           const Schedule& schedule, const BufferPlan& plan,
                                           std::string* call) {
  const ir::TensorType& type = graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  std::string body;
  KernelEmitter emitter(graph, program, schedule, plan, &body);
  const int written = WrittenStorage(kernel, plan);
  const std::string out = emitter.Param(written);
  std::string indent = "  ";
  std::string loops;
  for (int d = 0; d < rank; ++d) {
    absl::StrAppend(&loops, indent, "for (kiln_int64 i", d, " = 0; i", d, " < ",
                    type.sizes[d].constant, "; ++i", d, ") {\n");
    indent += "  ";
  }
  emitter.set_indent(indent);
  const ir::DType dtype = type.dtype;
  std::string result;
  if (kernel.kind == Kernel::Kind::kCopy) {
    ASSIGN_OR_RETURN(result, emitter.Value(kernel.value, ir::AffineMap::Identity(rank), dtype));
  } else {
    ASSIGN_OR_RETURN(result, emitter.Compute(kernel.value, rank));
  }
  std::vector<int64_t> contiguous;
  for (const ir::Dim& dim : ir::ContiguousStrides(type.sizes)) contiguous.push_back(dim.constant);
  const Linear offset = LinearOffset(contiguous, ir::AffineMap::Identity(rank));
  absl::StrAppend(&body, indent, out, "[", offset.ToString(), "] = ", result, ";\n");

  // Signature: the written storage first, then the storages read. Distinct
  // storages never overlap, so every pointer is __restrict__; a value
  // computed in place reads and writes through one pointer.
  std::vector<std::string> params, arguments;
  for (size_t p = 0; p < emitter.params().size(); ++p) {
    const int storage = emitter.params()[p];
    const ir::DType stored = graph.values[plan.storages[storage].values.front()].dtype;
    params.push_back(absl::StrCat(p == 0 ? "" : "const ", StorageCType(stored), "* __restrict__ p", p));
    arguments.push_back(StorageName(storage));
  }
  std::string text = absl::StrCat("static void kiln_kernel_", index, "(",
                                  absl::StrJoin(params, ", "), ") {\n", loops, body);
  for (int d = rank; d > 0; --d) {
    absl::StrAppend(&text, std::string(2 * d, ' '), "}\n");
  }
  text += "}\n\n";
  *call = absl::StrCat("  kiln_kernel_", index, "(", absl::StrJoin(arguments, ", "), ");\n");
  return text;
}

// An extern kernel: a call through the runtime table, inline in kiln_run.
absl::StatusOr<std::string> EmitExternCall(const Kernel& kernel, const ir::Graph& graph,
                                           const ir::LoopProgram& program,
                                           const BufferPlan& plan) {
  const ir::Definition& definition = program.definitions[kernel.value];
  if (definition.function != "mm") {
    return absl::InternalError(absl::StrCat("unknown extern '", definition.function, "'"));
  }
  const ir::TensorType& type = graph.values[kernel.value];
  const bool single = type.dtype == ir::DType::kFloat32;
  auto operand = [&](const Access& access) {
    const ir::AffineMap two_d = access.map;
    const Linear offset = MemoryOffset(graph, access.value, two_d);
    return absl::StrCat(StorageName(plan.storage_of[access.value]), " + ", offset.constant, ", ",
                        offset.coefficients[0], ", ", offset.coefficients[1]);
  };
  const int64_t m = type.sizes[0].constant, n = type.sizes[1].constant;
  const int64_t k = graph.values[definition.operands[0]].sizes[1].constant;
  return absl::StrCat("  rt->", single ? "gemm_f32" : "gemm_f64", "(rt->context, ", m, ", ", n,
                      ", ", k, ", ", EmitLiteral(1.0, type.dtype), ", ", operand(kernel.reads[0]),
                      ", ", operand(kernel.reads[1]), ", ", EmitLiteral(0.0, type.dtype), ", ",
                      StorageName(plan.storage_of[kernel.value]), ", ", n, ");\n");
}

}  // namespace

absl::StatusOr<std::string> EmitCpp(const ir::Graph& graph, const ir::LoopProgram& program,
                                    const Schedule& schedule, const BufferPlan& plan) {
  std::string kernels, calls;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const Kernel& kernel = schedule.kernels[k];
    std::string call;
    if (kernel.kind == Kernel::Kind::kExtern) {
      ASSIGN_OR_RETURN(call, EmitExternCall(kernel, graph, program, plan));
    } else {
      ASSIGN_OR_RETURN(std::string text,
                       EmitLoopKernel(k, kernel, graph, program, schedule, plan, &call));
      kernels += text;
    }
    calls += call;
  }

  std::string storages;
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    const Storage& storage = plan.storages[s];
    if (storage.values.empty()) continue;
    const char* ctype = StorageCType(graph.values[storage.values.front()].dtype);
    std::string address;
    switch (storage.kind) {
      case Storage::Kind::kInput:
        address = absl::StrCat("inputs[", storage.index, "]");
        break;
      case Storage::Kind::kOutput:
        address = absl::StrCat("outputs[", storage.index, "]");
        break;
      case Storage::Kind::kScratch:
        address = absl::StrCat("(char*)scratch + ", storage.offset);
        break;
    }
    absl::StrAppend(&storages, "  ", storage.kind == Storage::Kind::kInput ? "const " : "", ctype,
                    "* const ", StorageName(s), " = (", storage.kind == Storage::Kind::kInput ? "const " : "",
                    ctype, "*)(", address, ");\n");
  }

  std::string source = absl::StrCat(
      "// Generated by Kiln. Graph: ", graph.name.empty() ? "(unnamed)" : graph.name,
      ". Do not edit.\n", kKilnAbiHeaderText,
      "\n#define KILN_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n\n", kernels,
      "KILN_EXPORT const kiln_artifact_info* kiln_info(void) {\n"
      "  static const kiln_artifact_info info = {KILN_ABI_VERSION, ",
      graph.inputs.size(), ", ", graph.outputs.size(), ", ", graph.symbols.size(), ", ",
      plan.scratch_bytes, "};\n  return &info;\n}\n\n",
      "KILN_EXPORT kiln_int32 kiln_run(const kiln_runtime* rt, const kiln_int64* symbols,\n"
      "                                void* const* inputs, void* const* outputs, void* scratch) {\n"
      "  (void)rt;\n  (void)symbols;\n  (void)inputs;\n  (void)scratch;\n",
      storages, calls, "  return 0;\n}\n");
  return source;
}

}  // namespace kiln
