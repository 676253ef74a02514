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
#include "codegen/emit/fft_call.h"
#include "codegen/emit/functions.h"
#include "codegen/emit/linalg_call.h"
#include "codegen/emit/reduction.h"
#include "codegen/emit/select_call.h"
#include "codegen/ops/op_table.h"
#include "common/status_macros.h"

extern const char kKilnAbiHeaderText[];
extern const char kKilnMathText[];
extern const char kKilnSpecialText[];
extern const char kKilnBesselText[];
extern const char kKilnPolynomialsText[];

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

// A static function of the source and the statement in kiln_run that calls it.
struct EmittedFunction {
  std::string definition;
  std::string call;
};

// A kernel's static function that runs whole on the calling thread (a
// concat, a scan, a scatter): its body is `function`'s text; its parameters
// the storages it names (the first, written, the others read). With
// `returns_status`, the body returns kiln_run's status (0 at its end), and
// kiln_run returns any other at once.
EmittedFunction Unchunked(int index, FunctionWriter& function, bool returns_status = false) {
  const EmitInputs& in = function.inputs();
  std::vector<std::string> declarations = {"const kiln_runtime* rt", "const kiln_int64* symbols"};
  std::vector<std::string> arguments = {"rt", "symbols"};
  for (size_t p = 0; p < function.parameters().size(); ++p) {
    const int storage = function.parameters()[p];
    const ir::DType dtype = StorageDType(in.graph, in.plan.storages[storage]);
    declarations.push_back(
        absl::StrCat(p == 0 ? "" : "const ", StorageCType(dtype), "* __restrict__ p", p));
    arguments.push_back(StorageName(storage));
  }
  const std::string name = absl::StrCat("kiln_group_", index);
  EmittedFunction emitted;
  const std::string call = absl::StrCat(name, "(", absl::StrJoin(arguments, ", "), ")");
  emitted.call = returns_status ? absl::StrCat("  {\n    const kiln_int32 status = ", call,
                                               ";\n    if (status != 0) return status;\n  }\n")
                                : absl::StrCat("  ", call, ";\n");
  emitted.definition =
      absl::StrCat("static ", returns_status ? "kiln_int32 " : "void ", name, "(",
                   absl::StrJoin(declarations, ", "), ") {\n  (void)rt;\n  (void)symbols;\n",
                   function.text(), returns_status ? "  return 0;\n" : "", "}\n\n");
  return emitted;
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

// A concat kernel: one loop nest per part, over the part's own shape,
// writing at the part's offset along the axis; parts' pointwise producers
// are inlined into their loops.
absl::StatusOr<EmittedFunction> EmitConcat(int index, const Kernel& kernel, const EmitInputs& in) {
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const ir::TensorType& type = in.graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  FunctionWriter function(in);
  const std::string out = function.StorageParameter(in.plan.storage_of[kernel.value]);
  const std::vector<ir::SymExpr> strides = ir::ContiguousStrides(type.sizes);
  std::string& text = function.text();
  ir::SymExpr offset;  // along the axis
  for (int operand : definition.operands) {
    const ir::TensorType& part = in.graph.values[operand];
    std::string indent = "  ";
    absl::StrAppend(&text, indent, "{  // part %", operand, "\n");
    indent += "  ";
    for (int d = 0; d < rank; ++d) {
      text += LoopHeader(d, Extent(part.sizes[d]), indent);
      indent += "  ";
    }
    BodyEmitter body(function, indent, 0, part.sizes);
    ASSIGN_OR_RETURN(const std::string value, body.Value(operand, ir::AffineMap::Identity(rank),
                                                         ir::ComputeType(type.dtype)));
    Linear target = Offset(Layout{strides, ir::SymExpr()}, ir::AffineMap::Identity(rank));
    target.constant += offset * strides[definition.axis];
    body.Line(absl::StrCat(out, "[", target.ToString(), "] = ", ToStorage(value, type.dtype), ";"));
    for (int d = rank; d >= 0; --d) absl::StrAppend(&text, std::string(2 * d + 2, ' '), "}\n");
    offset += ir::SymExpr::Of(part.sizes[definition.axis]);
  }
  return Unchunked(index, function);
}

// A convolution ("conv") or transposed convolution ("conv_transpose")
// through the runtime table, inline in kiln_run: its shape and every
// operand's strides in a kiln_conv (kiln_abi.h; a transposed one's
// output_padding is implied by its output size).
absl::StatusOr<std::string> EmitConvolutionCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::TensorType& out = graph.values[kernel.value];
  // The operands as the convolution sees them (reads[i] is the realized
  // value under them, through any view).
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const ir::TensorType& src = graph.values[definition.operands[0]];
  const ir::TensorType& weights = graph.values[definition.operands[1]];
  const ir::Node& node = graph.nodes[graph.producer[kernel.value]];
  const int64_t spatial = out.rank() - 2;
  // "pointer + offset" and the operand's strides.
  std::vector<std::string> pointers;
  std::vector<std::vector<std::string>> strides;
  for (const Access& access : kernel.reads) {
    const Linear offset = Offset(MemoryLayout(graph, in.program, access.value), access.map);
    pointers.push_back(
        absl::StrCat(StorageName(in.plan.storage_of[access.value]), " + ", SymC(offset.constant)));
    strides.emplace_back();
    for (const ir::SymExpr& stride : offset.coefficients) strides.back().push_back(SymC(stride));
  }
  if (kernel.reads.size() == 3 && strides[2][0] != "1") {
    return absl::InternalError(absl::StrCat("a convolution's bias has stride ", strides[2][0]));
  }
  std::vector<std::string> dst_strides;
  for (const ir::SymExpr& stride : ir::ContiguousStrides(out.sizes)) {
    dst_strides.push_back(SymC(stride));
  }
  auto per_dim = [&](const std::vector<std::string>& values) {
    return absl::StrCat("{", absl::StrJoin(values, ", "), "}");
  };
  auto spatial_sizes = [&](const ir::TensorType& type) {
    std::vector<std::string> sizes;
    for (int64_t d = 0; d < spatial; ++d) sizes.push_back(Extent(type.sizes[2 + d]));
    return per_dim(sizes);
  };
  auto argument = [&](const char* name) {
    std::vector<int64_t> values = ops::IntListArg(node, name);
    if (values.size() == 1) values.assign(spatial, values[0]);
    return absl::StrCat("{", absl::StrJoin(values, ", "), "}");
  };
  return absl::StrCat("  {\n    const kiln_conv conv = {", spatial, ", ", Extent(out.sizes[0]),
                      ", ", Extent(src.sizes[1]), ", ", Extent(out.sizes[1]), ", ",
                      ops::IntArg(node, "groups"), ",\n", "      ", spatial_sizes(src), ", ",
                      spatial_sizes(out), ", ", spatial_sizes(weights), ",\n", "      ",
                      argument("stride"), ", ", argument("padding"), ", ", argument("dilation"),
                      ",\n", "      ", per_dim(strides[0]), ", ", per_dim(strides[1]), ", ",
                      per_dim(dst_strides), ", ", definition.function == "conv_transpose" ? 1 : 0,
                      "};\n", "    if (rt->conv_f32(rt->context, &conv, ", pointers[0], ", ",
                      pointers[1], ", ", kernel.reads.size() == 3 ? pointers[2] : "0", ", ",
                      StorageName(in.plan.storage_of[kernel.value]), ") != 0) return 2;\n  }\n");
}

// A scan kernel (cumsum, cumprod): loops over every dim but the axis, then
// along the axis innermost with one running accumulator in the definition's
// root dtype (eager's: double for float32, float for 16-bit floats): each
// element adds (multiplies by) one term, in order. Pointwise producers are inlined into
// the body. The running sum serializes the axis loop, whose loads and
// stores are strided unless the axis is the last dim.
absl::StatusOr<EmittedFunction> EmitScan(int index, const Kernel& kernel, const EmitInputs& in) {
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const ir::TensorType& type = in.graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  FunctionWriter function(in);
  const std::string out = function.StorageParameter(in.plan.storage_of[kernel.value]);
  std::string& text = function.text();
  std::string indent = "  ";
  for (int d = 0; d < rank; ++d) {
    if (d == definition.axis) continue;
    text += LoopHeader(d, Extent(type.sizes[d]), indent);
    indent += "  ";
  }
  const ir::DType accumulate = definition.exprs[definition.root].dtype;
  const bool product = definition.combiner == "prod";
  absl::StrAppend(&text, indent, StorageCType(accumulate),
                  " acc = ", EmitLiteral(product ? 1 : 0, accumulate), ";\n");
  text += LoopHeader(definition.axis, Extent(type.sizes[definition.axis]), indent);
  BodyEmitter body(function, indent + "  ", 0, type.sizes);
  ASSIGN_OR_RETURN(const std::string element,
                   body.Expression(kernel.value, definition.root, ir::AffineMap::Identity(rank)));
  body.Line(absl::StrCat("acc = acc ", product ? "*" : "+", " ", element, ";"));
  const ir::DType compute = ir::ComputeType(type.dtype);
  const std::string sum =
      compute == accumulate ? "acc" : absl::StrCat("(", StorageCType(compute), ")acc");
  const Linear target = Offset(Layout{ir::ContiguousStrides(type.sizes), ir::SymExpr()},
                               ir::AffineMap::Identity(rank));
  body.Line(absl::StrCat(out, "[", target.ToString(), "] = ", ToStorage(sum, type.dtype), ";"));
  for (int d = rank - 1; d >= 0; --d) absl::StrAppend(&text, std::string(2 * d + 2, ' '), "}\n");
  return Unchunked(index, function);
}

// What a scatter's combiner makes of the element held, `held`, and a
// point's `element` (loop_ir.h): amax and amin as eager's scatter_reduce,
// where a NaN from either side wins.
std::string ScatterCombined(const std::string& combiner, const std::string& held,
                            const std::string& element) {
  if (combiner == "assign") return element;
  if (combiner == "prod") return absl::StrCat("(", held, " * ", element, ")");
  if (combiner == "amax" || combiner == "amin") {
    return absl::StrCat("((", element, " != ", element, ") ? ", element, " : ((", held,
                        combiner == "amax" ? " < " : " > ", element, ") ? ", element, " : ", held,
                        "))");
  }
  return absl::StrCat("(", held, " + ", element, ")");
}

// A scatter kernel (index_add, scatter_add, embedding_dense_backward;
// scatter_reduce's family, ops/scatter_reduce.cc; with the combiner
// "assign", index_copy and scatter). A checked one first runs
// over the points computing each index alone, and stops the run at the
// first outside the dim, before anything is written (loop_ir.h,
// checked_op). Then one loop nest writes the start (a value at the same
// coordinates, or 0), unless the start is the output's own storage read at
// identity (an output the planner put in its input's storage): then it is
// already there. Then one loop over the points, in row-major order, folds
// each point's element into the element its index names (ScatterCombined), in the order eager does.
// A point whose index falls outside the dim writes nothing. The sums are kept in the output's own
// storage, or with the combiner "sum_rounded_once" for 16-bit outputs in
// float32 in the thread's scratch, rounded at the end. Pointwise producers
// of the start, the index and the elements are inlined. It runs whole on
// the calling thread: any two points may write the same element.
absl::StatusOr<EmittedFunction> EmitScatter(int index, const Kernel& kernel, const EmitInputs& in) {
  const ir::Definition& definition = in.program.definitions[kernel.value];
  const ir::TensorType& type = in.graph.values[kernel.value];
  const int rank = static_cast<int>(type.rank());
  const ir::DType compute = ir::ComputeType(type.dtype);
  FunctionWriter function(in);
  const std::string out = function.StorageParameter(in.plan.storage_of[kernel.value]);
  std::string& text = function.text();
  const Layout layout{ir::ContiguousStrides(type.sizes), ir::SymExpr()};
  const std::string element_offset = Offset(layout, ir::AffineMap::Identity(rank)).ToString();
  ir::DType sum_type = type.dtype;
  std::string sums = out;
  if (definition.combiner == "sum_rounded_once" && compute != type.dtype) {
    sums = "sums";
    sum_type = compute;
    std::string bytes = absl::StrCat(ir::DTypeSize(compute));
    for (const ir::Dim& size : type.sizes) absl::StrAppend(&bytes, " * ", Extent(size));
    absl::StrAppend(&text, "  ", StorageCType(compute), "* const sums = (", StorageCType(compute),
                    "*)rt->thread_scratch(rt->context, ", bytes, ");\n");
  }
  auto loops_over_output = [&](std::string& indent) {
    indent = "  ";
    for (int d = 0; d < rank; ++d) {
      text += LoopHeader(d, Extent(type.sizes[d]), indent);
      indent += "  ";
    }
  };
  auto close_loops = [&](int count) {
    for (int d = count - 1; d >= 0; --d) {
      absl::StrAppend(&text, std::string(2 * d + 2, ' '), "}\n");
    }
  };

  const int points = static_cast<int>(definition.reduction_sizes.size());
  const ir::AffineMap identity = ir::AffineMap::Identity(points);
  // A 0-dim result is one element, which index 0 names (as in eager).
  const std::string size = rank == 0 ? "1" : Extent(type.sizes[definition.axis]);
  auto loops_over_points = [&](std::string& indent) {
    indent = "  ";
    for (int d = 0; d < points; ++d) {
      text += LoopHeader(d, Extent(definition.reduction_sizes[d]), indent);
      indent += "  ";
    }
  };
  std::string indent;
  if (!definition.checked_op.empty()) {
    loops_over_points(indent);
    BodyEmitter check(function, indent, 0, definition.reduction_sizes);
    ASSIGN_OR_RETURN(const std::string position,
                     check.Expression(kernel.value, definition.position, identity));
    check.Line(absl::StrCat("if ((", position, " < 0) | (", position, " >= ", size, ")) {"));
    check.Line(absl::StrCat("  rt->index_error(rt->context, \"", definition.checked_op, "\", ",
                            definition.axis, ", ", position, ", ", size, ");"));
    check.Line("  return KILN_RUN_INDEX_ERROR;");
    check.Line("}");
    close_loops(points);
  }

  const ir::AffineMap whole = ir::AffineMap::Identity(rank);
  const Access start =
      definition.source >= 0 ? ResolveViews(in.program, definition.source, whole) : Access{};
  const bool start_in_place = definition.source >= 0 && sums == out && start.map.IsIdentity() &&
                              in.plan.alias_root[start.value] == start.value &&
                              in.plan.storage_of[start.value] == in.plan.storage_of[kernel.value] &&
                              in.graph.values[start.value].dtype == type.dtype;
  if (!start_in_place) {
    loops_over_output(indent);
    BodyEmitter start_body(function, indent, 0, type.sizes);
    std::string value = EmitLiteral(0, compute);
    if (definition.source >= 0) {
      ASSIGN_OR_RETURN(value, start_body.Value(definition.source, whole, compute));
    }
    start_body.Line(
        absl::StrCat(sums, "[", element_offset, "] = ", ToStorage(value, sum_type), ";"));
    close_loops(rank);
  }

  loops_over_points(indent);
  BodyEmitter body(function, indent, 0, definition.reduction_sizes);
  ASSIGN_OR_RETURN(const std::string position,
                   body.Expression(kernel.value, definition.position, identity));
  ASSIGN_OR_RETURN(const std::string element,
                   body.Expression(kernel.value, definition.root, identity));
  // The index's term of the offset by name, as a gathered load's
  // (ir::AffineMap::WithGatheredCoordinate: the last variable is the index).
  std::string target = absl::StrCat(sums, "[0]");
  if (rank > 0) {
    Linear offset = Offset(layout, definition.map.WithGatheredCoordinate(definition.axis));
    const ir::SymExpr stride = offset.coefficients.back();
    offset.coefficients.pop_back();
    target = absl::StrCat(sums, "[", offset.ToString(), " + ", position, " * ", SymC(stride), "]");
  }
  body.Line(absl::StrCat("if ((", position, " >= 0) & (", position, " < ", size, ")) {"));
  absl::StrAppend(
      &text, indent, "  ", target, " = ",
      ToStorage(ScatterCombined(definition.combiner, FromStorage(target, sum_type), element),
                sum_type),
      ";\n");
  body.Line("}");
  close_loops(points);
  if (sums != out) {
    loops_over_output(indent);
    absl::StrAppend(&text, indent, out, "[", element_offset,
                    "] = ", ToStorage(absl::StrCat(sums, "[", element_offset, "]"), type.dtype),
                    ";\n");
    close_loops(rank);
  }
  return Unchunked(index, function, !definition.checked_op.empty());
}

// An extern kernel: a GEMM call through the runtime table, inline in kiln_run
// (bmm: one call for the batch, which the runtime spreads across its pool).
absl::StatusOr<std::string> EmitExternCall(const Kernel& kernel, const EmitInputs& in) {
  const ir::Graph& graph = in.graph;
  const ir::LoopProgram& program = in.program;
  const BufferPlan& plan = in.plan;
  const ir::Definition& definition = program.definitions[kernel.value];
  if (definition.function == "conv" || definition.function == "conv_transpose") {
    return EmitConvolutionCall(kernel, in);
  }
  if (definition.function == "fft") return EmitFftCall(kernel, in);
  if (definition.function == "linalg") return EmitLinalgCall(kernel, in);
  if (definition.function == "linalg_check") return EmitLinalgCheck(kernel, in);
  if (definition.function == "select_rows") return EmitSelectCall(kernel, in);
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
                        SymC(offset.coefficients[first]), ", ",
                        SymC(offset.coefficients[first + 1]));
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
  return absl::StrCat(
      "// Generated by Kiln. Graph: ", name, ". Do not edit.\n", kKilnAbiHeaderText, kPrelude,
      kKilnMathText, "\n", special, kernels,
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
