#include "codegen/ir.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kBool:
      return "bool";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
  }
  return "?";
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

bool IsComplex(DType dtype) { return dtype == DType::kComplex64 || dtype == DType::kComplex128; }

DType RealPart(DType dtype) {
  if (dtype == DType::kComplex64) return DType::kFloat32;
  return dtype == DType::kComplex128 ? DType::kFloat64 : dtype;
}

DType ComputeType(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 ? DType::kFloat32 : dtype;
}

namespace {

// Coefficient arithmetic that cannot overflow (signed overflow is undefined
// behaviour). Within codegen/limits.h every coefficient of a graph that
// passed import stays far from int64's range, so these only ever saturate
// on the way to refusing a graph (found by fuzzing: an oversized size's
// contiguous strides in an error message, a reshape of a huge symbolic
// size); a saturated value never equals a limited one, and exceeds every
// limit.
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product;
  if (!__builtin_mul_overflow(a, b, &product)) return product;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return a < 0 ? INT64_MIN : INT64_MAX;
}

// Sorts and merges terms, dropping zero ones.
SymExpr Canonical(std::vector<SymExpr::Term> terms) {
  for (auto& term : terms) std::sort(term.symbols.begin(), term.symbols.end());
  std::sort(terms.begin(), terms.end(),
            [](const SymExpr::Term& a, const SymExpr::Term& b) { return a.symbols < b.symbols; });
  SymExpr result;
  for (auto& term : terms) {
    if (!result.terms.empty() && result.terms.back().symbols == term.symbols) {
      result.terms.back().coefficient =
          SaturatingAdd(result.terms.back().coefficient, term.coefficient);
    } else {
      result.terms.push_back(std::move(term));
    }
  }
  result.terms.erase(std::remove_if(result.terms.begin(), result.terms.end(),
                                    [](const SymExpr::Term& t) { return t.coefficient == 0; }),
                     result.terms.end());
  return result;
}

}  // namespace

SymExpr SymExpr::Constant(int64_t value) { return Canonical({Term{value, {}}}); }

SymExpr SymExpr::Of(const Dim& dim) {
  if (!dim.is_symbolic()) return Constant(dim.constant);
  Term term{dim.multiplier, {dim.symbol}};
  term.symbols.insert(term.symbols.end(), dim.times.begin(), dim.times.end());
  return Canonical({std::move(term)});
}

bool SymExpr::is_constant() const {
  for (const Term& term : terms) {
    if (!term.symbols.empty()) return false;
  }
  return true;
}

int64_t SymExpr::constant() const {
  for (const Term& term : terms) {
    if (term.symbols.empty()) return term.coefficient;
  }
  return 0;
}

bool SymExpr::IsDim() const {
  return terms.empty() || (terms.size() == 1 && terms[0].coefficient >= 0);
}

Dim SymExpr::ToDim() const {
  if (terms.empty()) return Dim::Constant(0);
  if (terms[0].symbols.empty()) return Dim::Constant(terms[0].coefficient);
  Dim dim = Dim::Symbol(terms[0].symbols[0], terms[0].coefficient);
  dim.times.assign(terms[0].symbols.begin() + 1, terms[0].symbols.end());
  return dim;
}

SymExpr SymExpr::operator+(const SymExpr& other) const {
  std::vector<Term> sum = terms;
  sum.insert(sum.end(), other.terms.begin(), other.terms.end());
  return Canonical(std::move(sum));
}

SymExpr SymExpr::operator*(const SymExpr& other) const {
  std::vector<Term> product;
  for (const Term& a : terms) {
    for (const Term& b : other.terms) {
      Term term{SaturatingMul(a.coefficient, b.coefficient), a.symbols};
      term.symbols.insert(term.symbols.end(), b.symbols.begin(), b.symbols.end());
      product.push_back(std::move(term));
    }
  }
  return Canonical(std::move(product));
}

SymExpr SymExpr::operator*(int64_t factor) const { return *this * Constant(factor); }

SymExpr SymExpr::Canonicalized() const { return Canonical(terms); }

std::optional<SymExpr> DivideExactly(const SymExpr& a, const SymExpr& b) {
  if (b.terms.size() != 1) return std::nullopt;
  if (a.terms.empty()) return a;  // 0 / b: an empty dim splits into empty parts
  if (a.terms.size() != 1) return std::nullopt;
  const SymExpr::Term& numerator = a.terms[0];
  const SymExpr::Term& denominator = b.terms[0];
  if (denominator.coefficient <= 0 || numerator.coefficient % denominator.coefficient != 0) {
    return std::nullopt;
  }
  std::vector<int> have = numerator.symbols, take = denominator.symbols;
  std::sort(have.begin(), have.end());
  std::sort(take.begin(), take.end());
  if (!std::includes(have.begin(), have.end(), take.begin(), take.end())) return std::nullopt;
  SymExpr::Term quotient{numerator.coefficient / denominator.coefficient, {}};
  std::set_difference(have.begin(), have.end(), take.begin(), take.end(),
                      std::back_inserter(quotient.symbols));
  return SymExpr{{quotient}}.Canonicalized();
}

bool TensorType::is_static() const {
  for (const Dim& dim : sizes) {
    if (dim.is_symbolic()) return false;
  }
  for (const SymExpr& stride : strides) {
    if (!stride.is_constant()) return false;
  }
  return true;
}

int64_t TensorType::NumElements() const {
  int64_t count = 1;
  for (const Dim& dim : sizes) count *= dim.constant;
  return count;
}

bool TensorType::IsContiguous() const {
  const std::vector<SymExpr> contiguous = ContiguousStrides(sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    // A dim of size 1 may have any stride without changing the layout.
    if (sizes[d] == Dim::Constant(1)) continue;
    if (strides[d] != contiguous[d]) return false;
  }
  return true;
}

std::vector<SymExpr> ContiguousStrides(const std::vector<Dim>& sizes) {
  std::vector<SymExpr> strides(sizes.size());
  SymExpr stride = SymExpr::Constant(1);
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride = stride * SymExpr::Of(sizes[d]);
  }
  return strides;
}

SymExpr Product(const std::vector<Dim>& sizes, size_t first) {
  SymExpr product = SymExpr::Constant(1);
  for (size_t d = first; d < sizes.size(); ++d) product = product * SymExpr::Of(sizes[d]);
  return product;
}

bool SameElementCount(const TensorType& a, const TensorType& b) {
  return Product(a.sizes) == Product(b.sizes);
}

int Graph::AddValue(TensorType type, int node) {
  values.push_back(std::move(type));
  producer.push_back(node);
  return static_cast<int>(values.size()) - 1;
}

void Graph::AppendCopy(const Graph& from, Node node, std::vector<int>& new_value) {
  for (int& input : node.inputs) input = new_value[input];
  const int index = static_cast<int>(nodes.size());
  for (int& output : node.outputs) {
    const int old_output = output;
    output = AddValue(from.values[old_output], index);
    new_value[old_output] = output;
  }
  nodes.push_back(std::move(node));
}

Graph WithInputsOf(const Graph& graph, std::vector<int>& new_value) {
  Graph result;
  result.name = graph.name;
  result.input_names = graph.input_names;
  result.output_aliases = graph.output_aliases;
  new_value.assign(graph.values.size(), -1);
  for (int input : graph.inputs) {
    new_value[input] = result.AddValue(graph.values[input], -1);
    result.inputs.push_back(new_value[input]);
  }
  return result;
}

int Graph::SymbolIndex(const std::string& name) {
  auto it = std::find(symbols.begin(), symbols.end(), name);
  if (it != symbols.end()) return static_cast<int>(it - symbols.begin());
  symbols.push_back(name);
  bounds.emplace_back();
  return static_cast<int>(symbols.size()) - 1;
}

namespace {

std::string SymbolName(int symbol, const Graph& graph) {
  return symbol < static_cast<int>(graph.symbols.size()) ? graph.symbols[symbol]
                                                         : absl::StrCat("s", symbol);
}

std::string DimString(const Dim& dim, const Graph& graph) {
  if (!dim.is_symbolic()) return absl::StrCat(dim.constant);
  std::string name = SymbolName(dim.symbol, graph);
  for (int symbol : dim.times) absl::StrAppend(&name, "*", SymbolName(symbol, graph));
  return dim.multiplier == 1 ? name : absl::StrCat(dim.multiplier, "*", name);
}

std::string DimsString(const std::vector<Dim>& dims, const Graph& graph) {
  return absl::StrJoin(
      dims, ", ", [&](std::string* out, const Dim& dim) { out->append(DimString(dim, graph)); });
}

std::string SymExprString(const SymExpr& expr, const Graph& graph) {
  if (expr.terms.empty()) return "0";
  return absl::StrJoin(expr.terms, " + ", [&](std::string* out, const SymExpr::Term& term) {
    std::vector<std::string> factors;
    if (term.coefficient != 1 || term.symbols.empty()) {
      factors.push_back(absl::StrCat(term.coefficient));
    }
    for (int symbol : term.symbols) factors.push_back(DimString(Dim::Symbol(symbol), graph));
    out->append(absl::StrJoin(factors, "*"));
  });
}

}  // namespace

std::string ToString(const SymExpr& expr, const Graph& graph) { return SymExprString(expr, graph); }

std::string ToString(const TensorType& type, const Graph& graph) {
  std::string text = absl::StrCat(DTypeName(type.dtype), "[", DimsString(type.sizes, graph), "]");
  if (!type.IsContiguous()) {
    absl::StrAppend(&text, "{strides ",
                    absl::StrJoin(type.strides, ", ",
                                  [&](std::string* out, const SymExpr& stride) {
                                    out->append(SymExprString(stride, graph));
                                  }),
                    "}");
  }
  if (type.requires_grad) absl::StrAppend(&text, "{requires_grad}");
  return text;
}

std::string ToString(const ArgValue& value, const Graph& graph) {
  struct Printer {
    const Graph& graph;
    std::string operator()(const None&) const { return "None"; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    // %a: exact, locale-free, and the same in every process.
    std::string operator()(double v) const { return absl::StrFormat("%g (%a)", v, v); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
    }
    std::string operator()(const std::vector<bool>& v) const {
      return absl::StrCat(
          "[",
          absl::StrJoin(v, ", ",
                        [](std::string* out, bool b) { out->append(b ? "True" : "False"); }),
          "]");
    }
    std::string operator()(const SymExpr& v) const { return SymExprString(v, graph); }
    std::string operator()(const std::vector<SymExpr>& v) const {
      return absl::StrCat("[",
                          absl::StrJoin(v, ", ",
                                        [&](std::string* out, const SymExpr& e) {
                                          out->append(SymExprString(e, graph));
                                        }),
                          "]");
    }
    std::string operator()(DType v) const { return DTypeName(v); }
    std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
  };
  return std::visit(Printer{graph}, value);
}

std::string ToString(const Graph& graph) {
  std::string text;
  for (size_t s = 0; s < graph.symbols.size() && s < graph.bounds.size(); ++s) {
    const SymbolBounds& bounds = graph.bounds[s];
    if (bounds.is_default()) continue;
    const std::string& name = graph.symbols[s];
    absl::StrAppend(&text, "symbol ", name, ": ", bounds.min, " <= ", name);
    if (bounds.max != 0) absl::StrAppend(&text, " <= ", bounds.max);
    if (bounds.divisor > 1) absl::StrAppend(&text, ", ", name, " % ", bounds.divisor, " == 0");
    text += "\n";
  }
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const int value = graph.inputs[i];
    absl::StrAppend(&text, "%", value, " = input ", i, " : ", ToString(graph.values[value], graph));
    if (i < graph.input_names.size() && !graph.input_names[i].empty()) {
      absl::StrAppend(&text, "  # ", graph.input_names[i]);
    }
    text += "\n";
  }
  for (const Node& node : graph.nodes) {
    std::vector<std::string> operands;
    for (int input : node.inputs) operands.push_back(absl::StrCat("%", input));
    for (const auto& [name, value] : node.args) {
      operands.push_back(absl::StrCat(name, "=", ToString(value, graph)));
    }
    std::vector<std::string> results;
    for (int output : node.outputs) {
      results.push_back(absl::StrCat("%", output, " : ", ToString(graph.values[output], graph)));
    }
    absl::StrAppend(&text, absl::StrJoin(results, ", "), " = ", node.op, "(",
                    absl::StrJoin(operands, ", "), ")");
    if (!node.name.empty()) absl::StrAppend(&text, "  # ", node.name);
    text += "\n";
  }
  absl::StrAppend(&text, "return (",
                  absl::StrJoin(graph.outputs, ", ",
                                [](std::string* out, int v) { absl::StrAppend(out, "%", v); }),
                  ")\n");
  for (const auto& [output, input] : graph.output_aliases) {
    absl::StrAppend(&text, "output ", output, " is the new value of input ", input, "\n");
  }
  return text;
}

}  // namespace kiln::ir
