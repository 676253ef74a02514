// FFTs: torch's three spectral ops, to which every torch.fft function
// lowers, become one core op, kiln.fft, a call through the runtime table
// (fft_f32 / fft_f64, client/runtime/fft.h: FFTW) over any sizes, any
// batch and one or more dims.
//
//   _fft_c2c(x, dim, normalization, forward)          complex -> complex
//   _fft_r2c(x, dim, normalization, onesided)         real -> complex; the
//       last of `dim` keeps n / 2 + 1 entries when onesided
//   _fft_c2r(x, dim, normalization, last_dim_size)    complex -> real; the
//       last of `dim` grows to last_dim_size (reading its first
//       last_dim_size / 2 + 1 entries)
// normalization is torch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n,
// where n is the product of the transformed (real-side) sizes.
//
// kiln.fft runs on the split graph (complex.h): a complex operand or result
// is its pairs [..., 2]; its `dim` counts the dims before the pair.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ops/complex_rules.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

enum FftKind : int64_t { kComplexToComplex = 0, kRealToComplex = 1, kComplexToReal = 2 };

absl::StatusOr<std::vector<int64_t>> WrappedDims(const ir::Node& node, int64_t rank) {
  std::vector<int64_t> dims = IntListArg(node, "dim");
  if (dims.empty()) return absl::InvalidArgumentError("expects at least one dim to transform");
  for (int64_t& dim : dims) {
    ASSIGN_OR_RETURN(const int wrapped, WrapDim(dim, rank));
    dim = wrapped;
  }
  return dims;
}

int64_t Normalization(const ir::Node& node) { return IntArg(node, "normalization"); }

// The sizes of a transform's result, `sizes` being its operand's (complex
// or real, without the pair), or an error naming what is unsupported.
absl::StatusOr<std::vector<ir::Dim>> ResultSizes(std::vector<ir::Dim> sizes,
                                                 const std::vector<int64_t>& dims, int64_t kind,
                                                 int64_t last_dim_size) {
  if (sizes.size() > 8) {
    return absl::UnimplementedError(
        absl::StrCat("FFTs of rank-", sizes.size(), " tensors are not supported (at most 8)"));
  }
  for (int64_t dim : dims) {
    if (sizes[dim].constant < 1 && !sizes[dim].is_symbolic()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim ", dim, " has no entries to transform (size 0)"));
    }
    if (sizes[dim].is_symbolic()) {
      return absl::UnimplementedError(
          absl::StrCat("an FFT over dim ", dim, ", of symbolic size, is not supported yet"));
    }
  }
  ir::Dim& last = sizes[dims.back()];
  if (kind == kRealToComplex) last = ir::Dim::Constant(last.constant / 2 + 1);
  if (kind == kComplexToReal) {
    if (last_dim_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("last_dim_size is ", last_dim_size, "; it must be at least 1"));
    }
    if (last.constant < last_dim_size / 2 + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("a result of ", last_dim_size, " entries along dim ", dims.back(), " needs ",
                       last_dim_size / 2 + 1, " input entries there, got ", last.constant));
    }
    last = ir::Dim::Constant(last_dim_size);
  }
  return sizes;
}

absl::Status CheckNormalization(const ir::Node& node) {
  const int64_t mode = Normalization(node);
  if (mode < 0 || mode > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("normalization is ", mode, "; it must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n)"));
  }
  return absl::OkStatus();
}

// kiln.fft's type on the split graph.
absl::StatusOr<std::vector<ir::TensorType>> InferCore(const ir::Node& node,
                                                      const InputTypes& inputs) {
  const ir::TensorType& in = *inputs[0];
  const int64_t kind = IntArg(node, "kind");
  if (in.dtype != DType::kFloat32 && in.dtype != DType::kFloat64) {
    return absl::InternalError(absl::StrCat("kiln.fft of ", ir::DTypeName(in.dtype)));
  }
  std::vector<ir::Dim> sizes = in.sizes;
  if (kind != kRealToComplex) {
    if (sizes.empty() || sizes.back() != ir::Dim::Constant(2)) {
      return absl::InternalError("kiln.fft of a complex operand without its pair");
    }
    sizes.pop_back();
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                   WrappedDims(node, static_cast<int64_t>(sizes.size())));
  ASSIGN_OR_RETURN(sizes, ResultSizes(sizes, dims, kind, IntArg(node, "last_dim_size")));
  if (kind != kComplexToReal) sizes.push_back(ir::Dim::Constant(2));
  return std::vector<ir::TensorType>{ContiguousType(in.dtype, std::move(sizes))};
}

// The rule of one of torch's three ops.
ComplexRule SpectralRule(int64_t kind) {
  auto infer = [kind](const ir::Node& node,
                      const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const ir::TensorType& in = *inputs[0];
    if ((kind == kRealToComplex) == ir::IsComplex(in.dtype) ||
        (kind == kRealToComplex && !ir::IsFloatingPoint(in.dtype))) {
      return absl::InvalidArgumentError(
          absl::StrCat("expects a ", kind == kRealToComplex ? "float32 or float64" : "complex",
                       " input, got ", ir::DTypeName(in.dtype)));
    }
    RETURN_IF_ERROR(CheckNormalization(node));
    ASSIGN_OR_RETURN(const std::vector<int64_t> dims, WrappedDims(node, in.rank()));
    const bool onesided = kind != kRealToComplex || BoolArg(node, "onesided");
    const int64_t last = kind == kComplexToReal ? IntArg(node, "last_dim_size") : 0;
    ASSIGN_OR_RETURN(std::vector<ir::Dim> sizes,
                     ResultSizes(in.sizes, dims, onesided ? kind : kComplexToComplex, last));
    DType dtype = ir::RealPart(in.dtype);
    if (kind != kComplexToReal) {
      ASSIGN_OR_RETURN(dtype, ComplexOf(dtype));
    }
    return std::vector<ir::TensorType>{ContiguousType(dtype, std::move(sizes))};
  };
  auto split = [kind](GraphBuilder& b, const ir::Node& node,
                      const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
    const int64_t rank = types[0]->rank();
    ASSIGN_OR_RETURN(const std::vector<int64_t> dims, WrappedDims(node, rank));
    std::map<std::string, ir::ArgValue> args = {{"dim", dims},
                                                {"normalization", Normalization(node)},
                                                {"kind", kind},
                                                {"forward", true},
                                                {"last_dim_size", int64_t{0}}};
    int operand = node.inputs[0];
    if (kind == kComplexToComplex) args["forward"] = BoolArg(node, "forward");
    if (kind == kRealToComplex && !BoolArg(node, "onesided")) {
      // Both halves: the transform of the real values as complex ones.
      ASSIGN_OR_RETURN(operand, AsPair(b, operand, *types[0], types[0]->dtype));
      args["kind"] = int64_t{kComplexToComplex};
    }
    if (kind == kComplexToReal) {
      const int64_t last = IntArg(node, "last_dim_size");
      args["forward"] = false;
      args["last_dim_size"] = last;
      const ir::Dim& size = types[0]->sizes[dims.back()];
      if (size.constant > last / 2 + 1) {
        ASSIGN_OR_RETURN(operand, b.Add("aten.slice.Tensor", {operand},
                                        {{"dim", dims.back()},
                                         {"start", int64_t{0}},
                                         {"end", last / 2 + 1},
                                         {"step", int64_t{1}}}));
      }
    }
    ASSIGN_OR_RETURN(const int result, b.Add("kiln.fft.default", {operand}, std::move(args)));
    return std::vector<int>{result};
  };
  return {infer, split};
}

}  // namespace

void AddFftRules(ComplexRules& rules) {
  rules["aten._fft_c2c.default"] = SpectralRule(kComplexToComplex);
  rules["aten._fft_r2c.default"] = SpectralRule(kRealToComplex);
  rules["aten._fft_c2r.default"] = SpectralRule(kComplexToReal);
}

void RegisterFftOps(OpTable& table, const AddComplexOp& add) {
  const ArgSpec dim{"dim", ArgKind::kIntList, std::nullopt};
  const ArgSpec normalization{"normalization", ArgKind::kInt, std::nullopt};
  const std::vector<DType> complex = {DType::kComplex64, DType::kComplex128};
  add("aten._fft_c2c.default", 1, {dim, normalization, {"forward", ArgKind::kBool, std::nullopt}},
      complex, "fft");
  add("aten._fft_r2c.default", 1, {dim, normalization, {"onesided", ArgKind::kBool, std::nullopt}},
      {DType::kFloat32, DType::kFloat64}, "fft");
  add("aten._fft_c2r.default", 1,
      {dim, normalization, {"last_dim_size", ArgKind::kInt, std::nullopt}}, complex, "fft");

  OpDef core;
  core.name = "kiln.fft.default";
  core.family = "fft";
  core.dtypes = {DType::kFloat32, DType::kFloat64};
  core.args = {dim,
               normalization,
               {"kind", ArgKind::kInt, std::nullopt},
               {"forward", ArgKind::kBool, std::nullopt},
               {"last_dim_size", ArgKind::kInt, std::nullopt}};
  core.infer = InferCore;
  core.lower = [](const ir::Graph&,
                  const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
    ir::Definition definition;
    definition.kind = ir::Definition::Kind::kExtern;
    definition.function = "fft";
    definition.operands = node.inputs;
    return std::vector<ir::Definition>{std::move(definition)};
  };
  table.Add(std::move(core));
}

}  // namespace kiln::ops
