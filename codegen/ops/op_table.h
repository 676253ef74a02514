// The op table: every ATen op Kiln compiles, with its schema, its type rule
// and its lowering into the loop IR. Adding an op is one entry in the file of
// its family (pointwise.cc, activations.cc, views.cc, gemm.cc, convolution.cc,
// pooling.cc, lookups.cc, ...); nothing else changes.
#ifndef KILN_CODEGEN_OPS_OP_TABLE_H_
#define KILN_CODEGEN_OPS_OP_TABLE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/ir.h"
#include "codegen/loop_ir.h"

namespace kiln {
class GraphBuilder;
}  // namespace kiln

namespace kiln::ops {

enum class ArgKind {
  kInt,
  kFloat,
  kScalar,  // int, float or bool: keeps its type (add(t, 1) != add(t, 1.0))
  kBool,
  kIntList,
  // Sizes: an int list, or a list of symbolic expressions (a traced view
  // of a symbolic dim: [8, S, 32]).
  kSizeList,
  // One size: an int or a symbolic expression.
  kSize,
  // A kScalar or a symbolic size (the count a mean's backward divides by).
  kScalarOrSize,
  kBoolList,
  kDType,
  kString,
  // An optional tensor parameter: present tensors are the node's inputs (in
  // schema order); an absent one is stated as this argument with `none`.
  // Defaults to True ("present").
  kOptionalTensor,
};

struct ArgSpec {
  std::string name;
  ArgKind kind;
  // Filled in when the argument is absent; std::nullopt means required.
  std::optional<ir::ArgValue> default_value;
};

using InputTypes = std::vector<const ir::TensorType*>;

struct OpDef {
  std::string name;  // "aten.add.Tensor"
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<ArgSpec> args;
  // The result types implied by the inputs and arguments (arguments already
  // checked against `args` and defaults filled in). Errors are
  // InvalidArgument; the verifier prefixes the node.
  std::function<absl::StatusOr<std::vector<ir::TensorType>>(const ir::Node&, const InputTypes&)>
      infer;
  // Exactly one of `lower` and `decompose`:
  // a core op lowers to one Definition per result;
  std::function<absl::StatusOr<std::vector<ir::Definition>>(const ir::Graph&, const ir::Node&)>
      lower;
  // a composite op rewrites itself into other ops (passes/decompose.h) and
  // returns the values that replace its results.
  std::function<absl::StatusOr<std::vector<int>>(GraphBuilder&, const ir::Node&)> decompose;
  // Optional: checks what `infer` cannot see, the graph's symbol bounds,
  // for an argument that must stay in range (a slice to a symbolic
  // length). The verifier calls it after `infer`.
  std::function<absl::Status(const ir::Graph&, const ir::Node&, const InputTypes&)> check_bounds;
  // "pointwise", "view", "gemm", ...: docs/OPS.md groups by it, and passes
  // rely on it: a "pointwise" op computes each element from the same
  // element of its broadcast operands (passes/transpose_linear.h).
  std::string family;
  std::vector<ir::DType> dtypes;  // dtypes lowering supports
  // Kept though nothing reads its results: it can stop the run with an
  // error (_linalg_check_errors). Canonicalize keeps it as it keeps the
  // graph's outputs.
  bool effect = false;
};

class OpTable {
 public:
  // The process-wide table, built on first use. Thread-safe.
  static const OpTable& Get();

  const OpDef* Find(absl::string_view name) const;
  const std::map<std::string, OpDef, std::less<>>& ops() const { return ops_; }

  void Add(OpDef op);

 private:
  std::map<std::string, OpDef, std::less<>> ops_;
};

// Registration, one function per family (called by OpTable::Get).
void RegisterPointwiseOps(OpTable& table);
void RegisterActivationOps(OpTable& table);
void RegisterViewOps(OpTable& table);
void RegisterGemmOps(OpTable& table);
void RegisterConvolutionOps(OpTable& table);
void RegisterReductionOps(OpTable& table);
void RegisterCreationOps(OpTable& table);
void RegisterCompositeOps(OpTable& table);
void RegisterRearrangeOps(OpTable& table);  // rearrange.cc: cat, stack, repeat, pixel_shuffle
void RegisterPoolingOps(OpTable& table);
void RegisterNormalizationOps(OpTable& table);
void RegisterLookupOps(OpTable& table);
void RegisterComplexOps(OpTable& table);  // complex.cc, fft.cc
void RegisterWriteOps(OpTable& table);    // writes.cc: index_copy, scatter
void RegisterSpecialOps(OpTable& table);
void RegisterLinalgOps(OpTable& table);
void RegisterQrOps(OpTable& table);           // qr.cc: QR, geqrf, ormqr, householder_product
void RegisterLstsqOps(OpTable& table);        // lstsq.cc
void RegisterMatrixExpOps(OpTable& table);    // matrix_exp.cc
void RegisterLdlOps(OpTable& table);          // ldl.cc
void RegisterEigOps(OpTable& table);          // eig.cc
void RegisterSpectralOps(OpTable& table);     // svd.cc: SVD, eigh
void RegisterLinalgCheckOps(OpTable& table);  // linalg_check.cc
void RegisterScatterOps(OpTable& table);      // scatter_reduce.cc
void RegisterSortingOps(OpTable& table);
void RegisterIntegerOps(OpTable& table);
void RegisterIeeeOps(OpTable& table);
void RegisterAttentionOps(OpTable& table);  // attention.cc
void RegisterRandomOps(OpTable& table);     // random.cc: torch's CPU generator
// index_check.cc: kiln.check_index, a lookup's bounds check.
void RegisterIndexCheckOps(OpTable& table);
// fractional_max_pool.cc
void RegisterFractionalMaxPoolOps(OpTable& table);
// check.cc
void RegisterCheckOps(OpTable& table);

// Helpers shared by the families.
// A type's sizes for an error message: "[2, s0]".
std::string Shape(const ir::TensorType& type);
const ir::ArgValue& Arg(const ir::Node& node, const std::string& name);
// Whether the node has argument `name` and it is not None.
bool Present(const ir::Node& node, const std::string& name);
int64_t IntArg(const ir::Node& node, const std::string& name);
double ScalarArgAsDouble(const ir::Node& node, const std::string& name);
std::vector<int64_t> IntListArg(const ir::Node& node, const std::string& name);
// A kSizeList argument, ints as constants (-1 stays -1).
std::vector<ir::SymExpr> SizeListArg(const ir::Node& node, const std::string& name);
// A kSize argument.
ir::SymExpr SizeArg(const ir::Node& node, const std::string& name);
// Argument `name` if it is a bool, else false (absent or None).
bool BoolArg(const ir::Node& node, const std::string& name);
// The `dtype` argument if given, else `fallback`.
ir::DType DTypeArg(const ir::Node& node, ir::DType fallback);
// The `dim` argument as a list: an int is one dim; absent or None is none.
std::vector<int64_t> DimsArg(const ir::Node& node);
// Wraps a possibly negative dim into [0, rank); InvalidArgument if out of range.
absl::StatusOr<int> WrapDim(int64_t dim, int64_t rank);
// Checks `node`'s arguments against `op`'s schema (known names, kinds,
// required ones present, an input for each present optional tensor) and
// returns a copy with defaults filled in, so that
// `add(t, 1)` with and without `alpha=1` are the same node.
absl::StatusOr<ir::Node> WithDefaults(const ir::Node& node, const OpDef& op);
absl::Status RequireStatic(const ir::TensorType& type, absl::string_view what);

// Every input dtype is in `dtypes`: one in `refused` (what eager refuses too,
// like argmax of bool) is InvalidArgument, any other outside `dtypes`
// Unimplemented.
absl::Status CheckDTypes(const InputTypes& inputs, const std::vector<ir::DType>& dtypes,
                         const std::vector<ir::DType>& refused);

// How many elements `dims` of `type` hold (1 for none, and for a 0-dim
// tensor, whose one dim a reduction names as 0).
ir::SymExpr ElementCount(const ir::TensorType& type, const std::vector<int64_t>& dims);
// `op` (aten.div.Tensor or aten.mul.Tensor) of x by a count: a literal when
// the count is constant, else the count's value at run time (kiln.size).
absl::StatusOr<int> ByCount(GraphBuilder& b, const char* op, int x, const ir::SymExpr& count);

using Decomposition =
    std::function<absl::StatusOr<std::vector<int>>(GraphBuilder&, const ir::Node&)>;
// Registers a composite: `decompose` rewrites it into other ops, and its
// result types are those of the decomposition, built on a scratch graph.
// Input dtypes are checked with CheckDTypes: the first `checked_inputs`
// (-1: all), the others being the decomposition's to check (max pooling's
// int64 indices beside its float tensors).
void AddComposite(OpTable& table, const std::string& op, int min_inputs, int max_inputs,
                  std::vector<ArgSpec> args, Decomposition decompose, std::vector<ir::DType> dtypes,
                  std::vector<ir::DType> refused = {}, std::string family = "composite",
                  int checked_inputs = -1);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_OP_TABLE_H_
