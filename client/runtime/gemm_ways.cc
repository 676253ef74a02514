#include "client/runtime/gemm_ways.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln {

GemmLibraries GemmLibrariesFromEnvironment() {
  const char* env = getenv("KILN_GEMM");
  if (env == nullptr || *env == '\0' || strcmp(env, "fastest") == 0) {
    return GemmLibraries::kFastest;
  }
  if (strcmp(env, "openblas") == 0) return GemmLibraries::kOpenBlas;
  if (strcmp(env, "onednn") == 0) return GemmLibraries::kOneDnn;
  fprintf(stderr,
          "kiln runtime: KILN_GEMM=%s is none of fastest, openblas, onednn; taking fastest\n", env);
  return GemmLibraries::kFastest;
}

GemmWays::Candidates GemmWays::WaysFor(const Shape& shape, bool onednn_room) const {
  Candidates candidates;
  if (shape.m == 1 || shape.n == 1) {  // a matrix-vector product: GEMV, as stored
    candidates.way[candidates.count++] = GemmWay::kOpenBlas;
    return candidates;
  }
  constexpr int64_t kOneDnnWork = int64_t{1} << 21;  // multiply-adds
  const bool onednn = libraries_ != GemmLibraries::kOpenBlas && shape.onednn_layout &&
                      shape.m * shape.n * shape.k >= kOneDnnWork && onednn_room;
  if (onednn && libraries_ == GemmLibraries::kOneDnn) {
    candidates.way[candidates.count++] = GemmWay::kOneDnn;
    return candidates;
  }
  const int64_t b_elements = shape.k * shape.n;
  if (!shape.b_transposed) {
    candidates.way[candidates.count++] = GemmWay::kOpenBlas;
  } else if (b_elements <= (int64_t{1} << 14)) {
    candidates.way[candidates.count++] = GemmWay::kOpenBlasCopiedB;
  } else if (shape.m < 32 || b_elements * shape.element_bytes > (int64_t{2} << 20)) {
    candidates.way[candidates.count++] = GemmWay::kOpenBlas;
  } else {
    candidates.way[candidates.count++] = GemmWay::kOpenBlas;
    candidates.way[candidates.count++] = GemmWay::kOpenBlasCopiedB;
  }
  if (onednn) candidates.way[candidates.count++] = GemmWay::kOneDnn;
  return candidates;
}

bool GemmWays::OneDnnRoom(const Shape& shape) {
  absl::MutexLock lock(&mutex_);
  if (onednn_shapes_.contains(shape)) return true;
  if (onednn_shapes_.size() >= kMaxOneDnnShapes) return false;
  onednn_shapes_.insert(shape);
  return true;
}

void GemmWays::Run(const Shape& shape, absl::FunctionRef<void(GemmWay)> multiply) {
  Candidates candidates = WaysFor(shape);
  if (candidates.way[candidates.count - 1] == GemmWay::kOneDnn && !OneDnnRoom(shape)) {
    candidates = WaysFor(shape, /*onednn_room=*/false);
  }
  fastest_.Run(shape, candidates.count, [&](int way) { multiply(candidates.way[way]); });
}

}  // namespace kiln
