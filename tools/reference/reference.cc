#include "tools/reference/reference.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "codegen/ops/op_table.h"

namespace kiln {
namespace {

int64_t Count(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Multi-index of flat position `flat` in `sizes`.
std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return index;
}

// Value of `t` at `index` of a broadcast result of rank index.size().
double At(const RefTensor& t, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  const size_t offset = index.size() - t.sizes.size();
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    const int64_t i = t.sizes[d] == 1 ? 0 : index[offset + d];
    flat = flat * t.sizes[d] + i;
  }
  return t.values[flat];
}

RefTensor Permute(const RefTensor& t, const std::vector<int>& perm) {
  RefTensor result;
  for (int p : perm) result.sizes.push_back(t.sizes[p]);
  result.values.resize(t.values.size());
  for (int64_t flat = 0; flat < Count(result.sizes); ++flat) {
    const std::vector<int64_t> index = Unflatten(flat, result.sizes);
    std::vector<int64_t> source(index.size());
    for (size_t d = 0; d < perm.size(); ++d) source[perm[d]] = index[d];
    result.values[flat] = At(t, source);
  }
  return result;
}

double Apply(const std::string& op, double a, double b) {
  if (op == "aten.add.Tensor") return a + b;
  if (op == "aten.sub.Tensor") return a - b;
  if (op == "aten.mul.Tensor") return a * b;
  return a / b;  // aten.div.Tensor
}

}  // namespace

absl::StatusOr<std::vector<RefTensor>> EvaluateReference(const ir::Graph& graph,
                                                         const std::vector<RefTensor>& inputs) {
  std::vector<RefTensor> values(graph.values.size());
  for (size_t i = 0; i < graph.inputs.size(); ++i) values[graph.inputs[i]] = inputs[i];
  for (const ir::Node& node : graph.nodes) {
    const RefTensor& x = values[node.inputs[0]];
    RefTensor& out = values[node.outputs[0]];
    for (const ir::Dim& dim : graph.values[node.outputs[0]].sizes)
      out.sizes.push_back(dim.constant);
    out.values.assign(Count(out.sizes), 0);
    const std::string& op = node.op;
    if (op == "aten.mm.default") {
      const RefTensor& y = values[node.inputs[1]];
      const int64_t m = x.sizes[0], k = x.sizes[1], n = y.sizes[1];
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) sum += x.values[i * k + p] * y.values[p * n + j];
          out.values[i * n + j] = sum;
        }
    } else if (op == "aten.permute.default" || op == "aten.t.default" ||
               op == "aten.transpose.int") {
      const int rank = static_cast<int>(x.sizes.size());
      std::vector<int> perm(rank);
      for (int d = 0; d < rank; ++d) perm[d] = d;
      if (op == "aten.permute.default") {
        const auto dims = std::get<std::vector<int64_t>>(node.args.at("dims"));
        for (int d = 0; d < rank; ++d) perm[d] = static_cast<int>((dims[d] + rank) % rank);
      } else if (op == "aten.t.default") {
        if (rank == 2) std::swap(perm[0], perm[1]);
      } else {
        const int a = static_cast<int>((std::get<int64_t>(node.args.at("dim0")) + rank) % rank);
        const int b = static_cast<int>((std::get<int64_t>(node.args.at("dim1")) + rank) % rank);
        std::swap(perm[a], perm[b]);
      }
      out = Permute(x, perm);
    } else if (op == "aten.relu.default") {
      for (size_t i = 0; i < x.values.size(); ++i) {
        out.values[i] = std::isnan(x.values[i]) ? x.values[i] : (x.values[i] < 0 ? 0 : x.values[i]);
      }
    } else if (op == "aten.add.Tensor" || op == "aten.sub.Tensor" || op == "aten.mul.Tensor" ||
               op == "aten.div.Tensor") {
      const bool scalar = node.inputs.size() == 1;
      const double other = scalar ? ops::ScalarArgAsDouble(node, "other") : 0;
      const double alpha = node.args.count("alpha") ? ops::ScalarArgAsDouble(node, "alpha") : 1;
      for (int64_t flat = 0; flat < Count(out.sizes); ++flat) {
        const std::vector<int64_t> index = Unflatten(flat, out.sizes);
        const double b = scalar ? other : At(values[node.inputs[1]], index);
        out.values[flat] = Apply(op, At(x, index), alpha == 1 ? b : alpha * b);
      }
    } else {
      return absl::UnimplementedError(absl::StrCat("the reference has no ", op));
    }
  }
  std::vector<RefTensor> outputs;
  for (int output : graph.outputs) outputs.push_back(values[output]);
  return outputs;
}

}  // namespace kiln
