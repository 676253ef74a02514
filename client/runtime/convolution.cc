#include "client/runtime/convolution.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/runtime/dnnl.h"
#include "client/runtime/fastest_of.h"
#include "client/runtime/runtime.h"
#include "common/status_macros.h"

namespace kiln {
namespace {

// One shape's primitives: the convolution in oneDNN's chosen layouts, and
// the reorders from and to the artifact's strided tensors (null where the
// layouts agree). Made once, then shared by every thread.
struct Plan {
  // Null when oneDNN has nothing to compute: every result position is
  // uncovered (see `covered`).
  Primitive convolution;
  Primitive src_reorder, weights_reorder, dst_reorder;
  dnnl_memory_desc_t src, weights, dst, bias;  // the artifact's
  dnnl_memory_desc_t inner_src, inner_weights, inner_dst;
  // Per-call buffers: the reordered tensors and one scratchpad for all.
  size_t src_bytes = 0, weights_bytes = 0, dst_bytes = 0, scratch_bytes = 0;
  std::string implementation;  // oneDNN's name for it, as ONEDNN_VERBOSE prints it
  // How many positions of each spatial dim of dst oneDNN computes (`dst`
  // covers them): all of out_size but for a transposed convolution whose
  // output_padding reaches past the full result (Covered).
  long long covered[3] = {0, 0, 0};
  bool uncovered = false;  // some position is not covered: FillUncovered
};

// How long spatial dim `d` of a transposed convolution's full result is:
// every position some product reaches, before padding is cut.
long long FullSize(const kiln_conv& conv, int d) {
  return (conv.in_size[d] - 1) * conv.stride[d] + conv.dilation[d] * (conv.kernel[d] - 1) + 1;
}

// How many positions of spatial dim `d` of a transposed convolution's
// result get any product. dst starts `padding` into the full result;
// torch's output_padding may reach past its end, where positions hold the
// bias alone. oneDNN would need a high padding of padding - output_padding
// there, and refuses one of -stride or less (stride 1, dilation 2,
// output_padding 1): those positions are left out of oneDNN's dst and
// written by Kiln.
long long Covered(const kiln_conv& conv, int d) {
  return std::max(0LL, std::min(conv.out_size[d], FullSize(conv, d) - conv.padding[d]));
}

std::string PlanKey(const kiln_conv& conv, bool bias) {
  std::string key(reinterpret_cast<const char*>(&conv), sizeof(conv));
  key.push_back(bias ? 1 : 0);
  return key;
}

// The descriptors for `conv`: plain strided tensors (dst its covered
// positions), weights in oneDNN's order for either kind, [out, in,
// kernel...], grouped ([groups, out / groups, in / groups, kernel...]) when
// groups > 1. A transposed convolution's weights are torch's [in, out /
// groups, kernel...]: the same elements with the first two strides swapped.
void DescribeTensors(const Dnnl& dnnl, const kiln_conv& conv, Plan& plan) {
  const int spatial = static_cast<int>(conv.spatial);
  const int rank = 2 + spatial;
  dnnl_dims_t src = {conv.batch, conv.in_channels}, dst = {conv.batch, conv.out_channels};
  dnnl_dims_t src_strides, dst_strides;
  for (int d = 0; d < spatial; ++d) {
    plan.covered[d] = conv.transposed ? Covered(conv, d) : conv.out_size[d];
    plan.uncovered |= plan.covered[d] < conv.out_size[d];
    src[2 + d] = conv.in_size[d];
    dst[2 + d] = plan.covered[d];
  }
  for (int d = 0; d < rank; ++d) {
    src_strides[d] = conv.src_strides[d];
    dst_strides[d] = conv.dst_strides[d];
  }
  dnnl.dnnl_memory_desc_init_by_strides(&plan.src, rank, src, dnnl_f32, src_strides);
  dnnl.dnnl_memory_desc_init_by_strides(&plan.dst, rank, dst, dnnl_f32, dst_strides);
  const long long out_per_group = conv.out_channels / conv.groups;
  const long long in_per_group = conv.in_channels / conv.groups;
  const long long out_stride = conv.weight_strides[conv.transposed ? 1 : 0];
  const long long in_stride = conv.weight_strides[conv.transposed ? 0 : 1];
  dnnl_dims_t weights, weight_strides;
  int weight_rank = 0;
  if (conv.groups > 1) {
    weights[0] = conv.groups;
    weight_strides[0] = conv.weight_strides[0] * (conv.transposed ? in_per_group : out_per_group);
    weight_rank = 1;
  }
  weights[weight_rank] = out_per_group;
  weight_strides[weight_rank] = out_stride;
  weights[weight_rank + 1] = in_per_group;
  weight_strides[weight_rank + 1] = in_stride;
  for (int d = 0; d < spatial; ++d) {
    weights[weight_rank + 2 + d] = conv.kernel[d];
    weight_strides[weight_rank + 2 + d] = conv.weight_strides[2 + d];
  }
  dnnl.dnnl_memory_desc_init_by_strides(&plan.weights, weight_rank + rank, weights, dnnl_f32,
                                        weight_strides);
  dnnl_dims_t bias = {conv.out_channels}, bias_strides = {1};
  dnnl.dnnl_memory_desc_init_by_strides(&plan.bias, 1, bias, dnnl_f32, bias_strides);
}

// The reorder from `from` to `to`, or null when they are the same layout.
dnnl_status_t MakeReorder(const Dnnl& dnnl, const dnnl_memory_desc_t& from,
                          const dnnl_memory_desc_t& to, dnnl_primitive_attr_t attr,
                          dnnl_primitive_t* reorder, size_t* scratch) {
  *reorder = nullptr;
  if (dnnl.dnnl_memory_desc_equal(&from, &to)) return dnnl_success;
  dnnl_primitive_desc_t descriptor;
  dnnl_status_t status = dnnl.dnnl_reorder_primitive_desc_create(&descriptor, &from, dnnl.engine,
                                                                 &to, dnnl.engine, attr);
  if (status != dnnl_success) return status;
  *scratch = std::max(*scratch, dnnl.dnnl_memory_desc_get_size(dnnl.dnnl_primitive_desc_query_md(
                                    descriptor, dnnl_query_scratchpad_md, 0)));
  status = dnnl.dnnl_primitive_create(reorder, descriptor);
  dnnl.dnnl_primitive_desc_destroy(descriptor);
  return status;
}

// `propagation`: oneDNN picks its implementation per propagation kind,
// and for a forward pass either kind computes the same thing (see Ways).
absl::StatusOr<std::unique_ptr<Plan>> MakePlan(const Dnnl& dnnl, const kiln_conv& conv, bool bias,
                                               dnnl_prop_kind_t propagation) {
  auto plan = std::make_unique<Plan>();
  DescribeTensors(dnnl, conv, *plan);
  const int spatial = static_cast<int>(conv.spatial);
  for (int d = 0; d < spatial; ++d) {
    if (plan->covered[d] == 0) return plan;  // all bias: no primitive
  }
  dnnl_memory_desc_t any_src, any_weights, any_dst;
  dnnl.dnnl_memory_desc_init_by_tag(&any_src, plan->src.ndims, plan->src.dims, dnnl_f32,
                                    dnnl_format_tag_any);
  dnnl.dnnl_memory_desc_init_by_tag(&any_weights, plan->weights.ndims, plan->weights.dims, dnnl_f32,
                                    dnnl_format_tag_any);
  dnnl.dnnl_memory_desc_init_by_tag(&any_dst, plan->dst.ndims, plan->dst.dims, dnnl_f32,
                                    dnnl_format_tag_any);
  dnnl_dims_t strides, dilation, padding_low, padding_high;
  for (int d = 0; d < spatial; ++d) {
    strides[d] = conv.stride[d];
    dilation[d] = conv.dilation[d] - 1;  // oneDNN counts the gaps
    padding_low[d] = conv.padding[d];
    // A transposed convolution's covered positions end this far before
    // the full result's end: padding less output_padding, or 0 (Covered).
    padding_high[d] =
        conv.transposed ? FullSize(conv, d) - conv.padding[d] - plan->covered[d] : conv.padding[d];
  }
  // oneDNN's deconvolution is torch's transposed convolution; its operation
  // descriptor has the convolution's type.
  dnnl_convolution_desc_t operation;
  const dnnl_memory_desc_t* bias_desc = bias ? &plan->bias : nullptr;
  dnnl_status_t status =
      conv.transposed
          ? dnnl.dnnl_dilated_deconvolution_forward_desc_init(
                &operation, propagation, dnnl_deconvolution_direct, &any_src, &any_weights,
                bias_desc, &any_dst, strides, dilation, padding_low, padding_high)
          : dnnl.dnnl_dilated_convolution_forward_desc_init(
                &operation, propagation, dnnl_convolution_direct, &any_src, &any_weights, bias_desc,
                &any_dst, strides, dilation, padding_low, padding_high);
  dnnl_primitive_attr_t attr;
  dnnl.dnnl_primitive_attr_create(&attr);
  dnnl.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_primitive_desc_t descriptor = nullptr;
  if (status == dnnl_success) {
    status = dnnl.dnnl_primitive_desc_create(&descriptor, &operation, attr, dnnl.engine, nullptr);
  }
  if (status == dnnl_success) {
    auto query = [&](dnnl_query_t what) {
      return *dnnl.dnnl_primitive_desc_query_md(descriptor, what, 0);
    };
    plan->inner_src = query(dnnl_query_src_md);
    plan->inner_weights = query(dnnl_query_weights_md);
    plan->inner_dst = query(dnnl_query_dst_md);
    plan->scratch_bytes = dnnl.dnnl_memory_desc_get_size(
        dnnl.dnnl_primitive_desc_query_md(descriptor, dnnl_query_scratchpad_md, 0));
    plan->implementation = ImplementationOf(dnnl, descriptor);
    status = dnnl.dnnl_primitive_create(&plan->convolution.handle, descriptor);
    dnnl.dnnl_primitive_desc_destroy(descriptor);
  }
  if (status == dnnl_success) {
    status = MakeReorder(dnnl, plan->src, plan->inner_src, attr, &plan->src_reorder.handle,
                         &plan->scratch_bytes);
  }
  if (status == dnnl_success) {
    status = MakeReorder(dnnl, plan->weights, plan->inner_weights, attr,
                         &plan->weights_reorder.handle, &plan->scratch_bytes);
  }
  if (status == dnnl_success) {
    status = MakeReorder(dnnl, plan->inner_dst, plan->dst, attr, &plan->dst_reorder.handle,
                         &plan->scratch_bytes);
  }
  dnnl.dnnl_primitive_attr_destroy(attr);
  if (status != dnnl_success) {
    return absl::InternalError(absl::StrCat("oneDNN refuses a ",
                                            conv.transposed ? "transposed " : "", "convolution of ",
                                            conv.spatial, " spatial dims (status ", status, ")"));
  }
  if (plan->src_reorder) plan->src_bytes = dnnl.dnnl_memory_desc_get_size(&plan->inner_src);
  if (plan->weights_reorder) {
    plan->weights_bytes = dnnl.dnnl_memory_desc_get_size(&plan->inner_weights);
  }
  if (plan->dst_reorder) plan->dst_bytes = dnnl.dnnl_memory_desc_get_size(&plan->inner_dst);
  return plan;
}

// The two ways to run one shape. oneDNN picks an implementation per
// propagation kind: for a forward pass of f32 on AVX-512 CPUs, 2.6 gives
// `forward_inference` its BRGEMM convolutions on channels-last tensors and
// `forward_training` (what eager's ideep asks for) its direct JIT ones on
// blocked tensors. Which is faster depends on the CPU and the shape, so
// both ways are
// made on a shape's first call (Warmup's), and FastestOf keeps the
// faster (ConvolveF32). way[1] is null when oneDNN gives both kinds the
// same implementation.
struct Ways {
  std::unique_ptr<Plan> way[2];
  const Plan& Get(int which) const { return way[which] != nullptr ? *way[which] : *way[0]; }
};

// The ways for `conv`, made on its first call.
absl::StatusOr<const Ways*> FindWays(const Dnnl& dnnl, const kiln_conv& conv, bool bias) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const found_ways = new absl::flat_hash_map<std::string, std::unique_ptr<Ways>>;
  const std::string key = PlanKey(conv, bias);
  {
    absl::ReaderMutexLock lock(&mutex);
    auto found = found_ways->find(key);
    if (found != found_ways->end()) return found->second.get();
  }
  auto made = std::make_unique<Ways>();
  ASSIGN_OR_RETURN(made->way[0], MakePlan(dnnl, conv, bias, dnnl_forward_inference));
  if (made->way[0]->convolution) {
    absl::StatusOr<std::unique_ptr<Plan>> training =
        MakePlan(dnnl, conv, bias, dnnl_forward_training);
    if (training.ok() && (*training)->implementation != made->way[0]->implementation) {
      made->way[1] = *std::move(training);
    }
  }
  absl::MutexLock lock(&mutex);
  auto [slot, inserted] = found_ways->try_emplace(key, std::move(made));
  // A thread that lost a race drops its Ways.
  return slot->second.get();
}

constexpr size_t Aligned(size_t bytes) { return (bytes + 63) & ~size_t{63}; }

// Writes the bias (or 0) at each position of dst that `plan` leaves
// uncovered: past covered[d] along some spatial dim d.
void FillUncovered(const kiln_conv& conv, const Plan& plan, const float* bias, float* dst) {
  // Spatial dims as [depth, height, width]; missing ones have size 1.
  long long size[3] = {1, 1, 1}, covered[3] = {1, 1, 1}, stride[3] = {0, 0, 0};
  const int first = 3 - static_cast<int>(conv.spatial);
  for (int d = 0; d < conv.spatial; ++d) {
    size[first + d] = conv.out_size[d];
    covered[first + d] = plan.covered[d];
    stride[first + d] = conv.dst_strides[2 + d];
  }
  for (long long n = 0; n < conv.batch; ++n) {
    for (long long channel = 0; channel < conv.out_channels; ++channel) {
      const float value = bias != nullptr ? bias[channel] : 0.0f;
      float* plane = dst + n * conv.dst_strides[0] + channel * conv.dst_strides[1];
      for (long long z = 0; z < size[0]; ++z) {
        for (long long y = 0; y < size[1]; ++y) {
          // A row inside the covered depths and heights is uncovered past
          // covered[2] only.
          const long long from = z < covered[0] && y < covered[1] ? covered[2] : 0;
          float* row = plane + z * stride[0] + y * stride[1];
          for (long long x = from; x < size[2]; ++x) row[x * stride[2]] = value;
        }
      }
    }
  }
}

// Runs one part on the calling thread, at one OpenMP thread, the way
// `way` (see Ways).
int RunPart(const Dnnl& dnnl, const kiln_conv& conv, int way, const float* src,
            const float* weights, const float* bias, float* dst) {
  // oneDNN fixes a primitive's thread count when it makes it (a
  // convolution's kernels then ask OpenMP for that many): one, here too.
  const OneOpenMpThread one_openmp_thread(dnnl);
  absl::StatusOr<const Ways*> found = FindWays(dnnl, conv, bias != nullptr);
  if (!found.ok()) {
    ReportOnce(std::string(found.status().message()));
    return 1;
  }
  const Plan& plan = (*found)->Get(way);
  if (!plan.convolution) {
    FillUncovered(conv, plan, bias, dst);
    return 0;
  }
  thread_local GrowingBuffer buffers;
  char* base =
      static_cast<char*>(buffers.Get(Aligned(plan.src_bytes) + Aligned(plan.weights_bytes) +
                                     Aligned(plan.dst_bytes) + plan.scratch_bytes));
  if (base == nullptr &&
      plan.src_bytes + plan.weights_bytes + plan.dst_bytes + plan.scratch_bytes) {
    ReportOnce("out of memory for a convolution's buffers");
    return 1;
  }
  const dnnl_stream_t stream = ThisThreadsStream(dnnl);
  if (stream == nullptr) {
    ReportOnce("oneDNN cannot make a stream");
    return 1;
  }
  std::vector<dnnl_memory_t> memories;
  auto memory = [&](const dnnl_memory_desc_t& desc, const void* data) {
    dnnl_memory_t made = nullptr;
    dnnl.dnnl_memory_create(&made, &desc, dnnl.engine, const_cast<void*>(data));
    memories.push_back(made);
    return made;
  };
  char* next = base;
  auto take = [&](size_t bytes) {
    char* taken = next;
    next += Aligned(bytes);
    return taken;
  };
  dnnl_memory_t user_src = memory(plan.src, src), user_weights = memory(plan.weights, weights);
  dnnl_memory_t user_dst = memory(plan.dst, dst);
  dnnl_memory_t inner_src =
      plan.src_reorder ? memory(plan.inner_src, take(plan.src_bytes)) : user_src;
  dnnl_memory_t inner_weights =
      plan.weights_reorder ? memory(plan.inner_weights, take(plan.weights_bytes)) : user_weights;
  dnnl_memory_t inner_dst =
      plan.dst_reorder ? memory(plan.inner_dst, take(plan.dst_bytes)) : user_dst;
  const dnnl_memory_desc_t scratch_desc = ScratchpadDesc(dnnl, plan.scratch_bytes);
  dnnl_memory_t scratch =
      memory(scratch_desc, plan.scratch_bytes ? take(plan.scratch_bytes) : next);

  dnnl_status_t status = dnnl_success;
  auto reorder = [&](dnnl_primitive_t primitive, dnnl_memory_t from, dnnl_memory_t to) {
    if (primitive == nullptr || status != dnnl_success) return;
    const dnnl_exec_arg_t args[] = {
        {DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}};
    status = dnnl.dnnl_primitive_execute(primitive, stream, 3, args);
  };
  reorder(plan.src_reorder.handle, user_src, inner_src);
  reorder(plan.weights_reorder.handle, user_weights, inner_weights);
  if (status == dnnl_success) {
    std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, inner_src},
                                         {DNNL_ARG_WEIGHTS, inner_weights},
                                         {DNNL_ARG_DST, inner_dst},
                                         {DNNL_ARG_SCRATCHPAD, scratch}};
    if (bias != nullptr) args.push_back({DNNL_ARG_BIAS, memory(plan.bias, bias)});
    status = dnnl.dnnl_primitive_execute(plan.convolution.handle, stream,
                                         static_cast<int>(args.size()), args.data());
  }
  reorder(plan.dst_reorder.handle, inner_dst, user_dst);
  if (status == dnnl_success) status = dnnl.dnnl_stream_wait(stream);
  for (dnnl_memory_t made : memories) dnnl.dnnl_memory_destroy(made);
  if (status != dnnl_success) {
    ReportOnce(absl::StrCat("oneDNN failed to run a ", conv.transposed ? "transposed " : "",
                            "convolution (status ", status, ")"));
    return 1;
  }
  if (plan.uncovered) FillUncovered(conv, plan, bias, dst);
  return 0;
}

// Below this many multiply-adds a convolution stays on the calling thread.
constexpr long long kParallelConvWork = 1LL << 21;

// The convolution on `pool`'s threads, the way `way` (see Ways).
int Convolve(const Dnnl& dnnl, ThreadPool& pool, const kiln_conv& conv, int way, const float* src,
             const float* weights, const float* bias, float* dst) {
  // Each output position of a convolution, or input position of a
  // transposed one, meets kernel * in_channels / groups weights per output
  // channel.
  long long work = conv.batch * conv.out_channels * (conv.in_channels / conv.groups);
  for (int d = 0; d < conv.spatial; ++d) {
    work *= (conv.transposed ? conv.in_size[d] : conv.out_size[d]) * conv.kernel[d];
  }
  const int threads = pool.threads();
  if (threads == 1 || work < kParallelConvWork) {
    return RunPart(dnnl, conv, way, src, weights, bias, dst);
  }
  // Parts: slices of the batch; else of the output channels (in blocks of
  // 16, oneDNN's), when there is one group; else of the groups.
  enum { kBatch, kChannels, kGroups } axis;
  long long extent, block = 1;
  if (conv.batch >= threads) {
    axis = kBatch;
    extent = conv.batch;
  } else if (conv.groups == 1 && conv.out_channels >= 16 * threads) {
    axis = kChannels;
    extent = conv.out_channels;
    block = 16;
  } else if (conv.groups >= threads) {
    axis = kGroups;
    extent = conv.groups;
  } else {
    return RunPart(dnnl, conv, way, src, weights, bias, dst);
  }
  const long long blocks = (extent + block - 1) / block;
  std::vector<int> results(threads, 0);
  pool.ParallelFor(threads, 1, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part) {
      const long long begin = std::min(extent, blocks * part / threads * block);
      const long long end = std::min(extent, blocks * (part + 1) / threads * block);
      if (begin == end) continue;
      kiln_conv slice = conv;
      const float *part_src = src, *part_weights = weights, *part_bias = bias;
      float* part_dst = dst;
      if (axis == kBatch) {
        slice.batch = end - begin;
        part_src += begin * conv.src_strides[0];
        part_dst += begin * conv.dst_strides[0];
      } else {
        // Channels: output channels [begin, end); groups: groups [begin,
        // end), with their input and output channels. Weights are [out, in
        // / groups, ...], or [in, out / groups, ...] when transposed.
        const long long out_per_group = conv.out_channels / conv.groups;
        const long long in_per_group = conv.in_channels / conv.groups;
        const long long out_begin = axis == kChannels ? begin : begin * out_per_group;
        const long long out_end = axis == kChannels ? end : end * out_per_group;
        slice.out_channels = out_end - out_begin;
        part_dst += out_begin * conv.dst_strides[1];
        if (part_bias != nullptr) part_bias += out_begin;
        if (axis == kGroups) {
          slice.groups = end - begin;
          slice.in_channels = slice.groups * in_per_group;
          part_src += begin * in_per_group * conv.src_strides[1];
          part_weights +=
              (conv.transposed ? begin * in_per_group : out_begin) * conv.weight_strides[0];
        } else {
          part_weights += out_begin * conv.weight_strides[conv.transposed ? 1 : 0];
        }
      }
      results[part] = RunPart(dnnl, slice, way, part_src, part_weights, part_bias, part_dst);
    }
  });
  return *std::max_element(results.begin(), results.end());
}

}  // namespace

int ConvolveF32(ThreadPool& pool, const kiln_conv& conv, const float* src, const float* weights,
                const float* bias, float* dst) {
  const Dnnl& dnnl = OpenDnnl();
  if (!dnnl.error.empty()) {
    ReportOnce(dnnl.error);
    return 1;
  }
  static auto* const ways = new FastestOf<std::string>;
  int result = 0;
  ways->Run(absl::StrCat(PlanKey(conv, bias != nullptr), "/", pool.threads()), 2,
            [&](int way) { result = Convolve(dnnl, pool, conv, way, src, weights, bias, dst); });
  return result;
}

}  // namespace kiln
