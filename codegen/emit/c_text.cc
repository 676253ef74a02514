#include "codegen/emit/c_text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

using Kind = ir::Definition::Kind;

std::string SymC(const ir::SymExpr& expr) {
  if (expr.terms.empty()) return "0";
  std::vector<std::string> terms;
  for (const auto& term : expr.terms) {
    std::vector<std::string> factors;
    for (int symbol : term.symbols) factors.push_back(absl::StrCat("symbols[", symbol, "]"));
    if (term.coefficient != 1 || factors.empty()) factors.push_back(absl::StrCat(term.coefficient));
    terms.push_back(absl::StrJoin(factors, " * "));
  }
  // One factor needs no parentheses: "symbols[0]", "64".
  if (terms.size() == 1 && terms[0].find(' ') == std::string::npos) return terms[0];
  return absl::StrCat("(", absl::StrJoin(terms, " + "), ")");
}

std::string Extent(const ir::Dim& dim) { return SymC(ir::SymExpr::Of(dim)); }

// An alias's offset adds to its source's, down its alias chain (a loop: a
// chain of reshapes is as long as the graph).
Layout MemoryLayout(const ir::Graph& graph, const ir::LoopProgram& program, int value) {
  const ir::Definition& definition = program.definitions[value];
  Layout layout;
  if (definition.kind == Kind::kAlias) {
    layout.strides = definition.strides;
    for (int alias = value; program.definitions[alias].kind == Kind::kAlias;
         alias = program.definitions[alias].source) {
      layout.offset += ir::SymExpr::Constant(program.definitions[alias].offset);
    }
    return layout;
  }
  const ir::TensorType& type = graph.values[value];
  layout.strides =
      definition.kind == Kind::kInput ? type.strides : ir::ContiguousStrides(type.sizes);
  return layout;
}

std::string Linear::ToString() const {
  std::vector<std::string> terms;
  for (size_t c = 0; c < coefficients.size(); ++c) {
    if (coefficients[c] == 0) continue;
    terms.push_back(coefficients[c] == 1 ? absl::StrCat("i", c)
                                         : absl::StrCat("i", c, " * ", SymC(coefficients[c])));
  }
  if (constant != 0 || terms.empty()) terms.push_back(SymC(constant));
  return absl::StrJoin(terms, " + ");
}

Linear Offset(const Layout& layout, const ir::AffineMap& map) {
  Linear linear;
  linear.constant = layout.offset;
  linear.coefficients.assign(map.num_variables, ir::SymExpr());
  for (int r = 0; r < map.num_coordinates(); ++r) {
    linear.constant += layout.strides[r] * map.offsets[r];
    for (int c = 0; c < map.num_variables; ++c) {
      linear.coefficients[c] += layout.strides[r] * map.coefficients[r][c];
    }
  }
  return linear;
}

Linear ForStorage(Linear offset, const Storage& storage, int outer_rank) {
  if (storage.kind == Storage::Kind::kRow) {
    for (int c = 0; c < outer_rank && c < static_cast<int>(offset.coefficients.size()); ++c) {
      offset.coefficients[c] = ir::SymExpr();
    }
  }
  return offset;
}

std::string FromStorage(const std::string& text, ir::DType stored) {
  if (stored == ir::DType::kBFloat16) return absl::StrCat("kiln_bf16_to_float(", text, ")");
  if (stored == ir::DType::kFloat16) return absl::StrCat("(float)", text);
  return text;
}

std::string ToStorage(const std::string& text, ir::DType stored) {
  if (stored == ir::DType::kBFloat16) return absl::StrCat("kiln_float_to_bf16(", text, ")");
  if (stored == ir::DType::kFloat16) return absl::StrCat("(_Float16)", text);
  return text;
}

std::string StorageName(int storage) { return absl::StrCat("b", storage); }

ir::DType StorageDType(const ir::Graph& graph, const Storage& storage) {
  const int value = storage.values.empty() ? graph.outputs[storage.index] : storage.values.front();
  return graph.values[value].dtype;
}

int WrittenStorage(const Kernel& kernel, const BufferPlan& plan) {
  if (kernel.kind != Kernel::Kind::kCopy) return plan.storage_of[kernel.value];
  // An output written by a copy has a storage of its own (the only one of its index).
  for (size_t s = 0; s < plan.storages.size(); ++s) {
    if (plan.storages[s].kind == Storage::Kind::kOutput &&
        plan.storages[s].index == kernel.output) {
      return s;
    }
  }
  return -1;
}

std::string LoopHeader(int variable, const std::string& extent, const std::string& indent) {
  if (extent == "1")
    return absl::StrCat(indent, "{\n", indent, "  const kiln_int64 i", variable, " = 0;\n");
  return absl::StrCat(indent, "for (kiln_int64 i", variable, " = 0; i", variable, " < ", extent,
                      "; ++i", variable, ") {\n");
}

}  // namespace kiln
