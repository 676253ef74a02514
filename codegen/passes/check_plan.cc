#include "codegen/passes/check_plan.h"

#include <iterator>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kiln {

namespace {

// The scratch storages one group uses (its kernels interleave, so all of
// them are live together): no two may share a symbolic slot or overlap in
// the static arena. Each storage is checked once, against sorted intervals
// and a slot table, so a group of n kernels costs O(n log n), not O(n^2).
class GroupScratch {
 public:
  explicit GroupScratch(const BufferPlan& plan) : plan_(plan) {}

  void Clear() {
    seen_.clear();
    slots_.clear();
    intervals_.clear();
  }

  absl::Status Touch(int storage_index, int group) {
    const Storage& storage = plan_.storages[storage_index];
    if (storage.kind != Storage::Kind::kScratch || !seen_.insert(storage_index).second) {
      return absl::OkStatus();
    }
    if (storage.is_symbolic()) {
      if (!slots_.emplace(storage.slot, storage_index).second) {
        return absl::InternalError(
            absl::StrCat("group ", group, " uses two slices of scratch slot ", storage.slot));
      }
      return absl::OkStatus();
    }
    const int64_t begin = storage.offset, end = storage.offset + storage.bytes.constant();
    if (begin == end) return absl::OkStatus();  // an empty slice overlaps nothing
    // Non-overlapping so far: only the neighbours can overlap the new one.
    auto next = intervals_.lower_bound(begin);
    if (next != intervals_.end() && next->first < end) return Overlap(group, begin, next->first);
    if (next != intervals_.begin() && std::prev(next)->second > begin) {
      return Overlap(group, begin, std::prev(next)->first);
    }
    intervals_.emplace(begin, end);
    return absl::OkStatus();
  }

 private:
  static absl::Status Overlap(int group, int64_t a, int64_t b) {
    return absl::InternalError(
        absl::StrCat("group ", group, " uses overlapping scratch slices ", a, " and ", b));
  }

  const BufferPlan& plan_;
  std::set<int> seen_;
  std::map<int, int> slots_;              // slot -> the storage using it
  std::map<int64_t, int64_t> intervals_;  // static slices: begin -> end
};

}  // namespace

absl::Status CheckPlan(const ir::Graph& graph, const Schedule& schedule, const BufferPlan& plan) {
  const int num_values = static_cast<int>(graph.values.size());
  std::vector<bool> available(num_values, false);
  for (int input : graph.inputs) available[input] = true;
  // The value each output storage holds after the kernel that wrote it last.
  std::vector<int> output_holds(graph.outputs.size(), -1);
  // Scratch storages in use in each group: written there or read there.
  GroupScratch touched(plan);
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const Kernel& kernel = schedule.kernels[k];
    const int group = schedule.group_of[k];
    if (schedule.groups[group].begin == static_cast<int>(k)) touched.Clear();
    for (const Access& access : kernel.reads) {
      if (!available[plan.alias_root[access.value]]) {
        return absl::InternalError(
            absl::StrCat("kernel ", k, " reads %", access.value, " before any kernel writes it"));
      }
      if (plan.storage_of[access.value] < 0) {
        return absl::InternalError(absl::StrCat("realized %", access.value, " has no storage"));
      }
      RETURN_IF_ERROR(touched.Touch(plan.storage_of[access.value], group));
    }
    if (kernel.kind == Kernel::Kind::kCopy) {
      output_holds[kernel.output] = kernel.value;
    } else {
      if (plan.storage_of[kernel.value] < 0) {
        return absl::InternalError(
            absl::StrCat("kernel ", k, " writes %", kernel.value, ", which has no storage"));
      }
      available[kernel.value] = true;
      RETURN_IF_ERROR(touched.Touch(plan.storage_of[kernel.value], group));
      const Storage& storage = plan.storages[plan.storage_of[kernel.value]];
      if (storage.kind == Storage::Kind::kOutput) output_holds[storage.index] = kernel.value;
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
      return absl::InternalError(
          absl::StrCat("a scratch slice is larger than its slot ", storage.slot));
    }
  }
  for (size_t k = 0; k < output_holds.size(); ++k) {
    // An in-order alias or view output is held as the value the schedule
    // writes there (what it aliases, what it views), which must fill the
    // output exactly.
    const int output = graph.outputs[k];
    const int written = schedule.kernels[schedule.output_kernel[k]].value;
    const bool held_as_source =
        output_holds[k] >= 0 && output_holds[k] == written &&
        (written == plan.alias_root[output] ||
         graph.values[written].sizes == graph.values[output].sizes) &&
        ir::SameElementCount(graph.values[output_holds[k]], graph.values[output]);
    if (output_holds[k] != output && !held_as_source) {
      return absl::InternalError(absl::StrCat("output ", k, " ends holding %", output_holds[k],
                                              ", not %", graph.outputs[k]));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
