#include "cache/key.h"

#include <algorithm>
#include <cstring>

#include "abi/kiln_abi.h"
#include "abi/target.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codegen/version.h"
#include "common/sha256.h"

namespace kiln {
namespace {

// A canonical byte encoding: every field tagged, integers as 8 bytes little
// endian, floats by bit pattern, strings length-prefixed. Never hashes a
// human-only name.
class Encoder {
 public:
  void Tag(char tag) { bytes_.push_back(tag); }
  void Int(int64_t value) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
  void Double(double value) {
    int64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    Int(bits);
  }
  void String(absl::string_view value) {
    Int(static_cast<int64_t>(value.size()));
    bytes_.append(value.data(), value.size());
  }
  std::string Digest() const { return Sha256Hex(bytes_); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

void EncodeDim(const ir::Dim& dim, Encoder& out) {
  out.Tag(dim.is_symbolic() ? 's' : 'c');
  out.Int(dim.is_symbolic() ? dim.symbol : dim.constant);
  if (dim.is_symbolic()) {
    out.Int(dim.multiplier);
    out.Int(static_cast<int64_t>(dim.times.size()));
    for (int symbol : dim.times) out.Int(symbol);
  }
}

void EncodeSymExpr(const ir::SymExpr& expr, Encoder& out) {
  out.Int(static_cast<int64_t>(expr.terms.size()));
  for (const auto& term : expr.terms) {
    out.Int(term.coefficient);
    out.Int(static_cast<int64_t>(term.symbols.size()));
    for (int symbol : term.symbols) out.Int(symbol);
  }
}

void EncodeType(const ir::TensorType& type, Encoder& out) {
  out.Tag('T');
  out.Int(static_cast<int64_t>(type.dtype));
  out.Int(type.rank());
  for (const ir::Dim& dim : type.sizes) EncodeDim(dim, out);
  for (const ir::SymExpr& stride : type.strides) EncodeSymExpr(stride, out);
  out.Int(type.requires_grad);
}

// Every scalar carries its type: add(t, 1) and add(t, 1.0) promote
// differently, so they must not share a key.
void EncodeArg(const ir::ArgValue& value, Encoder& out) {
  out.Tag('A');
  out.Int(static_cast<int64_t>(value.index()));
  struct Visitor {
    Encoder& out;
    void operator()(const ir::None&) {}
    void operator()(int64_t v) { out.Int(v); }
    void operator()(double v) { out.Double(v); }
    void operator()(bool v) { out.Int(v); }
    void operator()(const std::vector<int64_t>& v) {
      out.Int(static_cast<int64_t>(v.size()));
      for (int64_t x : v) out.Int(x);
    }
    void operator()(const std::vector<double>& v) {
      out.Int(static_cast<int64_t>(v.size()));
      for (double x : v) out.Double(x);
    }
    void operator()(const std::vector<bool>& v) {
      out.Int(static_cast<int64_t>(v.size()));
      for (bool x : v) out.Int(x);
    }
    void operator()(const ir::SymExpr& v) { EncodeSymExpr(v, out); }
    void operator()(const std::vector<ir::SymExpr>& v) {
      out.Int(static_cast<int64_t>(v.size()));
      for (const auto& x : v) EncodeSymExpr(x, out);
    }
    void operator()(ir::DType v) { out.Int(static_cast<int64_t>(v)); }
    void operator()(const std::string& v) { out.String(v); }
  };
  std::visit(Visitor{out}, value);
}

// The graph is canonical already (PrepareGraph): order and value ids are
// structural, so encoding it in order is canonical.
void EncodeInputs(const ir::Graph& graph, Encoder& out) {
  out.Int(static_cast<int64_t>(graph.symbols.size()));
  out.Int(static_cast<int64_t>(graph.inputs.size()));
  for (int input : graph.inputs) EncodeType(graph.values[input], out);
}

void EncodeNode(const ir::Graph& graph, const ir::Node& node, Encoder& out) {
  out.Tag('N');
  out.String(node.op);
  out.Int(static_cast<int64_t>(node.inputs.size()));
  for (int input : node.inputs) out.Int(input);
  out.Int(static_cast<int64_t>(node.args.size()));
  for (const auto& [name, value] : node.args) {  // sorted by name
    out.String(name);
    EncodeArg(value, out);
  }
  out.Int(static_cast<int64_t>(node.outputs.size()));
  for (int output : node.outputs) {
    out.Int(output);
    EncodeType(graph.values[output], out);
  }
}

std::string GraphDigest(const ir::Graph& graph) {
  Encoder out;
  EncodeInputs(graph, out);
  out.Int(static_cast<int64_t>(graph.nodes.size()));
  for (const ir::Node& node : graph.nodes) EncodeNode(graph, node, out);
  out.Int(static_cast<int64_t>(graph.outputs.size()));
  for (int output : graph.outputs) out.Int(output);
  if (!graph.output_aliases.empty()) {  // absent before aliases existed: old keys hold
    out.Tag('A');
    out.Int(static_cast<int64_t>(graph.output_aliases.size()));
    for (const auto& [output, input] : graph.output_aliases) {
      out.Int(output);
      out.Int(input);
    }
  }
  return out.Digest();
}

constexpr size_t kPartDigits = 16;  // of each graph part's digest

// Short digests of the graph's parts, for explaining a miss: not part of
// the key (GraphDigest covers all of it).
void SetGraphParts(const ir::Graph& graph, kiln::v1::KeyComponents& components) {
  std::string& parts = *components.mutable_graph_part_digests();
  parts.reserve(kPartDigits * (1 + graph.nodes.size()));
  Encoder inputs;
  EncodeInputs(graph, inputs);
  parts += inputs.Digest().substr(0, kPartDigits);
  for (const ir::Node& node : graph.nodes) {
    Encoder one;
    EncodeNode(graph, node, one);
    parts += one.Digest().substr(0, kPartDigits);
  }
}

void EncodeProtoDim(const kiln::v1::Dim& dim, Encoder& out) {
  out.Tag(dim.has_symbol() ? 's' : 'c');
  if (dim.has_symbol()) {
    out.String(dim.symbol());
    out.Int(dim.multiplier() == 0 ? 1 : dim.multiplier());
    out.Int(dim.times_size());
    for (const std::string& symbol : dim.times()) out.String(symbol);
  } else {
    out.Int(dim.constant());
  }
}

std::string GuardsDigest(const kiln::v1::Guards& guards) {
  Encoder out;
  out.Int(guards.inputs_size());
  for (const auto& guard : guards.inputs()) {  // positional: order is meaning
    out.Tag('G');
    out.Int(guard.dtype());
    out.String(guard.device());
    out.Int(guard.rank());
    out.Int(guard.sizes_size());
    for (const auto& dim : guard.sizes()) EncodeProtoDim(dim, out);
    out.Int(guard.strides_size());
    for (const auto& dim : guard.strides()) EncodeProtoDim(dim, out);
    out.Int(guard.requires_grad());
  }
  // Relations are a set: encode each, then sort.
  std::vector<std::string> relations;
  for (const auto& relation : guards.relations()) {
    Encoder one;
    one.Int(relation.relation_case());
    switch (relation.relation_case()) {
      case kiln::v1::SymbolRelation::kEqual: {
        // s0 == s1 and s1 == s0 are one relation.
        std::string lhs = relation.equal().lhs(), rhs = relation.equal().rhs();
        if (rhs < lhs) std::swap(lhs, rhs);
        one.String(lhs);
        one.String(rhs);
        break;
      }
      case kiln::v1::SymbolRelation::kRange:
        one.String(relation.range().symbol());
        one.Int(relation.range().min());
        one.Int(relation.range().max());
        break;
      case kiln::v1::SymbolRelation::kDivisible:
        one.String(relation.divisible().symbol());
        one.Int(relation.divisible().divisor());
        break;
      case kiln::v1::SymbolRelation::RELATION_NOT_SET:
        break;
    }
    relations.push_back(one.bytes());
  }
  std::sort(relations.begin(), relations.end());
  out.Int(static_cast<int64_t>(relations.size()));
  for (const std::string& relation : relations) out.String(relation);
  return out.Digest();
}

std::string OptionsDigest(const kiln::v1::CompileOptions& options) {
  Encoder out;
  out.String(options.salt());
  // Encoded only when not native, so that every key made before targets
  // existed (all native) stays the same and kKeyFormatVersion need not
  // change. Still injective: the salt's length prefix fixes where it ends,
  // so bytes after it can only be a target's.
  if (options.target() != kiln::v1::TARGET_NATIVE) {
    out.Tag('t');
    out.Int(options.target());
  }
  return out.Digest();
}

}  // namespace

CacheKey ComputeCacheKey(const CodegenInputs& inputs) {
  CacheKey result;
  kiln::v1::KeyComponents& components = result.components;
  components.set_format_version(KeyFormatDigest());
  components.set_graph(GraphDigest(inputs.graph));
  components.set_guards(GuardsDigest(inputs.guards));
  components.set_options(OptionsDigest(inputs.options));
  components.set_toolchain(inputs.toolchain_digest);
  components.set_codegen_version(CodegenVersionDigest());
  SetGraphParts(inputs.graph, components);
  Encoder key;
  for (const std::string* digest :
       {&components.format_version(), &components.graph(), &components.guards(),
        &components.options(), &components.toolchain(), &components.codegen_version()}) {
    key.String(*digest);
  }
  result.key = key.Digest();
  return result;
}

std::string ToolchainDigest(const kiln::v1::Toolchain& toolchain) {
  Encoder out;
  out.String(toolchain.compiler_version());
  auto strings = [&](const auto& list) {
    out.Int(list.size());
    for (absl::string_view item : list) out.String(item);
  };
  strings(toolchain.build_ids());
  strings(toolchain.flags());  // order matters to the compiler
  out.String(toolchain.target_triple());
  out.String(toolchain.cpu());
  strings(CpuFeatures(toolchain));  // sorted at detection
  return out.Digest();
}

std::vector<absl::string_view> GraphParts(const kiln::v1::KeyComponents& components) {
  if (components.graph_part_digests().empty()) {
    return {components.graph_parts().begin(), components.graph_parts().end()};
  }
  std::vector<absl::string_view> parts;
  const absl::string_view digests = components.graph_part_digests();
  for (size_t at = 0; at < digests.size(); at += kPartDigits) {
    parts.push_back(digests.substr(at, kPartDigits));
  }
  return parts;
}

std::string KeyFormatDigest() {
  Encoder format;
  format.Int(kKeyFormatVersion);
  return format.Digest();
}

std::string CodegenVersionDigest() {
  Encoder out;
  out.Int(kCodegenVersion);
  out.Int(KILN_ABI_VERSION);
  return out.Digest();
}

}  // namespace kiln
