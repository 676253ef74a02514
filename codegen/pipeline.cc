#include "codegen/pipeline.h"

#include "codegen/emit/emit_cpp.h"
#include "codegen/import.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/attention_lengths.h"
#include "codegen/passes/check_lookups.h"
#include "codegen/passes/check_plan.h"
#include "codegen/passes/decompose.h"
#include "codegen/passes/lower.h"
#include "codegen/passes/plan_buffers.h"
#include "codegen/passes/schedule.h"
#include "codegen/passes/split_complex.h"
#include "codegen/passes/transpose_linear.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<GeneratedCode> GenerateCode(const CodegenInputs& inputs, bool keep_stages) {
  // Today only the graph shapes the code: the guards are its exact input
  // types, and the options and toolchain change the compile, not the source.
  GeneratedCode code;
  auto stage = [&](const char* name, auto&& print) {
    if (keep_stages) code.stages.emplace_back(name, print());
  };
  stage("graph", [&] { return ir::ToString(inputs.graph); });
  ASSIGN_OR_RETURN(const ir::Graph split, SplitComplex(inputs.graph));
  ASSIGN_OR_RETURN(const ir::Graph checked, CheckLookups(split));
  ASSIGN_OR_RETURN(const ir::Graph decomposed, Decompose(checked));
  ASSIGN_OR_RETURN(const ir::Graph transposed, TransposeLinearPairs(decomposed));
  ASSIGN_OR_RETURN(const ir::Graph graph, AttentionLengths(transposed));
  stage("core graph", [&] { return ir::ToString(graph); });
  ASSIGN_OR_RETURN(const ir::LoopProgram program, Lower(graph));
  stage("loop IR", [&] { return ir::ToString(program, graph); });
  ASSIGN_OR_RETURN(const Schedule schedule, ScheduleProgram(graph, program));
  stage("kernels", [&] { return ToString(schedule, graph, program); });
  ASSIGN_OR_RETURN(const BufferPlan plan, PlanBuffers(graph, program, schedule));
  stage("buffer plan", [&] { return ToString(plan); });
  RETURN_IF_ERROR(CheckPlan(graph, schedule, plan));
  ASSIGN_OR_RETURN(code.source, EmitCpp(graph, program, schedule, plan));
  stage("C++", [&] { return code.source; });

  // The signature is the user's graph's: a complex value keeps its dtype
  // (its pairs are the same memory).
  const ir::Graph& user = inputs.graph;
  for (int input : user.inputs) {
    *code.signature.add_inputs() = ExportTensorType(user.values[input], user);
  }
  for (int output : user.outputs) {
    ir::TensorType type = user.values[output];
    type.strides = ir::ContiguousStrides(type.sizes);  // outputs are contiguous
    *code.signature.add_outputs() = ExportTensorType(type, user);
  }
  for (const Storage& storage : plan.storages) {
    if (storage.kind != Storage::Kind::kOutput || storage.aliased_input < 0) continue;
    kiln::v1::OutputAlias* alias = code.signature.add_output_aliases();
    alias->set_output(storage.index);
    alias->set_input(storage.aliased_input);
  }
  for (const std::string& symbol : graph.symbols) code.signature.add_symbols(symbol);
  code.signature.set_scratch_bytes(plan.symbolic_scratch ? -1 : plan.scratch_bytes);
  return code;
}

}  // namespace kiln
