#include "codegen/passes/check_plan.h"

#include "absl/strings/str_cat.h"

namespace kiln {

absl::Status CheckPlan(const ir::Graph& graph, const Schedule& schedule, const BufferPlan& plan) {
  const int num_values = static_cast<int>(graph.values.size());
  std::vector<bool> available(num_values, false);
  for (int input : graph.inputs) available[input] = true;
  // The value each output storage holds after the kernel that wrote it last.
  std::vector<int> output_holds(graph.outputs.size(), -1);
  // Scratch storages in use in each group (its kernels interleave): written
  // there or read there.
  std::vector<int> touched;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const Kernel& kernel = schedule.kernels[k];
    if (schedule.groups[schedule.group_of[k]].begin == static_cast<int>(k)) touched.clear();
    for (const Access& access : kernel.reads) {
      if (!available[plan.alias_root[access.value]]) {
        return absl::InternalError(absl::StrCat("kernel ", k, " reads %", access.value,
                                                " before any kernel writes it"));
      }
      if (plan.storage_of[access.value] < 0) {
        return absl::InternalError(absl::StrCat("realized %", access.value, " has no storage"));
      }
      touched.push_back(plan.storage_of[access.value]);
    }
    if (kernel.kind == Kernel::Kind::kCopy) {
      output_holds[kernel.output] = kernel.value;
    } else {
      if (plan.storage_of[kernel.value] < 0) {
        return absl::InternalError(absl::StrCat("kernel ", k, " writes %", kernel.value,
                                                ", which has no storage"));
      }
      available[kernel.value] = true;
      touched.push_back(plan.storage_of[kernel.value]);
      const Storage& storage = plan.storages[plan.storage_of[kernel.value]];
      if (storage.kind == Storage::Kind::kOutput) output_holds[storage.index] = kernel.value;
    }
    for (int a : touched) {
      for (int b : touched) {
        const Storage& x = plan.storages[a];
        const Storage& y = plan.storages[b];
        if (a == b || x.kind != Storage::Kind::kScratch || y.kind != Storage::Kind::kScratch ||
            x.is_symbolic() != y.is_symbolic()) {
          continue;  // the static arena and the symbolic slots are apart
        }
        if (x.is_symbolic()) {
          if (x.slot == y.slot) {
            return absl::InternalError(absl::StrCat("group ", schedule.group_of[k],
                                                    " uses two slices of scratch slot ", x.slot));
          }
          continue;
        }
        if (x.offset < y.offset + y.bytes.constant() && y.offset < x.offset + x.bytes.constant()) {
          return absl::InternalError(absl::StrCat("group ", schedule.group_of[k],
                                                  " uses overlapping scratch slices ",
                                                  x.offset, " and ", y.offset));
        }
      }
    }
  }
  for (const Storage& storage : plan.storages) {
    if (storage.kind != Storage::Kind::kScratch || storage.values.empty()) continue;
    if (!storage.is_symbolic()) {
      if (storage.offset + storage.bytes.constant() > plan.scratch_bytes) {
        return absl::InternalError("a scratch slice ends past the arena");
      }
      continue;
    }
    if (storage.slot < 0 || storage.slot >= static_cast<int>(plan.slots.size())) {
      return absl::InternalError("a symbolic scratch slice has no slot");
    }
    const ir::SymExpr::Term& slot = plan.slots[storage.slot].terms.at(0);
    const ir::SymExpr::Term& need = storage.bytes.terms.at(0);
    if (slot.symbols != need.symbols || slot.coefficient < need.coefficient) {
      return absl::InternalError(absl::StrCat("a scratch slice is larger than its slot ",
                                              storage.slot));
    }
  }
  for (size_t k = 0; k < output_holds.size(); ++k) {
    // An in-order alias output is held as the value it aliases, which must
    // fill the output exactly.
    const int output = graph.outputs[k];
    const bool held_as_alias = output_holds[k] >= 0 && output_holds[k] == plan.alias_root[output] &&
                               ir::SameElementCount(graph.values[output_holds[k]],
                                                    graph.values[output]);
    if (output_holds[k] != output && !held_as_alias) {
      return absl::InternalError(absl::StrCat("output ", k, " ends holding %", output_holds[k],
                                              ", not %", graph.outputs[k]));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
