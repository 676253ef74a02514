// Concat, scan and scatter kernels: static functions that run whole on the calling thread.
#include "codegen/emit/whole_kernels.h"

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

namespace kiln {
namespace {

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

}  // namespace

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

}  // namespace kiln
