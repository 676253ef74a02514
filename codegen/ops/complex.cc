// Complex values as real pairs (complex.h): the rule table, arithmetic and
// functions, conversions, and the ops only complex values have. Arithmetic
// is written out on the parts (a product is four real products and two
// sums, as eager's vectorized kernels compute it). Shape ops, reductions
// and factories: complex_shapes.cc; FFTs: fft.cc.
#include "codegen/ops/complex.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ops/complex_rules.h"
#include "codegen/ops/pointwise_util.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

absl::StatusOr<int> Square(GraphBuilder& b, int x) { return b.Add("aten.mul.Tensor", {x, x}); }

// re * re + im * im
absl::StatusOr<int> Norm(GraphBuilder& b, const Parts& z) {
  ASSIGN_OR_RETURN(const int re2, Square(b, z.re));
  ASSIGN_OR_RETURN(const int im2, Square(b, z.im));
  return b.Add("aten.add.Tensor", {re2, im2});
}

absl::StatusOr<int> Abs(GraphBuilder& b, const Parts& z) {
  ASSIGN_OR_RETURN(const int norm, Norm(b, z));
  return b.Add("aten.sqrt.default", {norm});
}

// x * y + sign * (u * v)
absl::StatusOr<int> ProductSum(GraphBuilder& b, int x, int y, int u, int v, bool subtract) {
  ASSIGN_OR_RETURN(const int xy, b.Add("aten.mul.Tensor", {x, y}));
  ASSIGN_OR_RETURN(const int uv, b.Add("aten.mul.Tensor", {u, v}));
  return b.Add(subtract ? "aten.sub.Tensor" : "aten.add.Tensor", {xy, uv});
}

absl::StatusOr<int> Multiply(GraphBuilder& b, const Parts& x, const Parts& y) {
  ASSIGN_OR_RETURN(const int re, ProductSum(b, x.re, y.re, x.im, y.im, /*subtract=*/true));
  ASSIGN_OR_RETURN(const int im, ProductSum(b, x.re, y.im, x.im, y.re, /*subtract=*/false));
  return Pair(b, re, im);
}

absl::StatusOr<int> Divide(GraphBuilder& b, const Parts& x, const Parts& y) {
  ASSIGN_OR_RETURN(const int norm, Norm(b, y));
  ASSIGN_OR_RETURN(const int re, ProductSum(b, x.re, y.re, x.im, y.im, /*subtract=*/false));
  ASSIGN_OR_RETURN(const int im, ProductSum(b, x.im, y.re, x.re, y.im, /*subtract=*/true));
  ASSIGN_OR_RETURN(const int re_over, b.Add("aten.div.Tensor", {re, norm}));
  ASSIGN_OR_RETURN(const int im_over, b.Add("aten.div.Tensor", {im, norm}));
  return Pair(b, re_over, im_over);
}

// add, sub, mul, div: with a Python scalar, or with a real tensor (which
// scales both parts of a product or quotient), or of two complex values.
absl::StatusOr<std::vector<int>> Arithmetic(GraphBuilder& b, const ir::Node& node,
                                            const InputTypes& types) {
  ASSIGN_OR_RETURN(const DType part, ResultPart(node, types));
  const bool additive = node.op == "aten.add.Tensor" || node.op == "aten.sub.Tensor";
  if (node.inputs.size() == 1) {
    ASSIGN_OR_RETURN(const int pair, b.Cast(node.inputs[0], part));
    if (!additive) return One(b.Add(node.op, {pair}, node.args));
    ASSIGN_OR_RETURN(const Parts z, Split(b, pair));
    ASSIGN_OR_RETURN(const int re, b.Add(node.op, {z.re}, node.args));
    return One(Pair(b, re, z.im));
  }
  ASSIGN_OR_RETURN(const std::vector<int> pairs, InputsAsPairs(b, node, types, part));
  if (additive) return b.AddNode(node.op, pairs, node.args);
  const bool divide = node.op == "aten.div.Tensor";
  // A real factor scales both parts: one product per part, as eager.
  for (int k = divide ? 1 : 0; k < 2; ++k) {
    if (ir::IsComplex(types[k]->dtype)) continue;
    ASSIGN_OR_RETURN(const int real, b.Cast(node.inputs[k], part));
    ASSIGN_OR_RETURN(const int column, b.Add("aten.unsqueeze.default", {real}, {{"dim", -1L}}));
    return One(b.Add(node.op, {pairs[1 - k], column}));
  }
  ASSIGN_OR_RETURN(const Parts x, Split(b, pairs[0]));
  ASSIGN_OR_RETURN(const Parts y, Split(b, pairs[1]));
  return One(divide ? Divide(b, x, y) : Multiply(b, x, y));
}

// A function of one complex value: `fn` on its parts.
using PartsFunction = std::function<absl::StatusOr<int>(GraphBuilder&, const Parts&, int pair)>;

ComplexRule Unary(PartsFunction fn, bool real_result = false) {
  auto infer = [real_result](
                   const ir::Node& node,
                   const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    if (!ir::IsComplex(inputs[0]->dtype)) {
      return absl::UnimplementedError(
          absl::StrCat(ir::DTypeName(inputs[0]->dtype), " inputs are not supported yet"));
    }
    ir::TensorType type = ContiguousType(inputs[0]->dtype, inputs[0]->sizes);
    if (real_result) type.dtype = ir::RealPart(type.dtype);
    return std::vector<ir::TensorType>{type};
  };
  return {infer,
          [fn](GraphBuilder& b, const ir::Node& node,
               const InputTypes&) -> absl::StatusOr<std::vector<int>> {
            ASSIGN_OR_RETURN(const Parts z, Split(b, node.inputs[0]));
            return One(fn(b, z, node.inputs[0]));
          }};
}

absl::StatusOr<int> Conjugate(GraphBuilder& b, const Parts& z, int) {
  ASSIGN_OR_RETURN(const int minus, b.Add("aten.neg.default", {z.im}));
  return Pair(b, z.re, minus);
}

absl::StatusOr<int> Exp(GraphBuilder& b, const Parts& z, int) {
  ASSIGN_OR_RETURN(const int scale, b.Add("aten.exp.default", {z.re}));
  ASSIGN_OR_RETURN(const int cos, b.Add("aten.cos.default", {z.im}));
  ASSIGN_OR_RETURN(const int sin, b.Add("aten.sin.default", {z.im}));
  ASSIGN_OR_RETURN(const int re, b.Add("aten.mul.Tensor", {scale, cos}));
  ASSIGN_OR_RETURN(const int im, b.Add("aten.mul.Tensor", {scale, sin}));
  return Pair(b, re, im);
}

absl::StatusOr<int> Log(GraphBuilder& b, const Parts& z, int) {
  ASSIGN_OR_RETURN(const int abs, Abs(b, z));
  ASSIGN_OR_RETURN(const int re, b.Add("aten.log.default", {abs}));
  ASSIGN_OR_RETURN(const int im, b.Add("aten.atan2.default", {z.im, z.re}));
  return Pair(b, re, im);
}

// The principal root without cancellation: t = sqrt((|z| + |re|) / 2) is
// the larger part; the other is im / 2t (0 at z = 0).
absl::StatusOr<int> Sqrt(GraphBuilder& b, const Parts& z, int) {
  ASSIGN_OR_RETURN(const int abs, Abs(b, z));
  ASSIGN_OR_RETURN(const int abs_re, b.Add("aten.abs.default", {z.re}));
  ASSIGN_OR_RETURN(const int sum, b.Add("aten.add.Tensor", {abs, abs_re}));
  ASSIGN_OR_RETURN(const int half, b.Add("aten.mul.Tensor", {sum}, {{"other", 0.5}}));
  ASSIGN_OR_RETURN(const int t, b.Add("aten.sqrt.default", {half}));
  ASSIGN_OR_RETURN(const int twice, b.Add("aten.mul.Tensor", {t}, {{"other", 2.0}}));
  ASSIGN_OR_RETURN(const int quotient, b.Add("aten.div.Tensor", {z.im, twice}));
  ASSIGN_OR_RETURN(const int zero, b.Add("aten.le.Scalar", {t}, {{"other", 0.0}}));
  ASSIGN_OR_RETURN(const int q, b.Add("aten.where.self", {zero, z.im, quotient}));
  ASSIGN_OR_RETURN(const int abs_q, b.Add("aten.abs.default", {q}));
  ASSIGN_OR_RETURN(const int minus_t, b.Add("aten.neg.default", {t}));
  ASSIGN_OR_RETURN(const int below, b.Add("aten.lt.Scalar", {z.im}, {{"other", 0.0}}));
  ASSIGN_OR_RETURN(const int signed_t, b.Add("aten.where.self", {below, minus_t, t}));
  ASSIGN_OR_RETURN(const int right, b.Add("aten.ge.Scalar", {z.re}, {{"other", 0.0}}));
  ASSIGN_OR_RETURN(const int re, b.Add("aten.where.self", {right, t, abs_q}));
  ASSIGN_OR_RETURN(const int im, b.Add("aten.where.self", {right, q, signed_t}));
  return Pair(b, re, im);
}

absl::StatusOr<int> Reciprocal(GraphBuilder& b, const Parts& z, int) {
  ASSIGN_OR_RETURN(const int norm, Norm(b, z));
  ASSIGN_OR_RETURN(const int re, b.Add("aten.div.Tensor", {z.re, norm}));
  ASSIGN_OR_RETURN(const int minus, b.Add("aten.neg.default", {z.im}));
  ASSIGN_OR_RETURN(const int im, b.Add("aten.div.Tensor", {minus, norm}));
  return Pair(b, re, im);
}

// view_as_complex, complex and polar: a complex result of real inputs.
absl::StatusOr<std::vector<ir::TensorType>> InferFromReal(const ir::Node& node,
                                                          const InputTypes& inputs) {
  for (const ir::TensorType* input : inputs) {
    if (input->dtype != DType::kFloat32 && input->dtype != DType::kFloat64) {
      return absl::InvalidArgumentError(
          absl::StrCat("expects float32 or float64 inputs, got ", ir::DTypeName(input->dtype)));
    }
    if (input->dtype != inputs[0]->dtype) {
      return absl::InvalidArgumentError(absl::StrCat("expects inputs of one dtype, got ",
                                                     ir::DTypeName(inputs[0]->dtype), " and ",
                                                     ir::DTypeName(input->dtype)));
    }
  }
  ASSIGN_OR_RETURN(const DType complex, ComplexOf(inputs[0]->dtype));
  std::vector<ir::Dim> sizes = inputs[0]->sizes;
  if (node.op == "aten.view_as_complex.default") {
    if (sizes.empty() || sizes.back() != ir::Dim::Constant(2)) {
      return absl::InvalidArgumentError("expects a last dim of size 2 (real, imaginary)");
    }
    sizes.pop_back();
  } else {
    ASSIGN_OR_RETURN(sizes, BroadcastShapes(inputs[0]->sizes, inputs[1]->sizes));
  }
  return std::vector<ir::TensorType>{ContiguousType(complex, std::move(sizes))};
}

absl::StatusOr<std::vector<int>> Complex(GraphBuilder& b, const ir::Node& node, const InputTypes&) {
  ASSIGN_OR_RETURN(const std::vector<ir::Dim> sizes,
                   BroadcastShapes(b.type(node.inputs[0]).sizes, b.type(node.inputs[1]).sizes));
  std::vector<ir::SymExpr> size;
  for (const ir::Dim& dim : sizes) size.push_back(ir::SymExpr::Of(dim));
  std::vector<int> parts;
  for (int input : node.inputs) {
    ASSIGN_OR_RETURN(const int expanded, b.Add("aten.expand.default", {input}, {{"size", size}}));
    parts.push_back(expanded);
  }
  return One(Pair(b, parts[0], parts[1]));
}

absl::StatusOr<std::vector<int>> Polar(GraphBuilder& b, const ir::Node& node, const InputTypes&) {
  const int abs = node.inputs[0], angle = node.inputs[1];
  ASSIGN_OR_RETURN(const int cos, b.Add("aten.cos.default", {angle}));
  ASSIGN_OR_RETURN(const int sin, b.Add("aten.sin.default", {angle}));
  ASSIGN_OR_RETURN(const int re, b.Add("aten.mul.Tensor", {abs, cos}));
  ASSIGN_OR_RETURN(const int im, b.Add("aten.mul.Tensor", {abs, sin}));
  return One(Pair(b, re, im));
}

// _to_copy to, from or between complex dtypes. A complex value converts to
// a real one by its real part, as torch's; to bool torch tests both parts.
ComplexRule ToCopy() {
  auto infer = [](const ir::Node& node,
                  const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const DType to = DTypeArg(node, inputs[0]->dtype);
    if (ir::IsComplex(inputs[0]->dtype) && !ir::IsComplex(to) && !ir::IsFloatingPoint(to)) {
      return absl::UnimplementedError(absl::StrCat("converting complex values to ",
                                                   ir::DTypeName(to), " is not supported yet"));
    }
    return std::vector<ir::TensorType>{ContiguousType(to, inputs[0]->sizes)};
  };
  return {infer,
          [](GraphBuilder& b, const ir::Node& node,
             const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
            const DType to = DTypeArg(node, types[0]->dtype);
            if (ir::IsComplex(to)) {
              return One(AsPair(b, node.inputs[0], *types[0], ir::RealPart(to)));
            }
            ASSIGN_OR_RETURN(const Parts z, Split(b, node.inputs[0]));
            return One(b.Cast(z.re, to));
          }};
}

}  // namespace

absl::StatusOr<std::vector<ir::TensorType>> InferAs(const std::string& op, const ir::Node& node,
                                                    const InputTypes& inputs) {
  const OpDef* def = OpTable::Get().Find(op);
  if (def == nullptr) return absl::InternalError(absl::StrCat("no op ", op));
  return def->infer(node, inputs);
}

// The op's own type rule on the inputs' part types; a floating result of
// an op with a complex input is complex (complex64 * float64 is
// complex128, as torch promotes).
absl::StatusOr<std::vector<ir::TensorType>> InferOnParts(const ir::Node& node,
                                                         const InputTypes& inputs) {
  std::vector<ir::TensorType> parts;
  parts.reserve(inputs.size());
  InputTypes part_inputs;
  bool complex = false;
  for (const ir::TensorType* input : inputs) {
    complex |= ir::IsComplex(input->dtype);
    parts.push_back(*input);
    parts.back().dtype = ir::RealPart(input->dtype);
    part_inputs.push_back(&parts.back());
  }
  ASSIGN_OR_RETURN(std::vector<ir::TensorType> results, InferAs(node.op, node, part_inputs));
  if (!complex) return results;
  for (ir::TensorType& result : results) {
    if (ir::IsFloatingPoint(result.dtype)) {
      ASSIGN_OR_RETURN(result.dtype, ComplexOf(result.dtype));
    }
  }
  return results;
}

// The one result of `node` when it computes on pairs of `types`' promoted
// part type.
absl::StatusOr<DType> ResultPart(const ir::Node& node, const InputTypes& types) {
  ASSIGN_OR_RETURN(const std::vector<ir::TensorType> results, InferOnParts(node, types));
  return ir::RealPart(results[0].dtype);
}

// Every tensor input as pairs of the result's part type.
absl::StatusOr<std::vector<int>> InputsAsPairs(GraphBuilder& b, const ir::Node& node,
                                               const InputTypes& types, DType part) {
  std::vector<int> pairs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(const int pair, AsPair(b, node.inputs[i], *types[i], part));
    pairs.push_back(pair);
  }
  return pairs;
}

absl::StatusOr<DType> ComplexOf(DType part) {
  if (part == DType::kFloat32) return DType::kComplex64;
  if (part == DType::kFloat64) return DType::kComplex128;
  return absl::UnimplementedError(
      absl::StrCat("complex values of ", ir::DTypeName(part), " parts are not supported"));
}

absl::StatusOr<int> Pair(GraphBuilder& b, int re, int im) {
  return b.Add("aten.stack.default", {re, im}, {{"dim", -1L}});
}

absl::StatusOr<Parts> Split(GraphBuilder& b, int pair) {
  Parts parts;
  ASSIGN_OR_RETURN(parts.re, b.Add("aten.select.int", {pair}, {{"dim", -1L}, {"index", 0L}}));
  ASSIGN_OR_RETURN(parts.im, b.Add("aten.select.int", {pair}, {{"dim", -1L}, {"index", 1L}}));
  return parts;
}

absl::StatusOr<int> AsPair(GraphBuilder& b, int value, const ir::TensorType& type, DType part) {
  ASSIGN_OR_RETURN(const int cast, b.Cast(value, part));
  if (ir::IsComplex(type.dtype)) return cast;
  ASSIGN_OR_RETURN(const int zeros, b.Add("aten.zeros_like.default", {cast}));
  return Pair(b, cast, zeros);
}

ir::TensorType PairType(const ir::TensorType& type) {
  if (!ir::IsComplex(type.dtype)) return type;
  ir::TensorType pair = type;
  pair.dtype = ir::RealPart(type.dtype);
  pair.sizes.push_back(ir::Dim::Constant(2));
  for (ir::SymExpr& stride : pair.strides) stride = stride * 2;
  pair.strides.push_back(ir::SymExpr::Constant(1));
  return pair;
}

bool TouchesComplex(const ir::Graph& graph, int index) {
  const ir::Node& node = graph.nodes[index];
  for (int value : node.inputs) {
    if (ir::IsComplex(graph.values[value].dtype)) return true;
  }
  for (int value : node.outputs) {
    if (ir::IsComplex(graph.values[value].dtype)) return true;
  }
  return false;
}

const ComplexRule* FindComplexRule(absl::string_view op) {
  static const ComplexRules* const rules = [] {
    auto* built = new ComplexRules();
    ComplexRules& r = *built;
    for (const char* op :
         {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor"}) {
      r[op] = {InferOnParts, Arithmetic};
    }
    AddShapeRules(r);
    r["aten.where.self"] = {
        InferOnParts,
        [](GraphBuilder& b, const ir::Node& node,
           const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
          ASSIGN_OR_RETURN(const DType part, ResultPart(node, types));
          ASSIGN_OR_RETURN(const int condition,
                           b.Add("aten.unsqueeze.default", {node.inputs[0]}, {{"dim", -1L}}));
          ASSIGN_OR_RETURN(const int x, AsPair(b, node.inputs[1], *types[1], part));
          ASSIGN_OR_RETURN(const int y, AsPair(b, node.inputs[2], *types[2], part));
          return One(b.Add("aten.where.self", {condition, x, y}));
        }};
    for (const char* op : {"aten._conj_physical.default", "aten._conj.default"}) {
      r[op] = Unary(Conjugate);
    }
    r["aten.exp.default"] = Unary(Exp);
    r["aten.log.default"] = Unary(Log);
    r["aten.sqrt.default"] = Unary(Sqrt);
    r["aten.reciprocal.default"] = Unary(Reciprocal);
    r["aten.abs.default"] = Unary([](GraphBuilder& b, const Parts& z, int) { return Abs(b, z); },
                                  /*real_result=*/true);
    r["aten.angle.default"] = Unary([](GraphBuilder& b, const Parts& z,
                                       int) { return b.Add("aten.atan2.default", {z.im, z.re}); },
                                    /*real_result=*/true);
    r["aten.view_as_real.default"] =
        Unary([](GraphBuilder&, const Parts&, int pair) -> absl::StatusOr<int> { return pair; });
    r["aten.view_as_real.default"].infer =
        [](const ir::Node&,
           const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
      if (!ir::IsComplex(inputs[0]->dtype)) {
        return absl::InvalidArgumentError("expects a complex input");
      }
      return std::vector<ir::TensorType>{
          ContiguousType(ir::RealPart(inputs[0]->dtype), PairType(*inputs[0]).sizes)};
    };
    auto identity = [](GraphBuilder&, const ir::Node& node,
                       const InputTypes&) -> absl::StatusOr<std::vector<int>> {
      return std::vector<int>{node.inputs[0]};
    };
    r["aten.view_as_complex.default"] = {InferFromReal, identity};
    r["aten.complex.default"] = {InferFromReal, Complex};
    r["aten.polar.default"] = {InferFromReal, Polar};
    r["aten._to_copy.default"] = ToCopy();
    AddFftRules(r);
    AddEigRules(r);
    return built;
  }();
  auto it = rules->find(op);
  return it == rules->end() ? nullptr : &it->second;
}

void RegisterComplexOps(OpTable& table) {
  // The ops that only complex values have: their schemas, so the verifier
  // finds them; their rules say the rest (FindComplexRule).
  auto add = [&](const std::string& name, int inputs, std::vector<ArgSpec> args,
                 std::vector<DType> dtypes, const std::string& family) {
    OpDef def;
    def.name = name;
    def.family = family;
    def.min_inputs = def.max_inputs = inputs;
    def.args = std::move(args);
    def.dtypes = std::move(dtypes);
    def.infer = [name](const ir::Node& node, const InputTypes& inputs) {
      return FindComplexRule(name)->infer(node, inputs);
    };
    def.lower = [](const ir::Graph&,
                   const ir::Node& node) -> absl::StatusOr<std::vector<ir::Definition>> {
      return absl::InternalError(absl::StrCat(node.op, " lowered before its complex split"));
    };
    table.Add(std::move(def));
  };
  const std::vector<DType> complex = {DType::kComplex64, DType::kComplex128};
  // (make_fx writes x.real as view_as_real and select, x.conj() as _conj.)
  for (const char* op :
       {"aten._conj_physical.default", "aten._conj.default", "aten.view_as_real.default"}) {
    add(op, 1, {}, complex, "complex");
  }
  const std::vector<DType> real = {DType::kFloat32, DType::kFloat64};
  add("aten.view_as_complex.default", 1, {}, real, "complex");
  add("aten.complex.default", 2, {}, real, "complex");
  add("aten.polar.default", 2, {}, real, "complex");
  RegisterFftOps(table, add);

  // angle of a real value: 0, or pi below 0 (NaN stays NaN), as eager.
  OpDef angle;
  angle.name = "aten.angle.default";
  angle.family = "complex";
  angle.dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kComplex64,
                  DType::kComplex128};
  angle.infer = [](const ir::Node& node,
                   const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    if (ir::IsComplex(inputs[0]->dtype)) return FindComplexRule(node.op)->infer(node, inputs);
    RETURN_IF_ERROR(CheckDTypes(inputs, {DType::kFloat32, DType::kFloat64, DType::kInt64}, {}));
    return std::vector<ir::TensorType>{
        ContiguousType(ToFloating(inputs[0]->dtype), inputs[0]->sizes)};
  };
  angle.decompose = [](GraphBuilder& b, const ir::Node& node) -> absl::StatusOr<std::vector<int>> {
    ASSIGN_OR_RETURN(const int x, b.Cast(node.inputs[0], ToFloating(b.type(node.inputs[0]).dtype)));
    ASSIGN_OR_RETURN(const int negative, b.Add("aten.lt.Scalar", {x}, {{"other", 0.0}}));
    ASSIGN_OR_RETURN(const int pi, b.Add("aten.full_like.default", {x}, {{"fill_value", M_PI}}));
    ASSIGN_OR_RETURN(const int zero, b.Add("aten.zeros_like.default", {x}));
    ASSIGN_OR_RETURN(const int angle, b.Add("aten.where.self", {negative, pi, zero}));
    ASSIGN_OR_RETURN(const int nan, b.Add("aten.ne.Tensor", {x, x}));
    ASSIGN_OR_RETURN(const int result, b.Add("aten.where.self", {nan, x, angle}));
    return std::vector<int>{result};
  };
  table.Add(std::move(angle));
}

}  // namespace kiln::ops
