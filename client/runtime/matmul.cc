#include "client/runtime/matmul.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/runtime/dnnl.h"
#include "client/runtime/runtime.h"

namespace kiln {
namespace {

// One shape's primitive and what a call needs beside it; `primitive` is
// null when oneDNN offers no implementation worth running.
struct Plan {
  Primitive primitive;
  dnnl_memory_desc_t a, b, c;
  size_t scratch_bytes = 0;
};

std::unique_ptr<Plan> MakePlan(const Dnnl& dnnl, const MatmulShape& shape) {
  auto plan = std::make_unique<Plan>();
  const dnnl_dims_t a_dims = {shape.m, shape.k}, a_strides = {shape.a_row, shape.a_col};
  const dnnl_dims_t b_dims = {shape.k, shape.n}, b_strides = {shape.b_row, shape.b_col};
  const dnnl_dims_t c_dims = {shape.m, shape.n}, c_strides = {shape.c_row, 1};
  dnnl_matmul_desc_t operation;
  if (dnnl.dnnl_memory_desc_init_by_strides(&plan->a, 2, a_dims, dnnl_f32, a_strides) !=
          dnnl_success ||
      dnnl.dnnl_memory_desc_init_by_strides(&plan->b, 2, b_dims, dnnl_f32, b_strides) !=
          dnnl_success ||
      dnnl.dnnl_memory_desc_init_by_strides(&plan->c, 2, c_dims, dnnl_f32, c_strides) !=
          dnnl_success ||
      dnnl.dnnl_matmul_desc_init(&operation, &plan->a, &plan->b, nullptr, &plan->c) !=
          dnnl_success) {
    ReportOnce(absl::StrCat("oneDNN refuses a ", shape.m, "x", shape.k, " by ", shape.k, "x",
                            shape.n, " product in these layouts; OpenBLAS multiplies them"));
    return plan;
  }
  dnnl_primitive_attr_t attr;
  dnnl.dnnl_primitive_attr_create(&attr);
  dnnl.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_primitive_desc_t descriptor = nullptr;
  const dnnl_status_t status =
      dnnl.dnnl_primitive_desc_create(&descriptor, &operation, attr, dnnl.engine, nullptr);
  dnnl.dnnl_primitive_attr_destroy(attr);
  if (status != dnnl_success) {
    ReportOnce(absl::StrCat("oneDNN has no implementation of a ", shape.m, "x", shape.k, " by ",
                            shape.k, "x", shape.n, " product (status ", status,
                            "); OpenBLAS multiplies it"));
    return plan;
  }
  // Its reference implementation is a plain loop, far slower than OpenBLAS:
  // not worth timing.
  if (!absl::StartsWith(ImplementationOf(dnnl, descriptor), "ref")) {
    plan->scratch_bytes = dnnl.dnnl_memory_desc_get_size(
        dnnl.dnnl_primitive_desc_query_md(descriptor, dnnl_query_scratchpad_md, 0));
    if (dnnl.dnnl_primitive_create(&plan->primitive.handle, descriptor) != dnnl_success) {
      plan->primitive.handle = nullptr;
    }
  }
  dnnl.dnnl_primitive_desc_destroy(descriptor);
  return plan;
}

// The plan for `shape`, made on its first call.
const Plan& FindPlan(const Dnnl& dnnl, const MatmulShape& shape) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const plans = new absl::flat_hash_map<MatmulShape, std::unique_ptr<Plan>>;
  {
    absl::ReaderMutexLock lock(&mutex);
    auto found = plans->find(shape);
    if (found != plans->end()) return *found->second;
  }
  std::unique_ptr<Plan> made = MakePlan(dnnl, shape);
  absl::MutexLock lock(&mutex);
  // A thread that lost a race drops its plan.
  return *plans->try_emplace(shape, std::move(made)).first->second;
}

}  // namespace

bool MatmulF32(const MatmulShape& shape, const float* a, const float* b, float* c) {
  const Dnnl& dnnl = OpenDnnl();
  if (!dnnl.error.empty()) {
    ReportOnce(dnnl.error);
    return false;
  }
  // oneDNN fixes a primitive's thread count when it makes it: one, here too.
  const OneOpenMpThread one_openmp_thread(dnnl);
  const Plan& plan = FindPlan(dnnl, shape);
  const dnnl_stream_t stream = ThisThreadsStream(dnnl);
  if (stream == nullptr) ReportOnce("oneDNN cannot make a stream; OpenBLAS multiplies");
  if (!plan.primitive || stream == nullptr) return false;
  // This thread's memory objects for the plan's A, B, C and scratchpad,
  // pointed at each call's tensors: made once, so a steady-state call
  // makes none.
  struct Memories {
    dnnl_memory_t of[4] = {};  // A, B, C, scratchpad; all or none
  };
  struct ThreadMemories {
    absl::flat_hash_map<const Plan*, Memories> of;
    ~ThreadMemories() {
      for (const auto& [plan, memories] : of) {
        for (dnnl_memory_t memory : memories.of) {
          if (memory != nullptr) OpenDnnl().dnnl_memory_destroy(memory);
        }
      }
    }
  };
  thread_local ThreadMemories thread_memories;
  thread_local GrowingBuffer scratch_buffer;
  Memories& memories = thread_memories.of[&plan];
  if (memories.of[0] == nullptr) {
    const dnnl_memory_desc_t scratch_desc = ScratchpadDesc(dnnl, plan.scratch_bytes);
    const dnnl_memory_desc_t* descs[4] = {&plan.a, &plan.b, &plan.c, &scratch_desc};
    Memories made;
    bool all = true;
    for (int i = 0; i < 4 && all; ++i) {
      all = dnnl.dnnl_memory_create(&made.of[i], descs[i], dnnl.engine, DNNL_MEMORY_NONE) ==
            dnnl_success;
    }
    if (!all) {
      for (dnnl_memory_t memory : made.of) {
        if (memory != nullptr) dnnl.dnnl_memory_destroy(memory);
      }
      ReportOnce("oneDNN cannot describe a product's tensors; OpenBLAS multiplies it");
      return false;
    }
    memories = made;
  }
  void* scratch = scratch_buffer.Get(static_cast<int64_t>(plan.scratch_bytes) + 1);
  if (scratch == nullptr) return false;
  dnnl.dnnl_memory_set_data_handle(memories.of[0], const_cast<float*>(a));
  dnnl.dnnl_memory_set_data_handle(memories.of[1], const_cast<float*>(b));
  dnnl.dnnl_memory_set_data_handle(memories.of[2], c);
  dnnl.dnnl_memory_set_data_handle(memories.of[3], scratch);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, memories.of[0]},
                                  {DNNL_ARG_WEIGHTS, memories.of[1]},
                                  {DNNL_ARG_DST, memories.of[2]},
                                  {DNNL_ARG_SCRATCHPAD, memories.of[3]}};
  dnnl_status_t status = dnnl.dnnl_primitive_execute(plan.primitive.handle, stream, 4, args);
  if (status == dnnl_success) status = dnnl.dnnl_stream_wait(stream);
  if (status != dnnl_success) {
    ReportOnce(absl::StrCat("oneDNN failed to run a product (status ", status,
                            "); OpenBLAS multiplies it"));
    return false;
  }
  return true;
}

}  // namespace kiln
