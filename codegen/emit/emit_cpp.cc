#include "codegen/emit/emit_cpp.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/emit/body_emitter.h"
#include "codegen/emit/c_text.h"
#include "codegen/emit/extern_call.h"
#include "codegen/emit/fft_call.h"
#include "codegen/emit/functions.h"
#include "codegen/emit/linalg_call.h"
#include "codegen/emit/reduction.h"
#include "codegen/emit/select_call.h"
#include "codegen/emit/whole_kernels.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

extern const char kKilnAbiHeaderText[];
extern const char kKilnMathText[];
extern const char kKilnSpecialText[];
extern const char kKilnBesselText[];
extern const char kKilnPolynomialsText[];
extern const char kKilnAttentionText[];

namespace kiln {
namespace {

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

// A pointwise or copy kernel's body: one expression, stored at the
// site's target. Returns whether it computes a kiln_math.h polynomial.
absl::StatusOr<bool> EmitPointwiseBody(const KernelSite& site, FunctionWriter& function) {
  const EmitInputs& in = function.inputs();
  const ir::TensorType& type = in.graph.values[site.kernel.value];
  const ir::AffineMap identity = ir::AffineMap::Identity(static_cast<int>(type.rank()));
  BodyEmitter body(function, site.indent, site.outer_rank, type.sizes);
  std::string result;
  if (site.kernel.kind == Kernel::Kind::kCopy) {
    ASSIGN_OR_RETURN(result, body.Value(site.kernel.value, identity, ir::ComputeType(type.dtype)));
  } else {
    const ir::Definition& definition = in.program.definitions[site.kernel.value];
    ASSIGN_OR_RETURN(result, body.Expression(site.kernel.value, definition.root, identity));
  }
  body.Line(absl::StrCat(site.target, " = ", ToStorage(result, type.dtype), ";"));
  return body.calls_polynomial();
}

// One loop kernel of a group: its loops over its output dims from
// `first_dim` on (the group's loops cover the ones before), its body, and
// its store.
absl::Status EmitLoopKernel(const Kernel& kernel, int first_dim, std::string indent,
                            FunctionWriter& function, Columns columns = {}) {
  const EmitInputs& in = function.inputs();
  const ir::TensorType& type = in.graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  const int written_storage = WrittenStorage(kernel, in.plan);
  const std::string out = function.StorageParameter(written_storage);
  std::string& text = function.text();
  const std::string outer_indent = indent;
  size_t innermost = text.size();  // where the innermost loop starts, and its indent
  std::string innermost_indent = indent;
  for (int d = first_dim; d < rank; ++d) {
    innermost = text.size();
    innermost_indent = indent;
    text += LoopHeader(d, Extent(type.sizes[d]), indent);
    indent += "  ";
  }
  const std::string target =
      absl::StrCat(out, "[",
                   ForStorage(Offset(Layout{ir::ContiguousStrides(type.sizes), ir::SymExpr()},
                                     ir::AffineMap::Identity(rank)),
                              in.plan.storages[written_storage], first_dim)
                       .ToString(),
                   "]");
  const KernelSite site{kernel, first_dim, indent, target, std::move(columns)};
  if (kernel.kind == Kernel::Kind::kReduction) {
    RETURN_IF_ERROR(EmitReductionBody(site, function));
  } else {
    ASSIGN_OR_RETURN(const bool calls_polynomial, EmitPointwiseBody(site, function));
    // A polynomial makes the body long enough that clang's cost model
    // leaves the vector loop uninterleaved; two vectors per iteration
    // overlap better (docs/BENCHMARKS.md has the effect on softmax and
    // gelu).
    if (calls_polynomial && rank > first_dim && Extent(type.sizes[rank - 1]) != "1") {
      text.insert(innermost,
                  absl::StrCat(innermost_indent, "#pragma clang loop interleave_count(2)\n"));
    }
  }
  for (int d = rank - 1; d >= first_dim; --d) {
    absl::StrAppend(&text, outer_indent, std::string(2 * (d - first_dim), ' '), "}\n");
  }
  return absl::OkStatus();
}

// Work (elements written or folded) below which a group runs on the
// calling thread, and the work each parallel chunk should get at least.
constexpr int64_t kParallelWork = 1 << 16;
constexpr int64_t kChunkWork = 1 << 15;

// Work per row of the group's first outer dim.
ir::SymExpr RowWork(const Kernel& kernel, const EmitInputs& in) {
  ir::SymExpr work = ir::Product(in.graph.values[kernel.value].sizes, 1);
  if (kernel.kind == Kernel::Kind::kReduction) {
    work = work * ir::Product(in.program.definitions[kernel.value].reduction_sizes);
  }
  return work;
}

// A group's row buffers, one row each, private to the thread running the
// row: on the stack (`stack`, inside the outer loops), or (symbolic
// lengths) in the runtime's per-thread scratch, fetched once per chunk
// (`prologue`, at the top of the function).
struct RowBuffers {
  std::string stack;
  std::string prologue;
};

RowBuffers DeclareRowBuffers(const FunctionWriter& function, const std::string& indent) {
  const EmitInputs& in = function.inputs();
  RowBuffers buffers;
  std::string declarations, bytes = "0";
  for (int storage : function.rows()) {
    const Storage& slot = in.plan.storages[storage];
    const ir::DType dtype = in.graph.values[slot.values.front()].dtype;
    const char* ctype = StorageCType(dtype);
    if (!slot.is_symbolic()) {
      absl::StrAppend(&buffers.stack, indent, ctype, " row", storage, "[",
                      slot.bytes.constant() / ir::DTypeSize(dtype),
                      "] __attribute__((aligned(64)));\n");
      continue;
    }
    absl::StrAppend(&declarations, "  ", ctype, "* __restrict__ const row", storage, " = (", ctype,
                    "*)(rows + ", bytes, ");\n");
    absl::StrAppend(&bytes, " + KILN_ALIGN(", SymC(slot.bytes), ")");
  }
  if (!declarations.empty()) {
    buffers.prologue = absl::StrCat("  char* const rows = (char*)rt->thread_scratch(rt->context, ",
                                    bytes, ");\n", declarations);
  }
  return buffers;
}

// A group of loop kernels: one static function whose outer loops the
// kernels share, called directly or in chunks of its first outer dim on the
// runtime's pool.
absl::StatusOr<EmittedFunction> EmitGroup(int index, const KernelGroup& group,
                                          const EmitInputs& in) {
  const Kernel& first = in.schedule.kernels[group.begin];
  const ir::TensorType& type = in.graph.values[first.value];
  const int outer = group.outer_rank;
  // A reduction down columns runs the last outer loop itself.
  Columns columns;
  if (FoldsColumns(group, in)) {
    columns.dim = outer - 1;
    columns.begin = columns.dim == 0 ? "begin" : "0";
    columns.end = columns.dim == 0 ? "end" : Extent(type.sizes[columns.dim]);
  }
  std::string loops, indent = "  ";
  for (int d = 0; d < (columns.dim >= 0 ? columns.dim : outer); ++d) {
    loops += d == 0 ? absl::StrCat(indent, "for (kiln_int64 i0 = begin; i0 < end; ++i0) {\n")
                    : LoopHeader(d, Extent(type.sizes[d]), indent);
    indent += "  ";
  }
  FunctionWriter function(in);
  ir::SymExpr row_work;
  for (int k = group.begin; k < group.end; ++k) {
    const Kernel& kernel = in.schedule.kernels[k];
    // Each kernel of a group in a block of its own: two reductions both
    // declare `acc`.
    const bool block = group.end - group.begin > 1;
    if (block) absl::StrAppend(&function.text(), indent, "{  // kernel ", k, "\n");
    RETURN_IF_ERROR(
        EmitLoopKernel(kernel, outer, block ? indent + "  " : indent, function, columns));
    if (block) absl::StrAppend(&function.text(), indent, "}\n");
    row_work += RowWork(kernel, in);
  }
  const RowBuffers rows = DeclareRowBuffers(function, indent);
  std::string body = absl::StrCat(rows.prologue, loops, rows.stack, function.text());
  for (int d = columns.dim >= 0 ? columns.dim : outer; d > 0; --d) {
    absl::StrAppend(&body, std::string(2 * d, ' '), "}\n");
  }

  // Distinct storages never overlap: every pointer is __restrict__; a value
  // computed in place reads and writes through one pointer. The first
  // storage of each kernel is written; a storage read by one kernel and
  // written by another in the group is written.
  const std::vector<int>& parameters = function.parameters();
  std::vector<bool> written(parameters.size(), false);
  for (int k = group.begin; k < group.end; ++k) {
    const int storage = WrittenStorage(in.schedule.kernels[k], in.plan);
    for (size_t p = 0; p < parameters.size(); ++p) {
      if (parameters[p] == storage) written[p] = true;
    }
  }
  const std::string name = absl::StrCat("kiln_group_", index);
  std::vector<std::string> declarations = {"const kiln_runtime* rt", "const kiln_int64* symbols",
                                           "kiln_int64 begin", "kiln_int64 end"};
  std::vector<std::string> fields = {"const kiln_runtime* rt;", "const kiln_int64* symbols;"};
  std::vector<std::string> arguments, unpacked;
  for (size_t p = 0; p < parameters.size(); ++p) {
    const int storage = parameters[p];
    const ir::DType dtype = StorageDType(in.graph, in.plan.storages[storage]);
    const std::string pointer = absl::StrCat(written[p] ? "" : "const ", StorageCType(dtype), "*");
    declarations.push_back(absl::StrCat(pointer, " __restrict__ p", p));
    fields.push_back(absl::StrCat(pointer, " p", p, ";"));
    arguments.push_back(StorageName(storage));
    unpacked.push_back(absl::StrCat("c->p", p));
  }
  EmittedFunction emitted;
  emitted.definition = absl::StrCat(
      "static void ", name, "(", absl::StrJoin(declarations, ", "),
      ") {\n  (void)rt;\n  (void)symbols;\n  (void)begin;\n  (void)end;\n", body, "}\n\n");
  const ir::Dim rows_dim = outer > 0 ? type.sizes[0] : ir::Dim::Constant(1);
  // Symbolic work may be large: parallel_for runs it inline when it is not.
  const bool parallel =
      outer > 0 &&
      (rows_dim.is_symbolic() || !row_work.is_constant() ||
       (rows_dim.constant >= 2 && rows_dim.constant * row_work.constant() >= kParallelWork));
  if (!parallel) {
    emitted.call =
        absl::StrCat("  ", name, "(rt, symbols, 0, ", Extent(rows_dim),
                     arguments.empty() ? "" : ", ", absl::StrJoin(arguments, ", "), ");\n");
    return emitted;
  }
  const std::string grain = row_work.is_constant()
                                ? absl::StrCat(std::max<int64_t>(
                                      1, kChunkWork / std::max<int64_t>(1, row_work.constant())))
                                : absl::StrCat("(", kChunkWork, " / ", SymC(row_work), " > 0 ? ",
                                               kChunkWork, " / ", SymC(row_work), " : 1)");
  absl::StrAppend(&emitted.definition, "typedef struct { ", absl::StrJoin(fields, " "), " } ", name,
                  "_closure;\n", "static void ", name,
                  "_chunk(void* closure, kiln_int64 begin, kiln_int64 end) {\n", "  const ", name,
                  "_closure* c = (const ", name, "_closure*)closure;\n", "  ", name,
                  "(c->rt, c->symbols, begin, end", unpacked.empty() ? "" : ", ",
                  absl::StrJoin(unpacked, ", "), ");\n}\n\n");
  emitted.call = absl::StrCat("  {\n    const ", name, "_closure closure = {rt, symbols",
                              arguments.empty() ? "" : ", ", absl::StrJoin(arguments, ", "), "};\n",
                              "    rt->parallel_for(rt->context, ", Extent(rows_dim), ", ", grain,
                              ", ", name, "_chunk, (void*)&closure);\n  }\n");
  return emitted;
}

// kiln_run's pointer to each storage but row buffers: inputs and outputs
// by index; static scratch slices at their planned offsets; symbolic slots
// after the static part in order, 64-byte aligned. Also returns the
// scratch size, which kiln_scratch_bytes computes by the same sum.
struct StorageDeclarations {
  std::string text;
  std::string scratch_bytes;
};

StorageDeclarations DeclareStorages(const ir::Graph& graph, const BufferPlan& plan) {
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
      case Storage::Kind::kInput:
        address = absl::StrCat("inputs[", storage.index, "]");
        break;
      case Storage::Kind::kOutput:  // an aliased output: the input's storage, written
        address = storage.aliased_input >= 0 ? absl::StrCat("inputs[", storage.aliased_input, "]")
                                             : absl::StrCat("outputs[", storage.index, "]");
        break;
      case Storage::Kind::kScratch:
        address =
            absl::StrCat("(char*)scratch + ", storage.is_symbolic() ? slot_offsets[storage.slot]
                                                                    : absl::StrCat(storage.offset));
        break;
      case Storage::Kind::kRow:
        break;
    }
    absl::StrAppend(&storages, "  ", input ? "const " : "", ctype, "* const ", StorageName(s),
                    " = (", input ? "const " : "", ctype, "*)(", address, ");\n");
  }
  return {storages, symbolic_offsets};
}

}  // namespace

absl::StatusOr<std::string> EmitCpp(const ir::Graph& graph, const ir::LoopProgram& program,
                                    const Schedule& schedule, const BufferPlan& plan) {
  const EmitInputs in{graph, program, schedule, plan};
  std::string kernels, calls;
  for (size_t g = 0; g < schedule.groups.size(); ++g) {
    const KernelGroup& group = schedule.groups[g];
    const Kernel& first = schedule.kernels[group.begin];
    if (first.kind == Kernel::Kind::kExtern) {
      ASSIGN_OR_RETURN(const std::string call, EmitExternCall(first, in));
      calls += call;
      continue;
    }
    EmittedFunction function;
    if (first.kind == Kernel::Kind::kConcat) {
      ASSIGN_OR_RETURN(function, EmitConcat(g, first, in));
    } else if (first.kind == Kernel::Kind::kScan) {
      ASSIGN_OR_RETURN(function, EmitScan(g, first, in));
    } else if (first.kind == Kernel::Kind::kScatter) {
      ASSIGN_OR_RETURN(function, EmitScatter(g, first, in));
    } else {
      ASSIGN_OR_RETURN(function, EmitGroup(g, group, in));
    }
    kernels += function.definition;
    calls += function.call;
  }
  const StorageDeclarations storages = DeclareStorages(graph, plan);

  // The name is for humans and not in the key: only safe characters reach
  // the comment (a newline or a trailing backslash would change the code).
  std::string name = graph.name.empty() ? "(unnamed)" : graph.name.substr(0, 80);
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.' && c != ' ') c = '_';
  }
  // The special functions only where a kernel calls one: a graph without
  // them compiles (and hashes) as it did before they existed.
  const std::string special =
      absl::StrContains(kernels, "kiln_special_")
          ? absl::StrCat(kKilnSpecialText, "\n", kKilnBesselText, "\n", kKilnPolynomialsText, "\n")
          : "";
  const std::string attention =
      absl::StrContains(calls, "kiln_attention_f32(") ? absl::StrCat(kKilnAttentionText, "\n") : "";
  return absl::StrCat(
      "// Generated by Kiln. Graph: ", name, ". Do not edit.\n", kKilnAbiHeaderText, kPrelude,
      kKilnMathText, "\n", special, attention, kernels,
      "KILN_EXPORT const kiln_artifact_info* kiln_info(void) {\n"
      "  static const kiln_artifact_info info = {KILN_ABI_VERSION, ",
      graph.inputs.size(), ", ", graph.outputs.size(), ", ", graph.symbols.size(), ", ",
      plan.symbolic_scratch ? -1 : plan.scratch_bytes, "};\n  return &info;\n}\n\n",
      "KILN_EXPORT kiln_int64 kiln_scratch_bytes(const kiln_int64* symbols) {\n"
      "  (void)symbols;\n  return ",
      storages.scratch_bytes, ";\n}\n\n",
      "KILN_EXPORT kiln_int32 kiln_run(const kiln_runtime* rt, const kiln_int64* symbols,\n"
      "                                void* const* inputs, void* const* outputs, void* scratch) "
      "{\n"
      "  (void)rt;\n  (void)symbols;\n  (void)inputs;\n  (void)scratch;\n",
      storages.text, calls, "  return 0;\n}\n");
}

}  // namespace kiln
