#include "codegen/passes/plan_buffers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// Bytes of a value's dims from `first` on.
ir::SymExpr Bytes(const ir::TensorType& type, size_t first = 0) {
  return ir::Product(type.sizes, first) * ir::DTypeSize(type.dtype);
}

void SetSize(Storage& storage, const ir::TensorType& type) { storage.bytes = Bytes(type); }

int64_t AlignUp(int64_t value) {
  return (value + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

// Whether `map` reads, at each loop position over `type`, the element
// written there: identity, a size-1 dim's coordinate possibly pinned to 0.
bool ReadsTheElementWritten(const ir::AffineMap& map, const ir::TensorType& type) {
  if (map.num_variables != type.rank() || map.num_coordinates() != type.rank()) return false;
  for (int d = 0; d < map.num_coordinates(); ++d) {
    std::vector<int64_t> unit(map.num_variables, 0);
    unit[d] = 1;
    const bool pinned = type.sizes[d] == ir::Dim::Constant(1) &&
                        map.coefficients[d] == std::vector<int64_t>(map.num_variables, 0);
    if (map.offsets[d] != 0 || (map.coefficients[d] != unit && !pinned)) return false;
  }
  return true;
}

// Why output `output` cannot be written in input `input`'s storage
// (docs/ARCHITECTURE.md, "Outputs that are inputs"); empty when it can.
// `last_read` is per value, by alias root.
std::string WhyNotAliased(const ir::Graph& graph, const Schedule& schedule, const BufferPlan& plan,
                          const std::vector<int>& last_read, int output, int input) {
  const int input_value = graph.inputs[input];
  const int writer = schedule.output_kernel[output];
  const Kernel& kernel = schedule.kernels[writer];
  const bool scatter = kernel.kind == Kernel::Kind::kScatter;
  if ((kernel.kind != Kernel::Kind::kPointwise && !scatter) ||
      kernel.value != graph.outputs[output]) {
    return absl::StrCat("output ", output,
                        " is not computed by a pointwise or scatter kernel of its own");
  }
  const ir::TensorType& input_type = graph.values[input_value];
  const ir::TensorType& output_type = graph.values[graph.outputs[output]];
  if (input_type.dtype != output_type.dtype || input_type.sizes != output_type.sizes ||
      !input_type.IsContiguous()) {
    return absl::StrCat("input ", input, " is not a contiguous tensor of output ", output,
                        "'s dtype and sizes");
  }
  if (last_read[input_value] != writer) {
    return absl::StrCat("input ", input, " is read after the kernel that writes output ", output,
                        " (kernel ", last_read[input_value], ")");
  }
  // A scatter writes elements its points name: its points may not read the
  // input at all; its start, like a pointwise kernel, only at identity.
  for (size_t r = 0; r < kernel.reads.size(); ++r) {
    const Access& access = kernel.reads[r];
    if (plan.alias_root[access.value] != input_value) continue;
    if (scatter && static_cast<int>(r) < kernel.point_reads) {
      return absl::StrCat("kernel ", writer, " reads input ", input, " at the points it writes");
    }
    if (access.value != input_value || !ReadsTheElementWritten(access.map, input_type)) {
      return absl::StrCat("kernel ", writer, " reads input ", input,
                          " at another element than the one it writes");
    }
  }
  const KernelGroup& group = schedule.groups[schedule.group_of[writer]];
  for (int other = group.begin; other < group.end; ++other) {
    if (other == writer) continue;
    for (const Access& access : schedule.kernels[other].reads) {
      if (plan.alias_root[access.value] == input_value) {
        return absl::StrCat("kernel ", other, ", of the same group as kernel ", writer,
                            ", reads input ", input);
      }
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<BufferPlan> PlanBuffers(const ir::Graph& graph, const ir::LoopProgram& program,
                                       const Schedule& schedule) {
  const int num_values = static_cast<int>(graph.values.size());
  const int num_kernels = static_cast<int>(schedule.kernels.size());
  BufferPlan plan;
  plan.storage_of.assign(num_values, -1);
  plan.alias_root.resize(num_values);
  std::vector<bool> has_alias(num_values, false);
  for (int v = 0; v < num_values; ++v) {  // sources precede their aliases
    const ir::Definition& definition = program.definitions[v];
    plan.alias_root[v] =
        definition.kind == ir::Definition::Kind::kAlias ? plan.alias_root[definition.source] : v;
    if (plan.alias_root[v] != v) has_alias[plan.alias_root[v]] = true;
  }

  auto new_storage = [&](Storage::Kind kind, int index, int value) {
    Storage storage;
    storage.kind = kind;
    storage.index = index;
    SetSize(storage, graph.values[value]);
    storage.values.push_back(value);
    plan.storages.push_back(std::move(storage));
    plan.storage_of[value] = static_cast<int>(plan.storages.size()) - 1;
  };
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    new_storage(Storage::Kind::kInput, static_cast<int>(i), graph.inputs[i]);
  }
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    const Kernel& kernel = schedule.kernels[schedule.output_kernel[k]];
    if (kernel.kind != Kernel::Kind::kCopy) {
      new_storage(Storage::Kind::kOutput, static_cast<int>(k), kernel.value);
    } else {  // written by a copy kernel: it holds no value of its own
      Storage storage;
      storage.kind = Storage::Kind::kOutput;
      storage.index = static_cast<int>(k);
      SetSize(storage, graph.values[graph.outputs[k]]);
      plan.storages.push_back(std::move(storage));
    }
  }

  // Liveness: the kernel that writes each value and the last that reads it.
  std::vector<int> first_write(num_values, -1), last_read(num_values, -1);
  for (int k = 0; k < num_kernels; ++k) {
    const Kernel& kernel = schedule.kernels[k];
    if (kernel.kind != Kernel::Kind::kCopy) first_write[kernel.value] = k;
    for (const Access& access : kernel.reads) last_read[plan.alias_root[access.value]] = k;
  }

  // Outputs that are inputs: output k takes input i's storage (and the
  // input value moves there) when the proof holds; else a note says why not.
  for (const auto& [output, input] : graph.output_aliases) {
    const std::string why_not = WhyNotAliased(graph, schedule, plan, last_read, output, input);
    if (!why_not.empty()) {
      plan.notes.push_back(
          absl::StrCat("output ", output, " is not input ", input, "'s storage: ", why_not));
      continue;
    }
    Storage& target = plan.storages[plan.storage_of[graph.outputs[output]]];
    Storage& from = plan.storages[plan.storage_of[graph.inputs[input]]];
    target.aliased_input = input;
    target.values.insert(target.values.begin(), graph.inputs[input]);
    plan.storage_of[graph.inputs[input]] = plan.storage_of[graph.outputs[output]];
    from.values.clear();  // left empty; skipped from here on
    plan.notes.push_back(
        absl::StrCat("output ", output, " is written in input ", input, "'s storage"));
  }

  // Per value: how many kernels of the current group read its memory
  // (counted once per group, so a group of n kernels costs O(n), not n^2).
  std::vector<int> group_readers(num_values, 0);
  std::vector<int> counted;  // the values counted for the current group
  auto count_group_readers = [&](const KernelGroup& group) {
    for (int value : counted) group_readers[value] = 0;
    counted.clear();
    for (int other = group.begin; other < group.end; ++other) {
      std::vector<int> roots;
      for (const Access& access : schedule.kernels[other].reads) {
        roots.push_back(plan.alias_root[access.value]);
      }
      std::sort(roots.begin(), roots.end());
      roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
      for (int root : roots) {
        if (group_readers[root]++ == 0) counted.push_back(root);
      }
    }
  };

  // In place: walk kernels in order; a pointwise kernel may take over the
  // storage of a value it reads for the last time, at identity only.
  for (int k = 0; k < num_kernels; ++k) {
    const Kernel& kernel = schedule.kernels[k];
    if (schedule.groups[schedule.group_of[k]].begin == k) {
      count_group_readers(schedule.groups[schedule.group_of[k]]);
    }
    if (kernel.kind != Kernel::Kind::kPointwise) continue;
    const int written = kernel.value;
    // An output in an input's storage: nothing may be written there before.
    if (plan.storage_of[written] >= 0 &&
        plan.storages[plan.storage_of[written]].aliased_input >= 0) {
      continue;
    }
    const ir::TensorType& type = graph.values[written];
    for (const Access& candidate : kernel.reads) {
      const int read = candidate.value;
      const ir::TensorType& read_type = graph.values[read];
      const int read_storage = plan.storage_of[read];
      const bool observable =
          read_storage >= 0 && plan.storages[read_storage].kind != Storage::Kind::kScratch;
      if (observable || first_write[read] < 0 || last_read[read] != k) continue;
      if (has_alias[read] || plan.alias_root[read] != read) continue;  // shared memory
      // In a group, other kernels run between this one's rows: none of them
      // may read the value being overwritten (this one reads it: one reader).
      if (group_readers[read] > 1) continue;
      if (read_type.dtype != type.dtype || read_type.sizes != type.sizes) continue;
      const bool identity_only = std::all_of(
          kernel.reads.begin(), kernel.reads.end(),
          [&](const Access& access) { return access.value != read || access.map.IsIdentity(); });
      if (!identity_only) continue;
      if (read_storage < 0) new_storage(Storage::Kind::kScratch, -1, read);
      int target = plan.storage_of[written];
      if (target < 0) {
        target = plan.storage_of[read];
        plan.storages[target].values.push_back(written);
        plan.storage_of[written] = target;
      } else {  // `written` is an output: everything in read's storage moves there
        Storage& from = plan.storages[plan.storage_of[read]];
        for (int moved : from.values) plan.storage_of[moved] = target;
        std::vector<int>& values = plan.storages[target].values;
        values.insert(values.begin(), from.values.begin(), from.values.end());
        from.values.clear();  // left empty; skipped from here on
      }
      const Storage& storage = plan.storages[target];
      plan.notes.push_back(absl::StrCat(
          "%", written, " is computed in place over %", read, " (dead after kernel ", k, ") in ",
          storage.kind == Storage::Kind::kOutput ? absl::StrCat("output ", storage.index)
                                                 : std::string("scratch")));
      break;
    }
    if (plan.storage_of[written] < 0) new_storage(Storage::Kind::kScratch, -1, written);
  }
  for (int k = 0; k < num_kernels; ++k) {
    const Kernel& kernel = schedule.kernels[k];
    if (kernel.kind != Kernel::Kind::kCopy && plan.storage_of[kernel.value] < 0) {
      new_storage(Storage::Kind::kScratch, -1, kernel.value);
    }
  }

  // Row buffers: scratch whose values one group writes and only that group
  // reads (row by row, as grouping guarantees), when a static row fits the
  // stack or the row is symbolic (then the runtime's per-thread scratch).
  std::vector<bool> read_outside(plan.storages.size(), false);
  for (int k = 0; k < num_kernels; ++k) {
    for (const Access& access : schedule.kernels[k].reads) {
      const int value = plan.alias_root[access.value];
      const int storage = plan.storage_of[value];
      if (storage >= 0 && first_write[value] >= 0 &&
          schedule.group_of[first_write[value]] != schedule.group_of[k]) {
        read_outside[storage] = true;
      }
      if (value != access.value && storage >= 0) read_outside[storage] = true;  // aliased
    }
  }
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    Storage& storage = plan.storages[s];
    if (storage.kind != Storage::Kind::kScratch || storage.values.empty() || read_outside[s]) {
      continue;
    }
    const int group = schedule.group_of[first_write[storage.values.front()]];
    const KernelGroup& kernels = schedule.groups[group];
    bool one_group = kernels.end - kernels.begin > 1;
    for (int value : storage.values) {
      one_group &= schedule.group_of[first_write[value]] == group && !has_alias[value];
    }
    if (!one_group) continue;
    const ir::TensorType& type = graph.values[storage.values.front()];
    // A static row lives on the stack when it is small; a symbolic one in
    // the runtime's per-thread scratch.
    const ir::SymExpr row_bytes = Bytes(type, kernels.outer_rank);
    if (row_bytes.is_constant() && row_bytes.constant() > kMaxRowBytes) continue;
    storage.kind = Storage::Kind::kRow;
    storage.bytes = row_bytes;
    storage.index = group;
  }

  // Aliases share their root's storage (its liveness already covers them).
  for (int v = 0; v < num_values; ++v) {
    if (plan.alias_root[v] == v || plan.storage_of[plan.alias_root[v]] < 0) continue;
    plan.storage_of[v] = plan.storage_of[plan.alias_root[v]];
  }

  // Arena offsets: first fit over live intervals, in order of first write.
  // Intervals are in groups, not kernels: a group's kernels interleave row
  // by row, so everything it touches is live for all of it.
  struct Interval {
    int storage;
    int begin, end;
  };
  std::vector<Interval> intervals, symbolic_intervals;
  for (int s = 0; s < static_cast<int>(plan.storages.size()); ++s) {
    const Storage& storage = plan.storages[s];
    if (storage.kind != Storage::Kind::kScratch || storage.values.empty()) continue;
    int begin = num_kernels, end = -1;
    for (int value : storage.values) {
      begin = std::min(begin, schedule.group_of[first_write[value]]);
      end = std::max({end, schedule.group_of[first_write[value]],
                      last_read[value] < 0 ? -1 : schedule.group_of[last_read[value]]});
    }
    (storage.is_symbolic() ? symbolic_intervals : intervals).push_back({s, begin, end});
  }
  auto by_begin = [](const Interval& a, const Interval& b) { return a.begin < b.begin; };
  std::stable_sort(intervals.begin(), intervals.end(), by_begin);
  std::stable_sort(symbolic_intervals.begin(), symbolic_intervals.end(), by_begin);

  // Symbolic slices: a dead slot of the same unit is reused (the tightest
  // that fits, else the largest, which grows), else a new slot.
  struct Slot {
    std::vector<int> symbols;  // the unit: bytes are coefficient * these
    int64_t coefficient = 0;
    int end = -1;  // the last group any of its slices is live in
  };
  std::vector<Slot> slots;
  for (const Interval& interval : symbolic_intervals) {
    Storage& storage = plan.storages[interval.storage];
    const ir::SymExpr::Term& need = storage.bytes.terms.at(0);  // a product of sizes: one term
    // Whether slot a suits better than slot b.
    auto better = [&](const Slot& a, const Slot& b) {
      const bool a_fits = a.coefficient >= need.coefficient;
      if (a_fits != (b.coefficient >= need.coefficient)) return a_fits;
      return a_fits ? a.coefficient < b.coefficient : a.coefficient > b.coefficient;
    };
    int best = -1;
    for (int s = 0; s < static_cast<int>(slots.size()); ++s) {
      if (slots[s].symbols != need.symbols || slots[s].end >= interval.begin) continue;
      if (best < 0 || better(slots[s], slots[best])) best = s;
    }
    if (best < 0) {
      best = static_cast<int>(slots.size());
      slots.push_back({need.symbols, 0, -1});
    }
    slots[best].coefficient = std::max(slots[best].coefficient, need.coefficient);
    slots[best].end = std::max(slots[best].end, interval.end);
    storage.slot = best;
  }
  for (const Slot& slot : slots) {
    plan.slots.push_back(ir::SymExpr{{{slot.coefficient, slot.symbols}}});
  }
  plan.symbolic_scratch = !slots.empty();
  std::vector<Interval> placed;
  for (const Interval& interval : intervals) {
    Storage& storage = plan.storages[interval.storage];
    // Candidate offsets: 0 and the end of every overlapping placed slice.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Interval& other : placed) {
      if (other.end < interval.begin || interval.end < other.begin) continue;
      const Storage& used = plan.storages[other.storage];
      busy.push_back({used.offset, used.offset + AlignUp(used.bytes.constant())});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + AlignUp(storage.bytes.constant()) <= begin) break;
      offset = std::max(offset, end);
    }
    storage.offset = offset;
    plan.scratch_bytes = std::max(plan.scratch_bytes, offset + AlignUp(storage.bytes.constant()));
    placed.push_back(interval);
  }
  return plan;
}

std::string ToString(const BufferPlan& plan) {
  std::string text;
  for (const Storage& storage : plan.storages) {
    if (storage.values.empty()) continue;
    switch (storage.kind) {
      case Storage::Kind::kInput:
        absl::StrAppend(&text, "input ", storage.index);
        break;
      case Storage::Kind::kOutput:
        absl::StrAppend(&text, "output ", storage.index);
        if (storage.aliased_input >= 0) {
          absl::StrAppend(&text, " (input ", storage.aliased_input, "'s storage)");
        }
        break;
      case Storage::Kind::kScratch:
        if (storage.is_symbolic()) {
          absl::StrAppend(&text, "scratch slot ", storage.slot, " (placed at run time)");
        } else {
          absl::StrAppend(&text, "scratch [", storage.offset, ", ",
                          storage.offset + storage.bytes.constant(), ")");
        }
        break;
      case Storage::Kind::kRow:
        absl::StrAppend(&text, "row buffer of group ", storage.index);
        break;
    }
    absl::StrAppend(&text, ": ", ir::ToString(storage.bytes, ir::Graph()), " bytes, holds ",
                    absl::StrJoin(storage.values, ", ",
                                  [](std::string* out, int v) { absl::StrAppend(out, "%", v); }),
                    "\n");
  }
  absl::StrAppend(&text, "scratch arena: ", plan.scratch_bytes, " bytes\n");
  for (const std::string& note : plan.notes) absl::StrAppend(&text, "note: ", note, "\n");
  return text;
}

}  // namespace kiln
