// Complex values through shape ops, reductions and factories: the op on
// the pairs, its dims counted from the complex rank so the pair stays the
// last dim (complex.h).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/ops/complex_rules.h"
#include "common/status_macros.h"

namespace kiln::ops {
namespace {

using ir::DType;

// How a shape op's arguments change when it applies to pairs.
enum class Adjust {
  kNone,
  kDim,          // "dim" (or "dim0" and "dim1"), counted from the input's complex rank
  kOutputDim,    // "dim", counted from the result's rank (unsqueeze, stack)
  kDimList,      // "dim" or "dims", each counted from the complex rank; none: every dim
  kPermutation,  // "dims": the pair stays last
  kSizes,        // "size": the pair's 2 appended
};

absl::StatusOr<int64_t> Wrapped(const ir::ArgValue& value, int64_t rank) {
  ASSIGN_OR_RETURN(const int dim, WrapDim(std::get<int64_t>(value), rank));
  return int64_t{dim};
}

absl::StatusOr<std::map<std::string, ir::ArgValue>> AdjustArgs(const ir::Node& node, Adjust adjust,
                                                               int64_t rank) {
  std::map<std::string, ir::ArgValue> args = node.args;
  switch (adjust) {
    case Adjust::kNone:
      break;
    case Adjust::kDim:
    case Adjust::kOutputDim:
      for (const char* name : {"dim", "dim0", "dim1"}) {
        auto it = args.find(name);
        if (it == args.end() || !std::holds_alternative<int64_t>(it->second)) continue;
        ASSIGN_OR_RETURN(it->second, Wrapped(it->second, rank + (adjust == Adjust::kOutputDim)));
      }
      break;
    case Adjust::kDimList: {
      // flip's "dims", squeeze's and a reduction's "dim" (none or empty:
      // a reduction's every dim).
      const char* name = args.count("dims") ? "dims" : "dim";
      std::vector<int64_t> dims =
          name == std::string("dims") ? IntListArg(node, "dims") : DimsArg(node);
      if (dims.empty() && (node.op == "aten.sum.dim_IntList" || node.op == "aten.mean.dim")) {
        for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
      }
      for (int64_t& dim : dims) {
        ASSIGN_OR_RETURN(dim, Wrapped(ir::ArgValue(dim), std::max<int64_t>(rank, 1)));
      }
      args[name] = dims;
      break;
    }
    case Adjust::kPermutation: {
      std::vector<int64_t> dims = IntListArg(node, "dims");
      for (int64_t& dim : dims) {
        ASSIGN_OR_RETURN(const int wrapped, WrapDim(dim, rank));
        dim = wrapped;
      }
      dims.push_back(rank);
      args["dims"] = dims;
      break;
    }
    case Adjust::kSizes: {
      std::vector<ir::SymExpr> sizes = SizeListArg(node, "size");
      sizes.push_back(ir::SymExpr::Constant(2));
      args["size"] = sizes;
      break;
    }
  }
  return args;
}

ComplexRule ShapeRule(Adjust adjust) {
  return {InferOnParts,
          [adjust](GraphBuilder& b, const ir::Node& node,
                   const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
            ASSIGN_OR_RETURN(const DType part, ResultPart(node, types));
            ASSIGN_OR_RETURN(const std::vector<int> pairs, InputsAsPairs(b, node, types, part));
            const int64_t rank = types[0]->rank();
            if (adjust == Adjust::kDimList && rank == 0 && node.op != "aten.flip.default") {
              return One(b.Cast(pairs[0], part));  // a 0-dim value reduces to itself
            }
            ASSIGN_OR_RETURN(auto args, AdjustArgs(node, adjust, rank));
            return b.AddNode(node.op, pairs, std::move(args));
          }};
}

// sum.default / mean.default: the dim form over every complex dim.
ComplexRule FullReduction(std::string dim_op) {
  return {InferOnParts,
          [dim_op](GraphBuilder& b, const ir::Node& node,
                   const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
            std::vector<int64_t> dims;
            for (int64_t d = 0; d < types[0]->rank(); ++d) dims.push_back(d);
            if (dims.empty()) return One(b.Add("aten.clone.default", {node.inputs[0]}));
            std::map<std::string, ir::ArgValue> args = node.args;
            args["dim"] = dims;
            return b.AddNode(dim_op, {node.inputs[0]}, std::move(args));
          }};
}

// Factories (zeros, full, scalar_tensor, the _like and new_ forms) of a
// complex dtype: the real part as the factory makes it, the imaginary 0. A
// _like or new_ factory's tensor input stands for its real part.
ComplexRule Factory() {
  struct Real {
    ir::Node node;
    std::vector<ir::TensorType> inputs;
    bool complex;
  };
  // The node as a real factory, and whether its result is complex.
  auto as_real = [](const ir::Node& node, const InputTypes& inputs) {
    Real real{node, {}, false};
    auto dtype = real.node.args.find("dtype");
    const bool given =
        dtype != real.node.args.end() && std::holds_alternative<DType>(dtype->second);
    if (given) {
      real.complex = ir::IsComplex(std::get<DType>(dtype->second));
      dtype->second = ir::RealPart(std::get<DType>(dtype->second));
    }
    for (const ir::TensorType* input : inputs) {
      real.inputs.push_back(*input);
      real.inputs.back().dtype = ir::RealPart(input->dtype);
      if (!given && ir::IsComplex(input->dtype)) real.complex = true;
    }
    return real;
  };
  auto infer = [as_real](const ir::Node& node,
                         const InputTypes& inputs) -> absl::StatusOr<std::vector<ir::TensorType>> {
    const Real real = as_real(node, inputs);
    InputTypes real_inputs;
    for (const ir::TensorType& input : real.inputs) real_inputs.push_back(&input);
    ASSIGN_OR_RETURN(std::vector<ir::TensorType> results, InferAs(node.op, real.node, real_inputs));
    if (real.complex) {
      ASSIGN_OR_RETURN(results[0].dtype, ComplexOf(results[0].dtype));
    }
    return results;
  };
  auto split = [as_real](GraphBuilder& b, const ir::Node& node,
                         const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
    const Real real = as_real(node, types);
    std::vector<int> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int input = node.inputs[i];
      if (ir::IsComplex(types[i]->dtype)) {
        ASSIGN_OR_RETURN(const Parts z, Split(b, input));
        input = z.re;
      }
      inputs.push_back(input);
    }
    ASSIGN_OR_RETURN(const int re, b.Add(node.op, inputs, real.node.args));
    if (!real.complex) return One(re);
    ASSIGN_OR_RETURN(const int zeros, b.Add("aten.zeros_like.default", {re}));
    return One(Pair(b, re, zeros));
  };
  return {infer, split};
}

}  // namespace

void AddShapeRules(ComplexRules& rules) {
  ComplexRules& r = rules;
  r["aten.neg.default"] = ShapeRule(Adjust::kNone);
  for (const char* op : {"aten.clone.default", "aten.contiguous.default", "aten.alias.default",
                         "aten.detach.default", "aten.lift_fresh.default",
                         "aten.lift_fresh_copy.default", "aten.squeeze.default"}) {
    r[op] = ShapeRule(Adjust::kNone);
  }
  for (const char* op : {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
                         "aten.expand.default"}) {
    r[op] = ShapeRule(Adjust::kSizes);
  }
  r["aten.permute.default"] = ShapeRule(Adjust::kPermutation);
  r["aten.t.default"] = {InferOnParts,
                         [](GraphBuilder& b, const ir::Node& node,
                            const InputTypes& types) -> absl::StatusOr<std::vector<int>> {
                           if (types[0]->rank() < 2) return std::vector<int>{node.inputs[0]};
                           return b.AddNode("aten.transpose.int", {node.inputs[0]},
                                            {{"dim0", 0L}, {"dim1", 1L}});
                         }};
  for (const char* op :
       {"aten.scalar_tensor.default", "aten.zeros.default", "aten.ones.default",
        "aten.full.default", "aten.empty.memory_format", "aten.zeros_like.default",
        "aten.ones_like.default", "aten.full_like.default", "aten.empty_like.default",
        "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default",
        "aten.new_empty.default"}) {
    r[op] = Factory();
  }
  for (const char* op : {"aten.transpose.int", "aten.squeeze.dim", "aten.slice.Tensor",
                         "aten.select.int", "aten.split.Tensor", "aten.split_with_sizes.default",
                         "aten.unbind.int", "aten.cat.default"}) {
    r[op] = ShapeRule(Adjust::kDim);
  }
  r["aten.unsqueeze.default"] = ShapeRule(Adjust::kOutputDim);
  r["aten.stack.default"] = ShapeRule(Adjust::kOutputDim);
  for (const char* op :
       {"aten.squeeze.dims", "aten.flip.default", "aten.sum.dim_IntList", "aten.mean.dim"}) {
    r[op] = ShapeRule(Adjust::kDimList);
  }
  r["aten.sum.default"] = FullReduction("aten.sum.dim_IntList");
  r["aten.mean.default"] = FullReduction("aten.mean.dim");
}

}  // namespace kiln::ops
