#include "tools/bench/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"
#include "codegen/passes/decompose.h"
#include "codegen/passes/lower.h"
#include "codegen/pipeline.h"
#include "common/status_macros.h"
#include "tools/reference/tensor_data.h"

namespace kiln {
namespace bench {
namespace {

using Kind = ir::Definition::Kind;

// The values `definition` reads.
std::vector<int> Dependencies(const ir::Definition& definition) {
  std::vector<int> values;
  for (const ir::Expr& expr : definition.exprs) {
    if (expr.kind == ir::Expr::Kind::kLoad) values.push_back(expr.value);
  }
  if (definition.source >= 0) values.push_back(definition.source);
  values.insert(values.end(), definition.operands.begin(), definition.operands.end());
  return values;
}

// The reduction length of the definition itself: its reduced extents, a
// scan's axis, the points a scatter may add to one element, or a GEMM's
// inner dim.
absl::StatusOr<int64_t> OwnLength(const ir::Graph& graph, const ir::Definition& definition,
                                  const ir::TensorType& type) {
  int64_t length = 0;
  if (definition.kind == Kind::kReduction) {
    length = 1;
    for (const ir::Dim& dim : definition.reduction_sizes) {
      if (dim.is_symbolic()) return absl::InvalidArgumentError("symbolic reduction size");
      length *= dim.constant;
    }
  } else if (definition.kind == Kind::kScan) {
    const ir::Dim& axis = type.sizes[definition.axis];
    if (axis.is_symbolic()) return absl::InvalidArgumentError("symbolic scan size");
    length = axis.constant;
  } else if (definition.kind == Kind::kScatter) {
    // The points that may add to one element: those its coordinates other
    // than the indexed one do not tell apart.
    length = 1;
    for (size_t c = 0; c < definition.reduction_sizes.size(); ++c) {
      bool told_apart = false;
      for (int r = 0; r < definition.map.num_coordinates(); ++r) {
        told_apart |= r != definition.axis && definition.map.coefficients[r][c] != 0;
      }
      if (told_apart) continue;
      const ir::Dim& size = definition.reduction_sizes[c];
      if (size.is_symbolic()) return absl::InvalidArgumentError("symbolic scatter size");
      length *= size.constant;
    }
  } else if (definition.kind == Kind::kExtern && !definition.operands.empty()) {
    const ir::Dim& inner = graph.values[definition.operands[0]].sizes.back();
    if (inner.is_symbolic()) return absl::InvalidArgumentError("symbolic GEMM size");
    length = inner.constant;
  }
  return length;
}

double Epsilon(kiln::v1::DType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT32:
      return std::ldexp(1.0, -23);
    case kiln::v1::FLOAT64:
      return std::ldexp(1.0, -52);
    case kiln::v1::FLOAT16:
      return std::ldexp(1.0, -10);
    case kiln::v1::BFLOAT16:
      return std::ldexp(1.0, -7);
    default:
      return 0;  // integers and bool: exact
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReductionLengths(const kiln::v1::Graph& graph) {
  ASSIGN_OR_RETURN(const ir::Graph prepared, PrepareGraph(graph));
  ASSIGN_OR_RETURN(const ir::Graph core, Decompose(prepared));
  ASSIGN_OR_RETURN(const ir::LoopProgram program, Lower(core));
  const size_t n = program.definitions.size();
  std::vector<int64_t> own(n), chain(n, 0);
  for (size_t v = 0; v < n; ++v) {
    ASSIGN_OR_RETURN(own[v], OwnLength(core, program.definitions[v], core.values[v]));
  }
  // A DAG: passes in value order until nothing changes (one, when values
  // are in topological order).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t v = 0; v < n; ++v) {
      int64_t longest = 0;
      for (int dependency : Dependencies(program.definitions[v])) {
        longest = std::max(longest, chain[dependency]);
      }
      if (longest + own[v] != chain[v]) {
        chain[v] = longest + own[v];
        changed = true;
      }
    }
  }
  std::vector<int64_t> lengths;
  for (int output : core.outputs) lengths.push_back(std::max<int64_t>(1, chain[output]));
  return lengths;
}

void Accuracy::Merge(const Accuracy& other) {
  max_abs_err = std::max(max_abs_err, other.max_abs_err);
  max_rel_err = std::max(max_rel_err, other.max_rel_err);
  bound = std::max(bound, other.bound);
  reduction_length = std::max(reduction_length, other.reduction_length);
  if (mismatches == 0) first_mismatch = other.first_mismatch;
  mismatches += other.mismatches;
}

std::string Accuracy::ToString() const {
  return absl::StrFormat("max_abs_err=%.3g max_rel_err=%.3g bound=%.3g K=%d", max_abs_err,
                         max_rel_err, bound, reduction_length);
}

double ToleranceBound(kiln::v1::DType dtype, int64_t reduction_length) {
  return kToleranceFactor * Epsilon(dtype) *
         std::sqrt(double(std::max<int64_t>(1, reduction_length)));
}

std::vector<double> ToDoubles(const Tensor& tensor) {
  std::vector<double> values(tensor.NumElements());
  for (int64_t i = 0; i < tensor.NumElements(); ++i) values[i] = ElementAsDouble(tensor, i);
  return values;
}

namespace {

// `element(i)` against reference[i]; `count` elements.
template <typename Element>
Accuracy Measure(Element element, int64_t count, kiln::v1::DType dtype,
                 const std::vector<double>& reference, int64_t reduction_length) {
  Accuracy accuracy;
  accuracy.reduction_length = std::max<int64_t>(1, reduction_length);
  accuracy.bound = ToleranceBound(dtype, reduction_length);
  if (count != static_cast<int64_t>(reference.size())) {
    accuracy.mismatches = std::max<int64_t>(1, count);
    accuracy.first_mismatch =
        absl::StrFormat("%d elements, the reference has %d", count, reference.size());
    return accuracy;
  }
  double sum = 0;
  int64_t finite = 0;
  for (double value : reference) {
    if (std::isfinite(value)) sum += std::abs(value), ++finite;
  }
  const double scale = finite > 0 ? sum / finite : 0;
  for (int64_t i = 0; i < count; ++i) {
    const double a = element(i), b = reference[i];
    bool ok;
    if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(a) || std::isinf(b)) {
      ok = a == b;
    } else {
      const double error = std::abs(a - b);
      const double denominator = std::abs(b) + scale;
      const double relative = error == 0        ? 0
                              : denominator > 0 ? error / denominator
                                                : std::numeric_limits<double>::infinity();
      accuracy.max_abs_err = std::max(accuracy.max_abs_err, error);
      accuracy.max_rel_err = std::max(accuracy.max_rel_err, relative);
      ok = relative <= accuracy.bound;
    }
    if (!ok && accuracy.mismatches++ == 0) {
      accuracy.first_mismatch =
          absl::StrFormat("element %d is %.9g, float64 reference %.9g", i, a, b);
    }
  }
  return accuracy;
}

}  // namespace

Accuracy MeasureAccuracy(const Tensor& got, const std::vector<double>& reference,
                         int64_t reduction_length) {
  return Measure([&](int64_t i) { return ElementAsDouble(got, i); }, got.NumElements(), got.dtype(),
                 reference, reduction_length);
}

Accuracy MeasureAccuracy(const float* got, const std::vector<double>& reference,
                         int64_t reduction_length) {
  return Measure([&](int64_t i) { return double(got[i]); }, reference.size(), kiln::v1::FLOAT32,
                 reference, reduction_length);
}

absl::Status CheckAccuracy(const std::string& what, const Accuracy& accuracy) {
  if (accuracy.mismatches == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrFormat("%s: %d elements beyond c*eps*sqrt(K)*(|ref| + mean|ref|) (%s); first: %s",
                      what, accuracy.mismatches, accuracy.ToString(), accuracy.first_mismatch));
}

}  // namespace bench
}  // namespace kiln
