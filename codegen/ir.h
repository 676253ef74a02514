// The in-memory graph IR that every codegen pass reads.
//
// Protos are the wire format only: import.h converts a kiln.v1.Graph into
// this IR at the boundary and nothing below mutates protos. Values are dense
// indices: graph inputs first, then each node's results in node order.
#ifndef KILN_CODEGEN_IR_H_
#define KILN_CODEGEN_IR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln::ir {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  // Interleaved (real, imaginary) pairs of float32 / float64, as torch
  // stores them. passes/split_complex.h rewrites them into real pairs
  // before anything lowers.
  kComplex64,
  kComplex128,
};

const char* DTypeName(DType dtype);  // "float32", ...
int64_t DTypeSize(DType dtype);      // bytes per element
bool IsFloatingPoint(DType dtype);
bool IsComplex(DType dtype);
// The real type of a complex dtype's parts (float32 for complex64); any
// other dtype is itself.
DType RealPart(DType dtype);
// What a dtype computes in: itself, except 16-bit floats (float32).
DType ComputeType(DType dtype);

// A size: a constant, or `multiplier` times graph-wide size symbols
// (indices into Graph::symbols): `symbol`, times each of `times` (a
// flattened [S * B] — results only; an input's sizes name one symbol).
// `symbol` is the smallest index and `times` sorted. Strides and offsets,
// which can be sums of such products, are SymExprs.
struct Dim {
  int64_t constant = 0;
  int symbol = -1;
  int64_t multiplier = 1;
  std::vector<int> times;

  static Dim Constant(int64_t value) { return Dim{value, -1, 1, {}}; }
  static Dim Symbol(int index, int64_t multiplier = 1) { return Dim{0, index, multiplier, {}}; }
  bool is_symbolic() const { return symbol >= 0; }
  bool operator==(const Dim& other) const {
    return constant == other.constant && symbol == other.symbol &&
           (symbol < 0 || (multiplier == other.multiplier && times == other.times));
  }
  bool operator!=(const Dim& other) const { return !(*this == other); }
};

// A sum of products of constants and symbols: coefficient * s_a * s_b + ...
// Strides and offsets are these (a contiguous [s0, s1, 8] has strides
// [8*s1, 8, 1]); so are symbolic view arguments. The arithmetic keeps the
// canonical form (terms sorted by their sorted symbols, no zero terms); an
// expression imported from a graph keeps the terms as written.
struct SymExpr {
  struct Term {
    int64_t coefficient = 0;
    std::vector<int> symbols;
    bool operator==(const Term& other) const {
      return coefficient == other.coefficient && symbols == other.symbols;
    }
  };
  std::vector<Term> terms;

  static SymExpr Constant(int64_t value);
  static SymExpr Of(const Dim& dim);
  bool is_constant() const;  // no term names a symbol
  int64_t constant() const;  // the term without symbols (0 if none)
  // The expression as a Dim (a constant, or a multiple of a product of
  // symbols), if it is one.
  bool IsDim() const;
  Dim ToDim() const;  // requires IsDim()
  // The canonical form of an expression whose terms may be out of order
  // (imported, or after symbols were renamed).
  SymExpr Canonicalized() const;
  SymExpr operator+(const SymExpr& other) const;
  SymExpr operator*(const SymExpr& other) const;
  SymExpr operator*(int64_t factor) const;
  SymExpr& operator+=(const SymExpr& other) { return *this = *this + other; }
  bool operator==(const SymExpr& other) const { return terms == other.terms; }
  bool operator!=(const SymExpr& other) const { return !(*this == other); }
  bool operator==(int64_t value) const { return *this == Constant(value); }
  bool operator!=(int64_t value) const { return !(*this == value); }
};

// a / b when b is a single term that divides a, zero or a single term,
// exactly (coefficient and symbols), else nullopt.
std::optional<SymExpr> DivideExactly(const SymExpr& a, const SymExpr& b);

struct TensorType {
  DType dtype = DType::kFloat32;
  std::vector<Dim> sizes;
  std::vector<SymExpr> strides;  // always filled in (import computes contiguous)
  bool requires_grad = false;

  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  bool is_static() const;
  // Product of the sizes; requires is_static().
  int64_t NumElements() const;
  bool IsContiguous() const;
};

// Whether two types hold the same number of elements for every binding of
// their symbols (the same constant factor and the same symbols).
bool SameElementCount(const TensorType& a, const TensorType& b);

// The product of sizes[first..]: a tensor's element count, or a row's.
SymExpr Product(const std::vector<Dim>& sizes, size_t first = 0);

// Row-major strides for `sizes`.
std::vector<SymExpr> ContiguousStrides(const std::vector<Dim>& sizes);

struct None {};

// A typed scalar or list argument. The alternatives' order is part of the
// cache key encoding (cache/key.cc): append only.
using ArgValue =
    std::variant<None, int64_t, double, bool, std::vector<int64_t>, std::vector<double>,
                 std::vector<bool>, SymExpr, std::vector<SymExpr>, DType, std::string>;

struct Node {
  std::string op;           // "aten.mm.default"
  std::vector<int> inputs;  // value indices
  // Sorted by name, so iteration is deterministic.
  std::map<std::string, ArgValue> args;
  std::vector<int> outputs;  // value indices this node defines
  std::string name;          // for humans only
};

// What a graph promises about a symbol's value beyond "at least 2" (from its
// relations): min <= value <= max (max 0: unbounded), value % divisor == 0.
struct SymbolBounds {
  int64_t min = 2;
  int64_t max = 0;
  int64_t divisor = 1;

  bool is_default() const { return min <= 2 && max == 0 && divisor == 1; }
};

struct Graph {
  std::vector<TensorType> values;  // type of each value
  // Node index that defines each value, or -1 for a graph input.
  std::vector<int> producer;
  std::vector<int> inputs;               // value indices, in input order (0..n-1)
  std::vector<std::string> input_names;  // for humans only
  std::vector<Node> nodes;               // topological order
  std::vector<int> outputs;              // value indices, in output order
  // Per alias: {output position, input position}: the output is the new
  // value of the input (kiln.v1.OutputAlias), sorted.
  std::vector<std::pair<int, int>> output_aliases;
  std::vector<std::string> symbols;  // symbol names by index
  std::vector<SymbolBounds> bounds;  // by symbol index, as long as `symbols`
  std::string name;                  // for humans only

  // Adds a value produced by `node` (-1 for an input) and returns its index.
  int AddValue(TensorType type, int node);
  // Appends `node`, whose value indices are `from`'s: its inputs through
  // `new_value` (from's index -> this graph's), its outputs added with
  // their types in `from` and recorded in `new_value`.
  void AppendCopy(const Graph& from, Node node, std::vector<int>& new_value);
  // The index of symbol `name`, added (with default bounds) if new.
  int SymbolIndex(const std::string& name);
};

// A graph with `graph`'s name, inputs (input names, types) and output
// aliases and nothing else, for a pass that rebuilds `graph` (its outputs
// in the same order); `new_value` maps `graph`'s input
// values to the copies (-1 for every other value).
Graph WithInputsOf(const Graph& graph, std::vector<int>& new_value);

// Calls `fn` on every use of a symbol index: for each value in order, its
// sizes and then its strides; then symbolic arguments in node order.
// Strides and symbolic arguments are canonical afterwards (renaming symbols
// can reorder terms; an imported argument has them as written), so graphs
// that differ only there share a key.
template <typename Fn>
void ForEachSymbolUse(Graph& graph, Fn fn) {
  auto in_expr = [&](SymExpr& expr) {
    for (auto& term : expr.terms)
      for (int& symbol : term.symbols) fn(symbol);
  };
  for (TensorType& type : graph.values) {
    for (Dim& dim : type.sizes) {
      if (!dim.is_symbolic()) continue;
      fn(dim.symbol);
      for (int& symbol : dim.times) fn(symbol);
    }
    for (SymExpr& stride : type.strides) in_expr(stride);
  }
  for (Node& node : graph.nodes) {
    for (auto& [name, value] : node.args) {
      if (auto* expr = std::get_if<SymExpr>(&value)) in_expr(*expr);
      if (auto* list = std::get_if<std::vector<SymExpr>>(&value)) {
        for (SymExpr& expr : *list) in_expr(expr);
      }
    }
  }
  for (TensorType& type : graph.values) {
    for (Dim& dim : type.sizes) {
      if (!dim.times.empty()) dim = SymExpr::Of(dim).ToDim();  // the smallest symbol first
    }
    for (SymExpr& stride : type.strides) stride = stride.Canonicalized();
  }
  for (Node& node : graph.nodes) {
    for (auto& [name, value] : node.args) {
      if (auto* expr = std::get_if<SymExpr>(&value)) *expr = expr->Canonicalized();
      if (auto* list = std::get_if<std::vector<SymExpr>>(&value)) {
        for (SymExpr& expr : *list) expr = expr.Canonicalized();
      }
    }
  }
}

// Human-readable, deterministic listing ("kiln explain" stage 1).
std::string ToString(const SymExpr& expr, const Graph& graph);  // "8*s1 + 3"
std::string ToString(const TensorType& type, const Graph& graph);
std::string ToString(const ArgValue& value, const Graph& graph);
std::string ToString(const Graph& graph);

}  // namespace kiln::ir

#endif  // KILN_CODEGEN_IR_H_
