#include "codegen/loop_ir.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {

AffineMap AffineMap::Identity(int rank) {
  AffineMap map;
  map.num_variables = rank;
  map.coefficients.assign(rank, std::vector<int64_t>(rank, 0));
  map.offsets.assign(rank, 0);
  for (int d = 0; d < rank; ++d) map.coefficients[d][d] = 1;
  return map;
}

AffineMap AffineMap::Broadcast(const std::vector<Dim>& source_sizes, int target_rank) {
  const int source_rank = static_cast<int>(source_sizes.size());
  AffineMap map;
  map.num_variables = target_rank;
  map.coefficients.assign(source_rank, std::vector<int64_t>(target_rank, 0));
  map.offsets.assign(source_rank, 0);
  for (int d = 0; d < source_rank; ++d) {
    if (source_sizes[d] == Dim::Constant(1)) continue;  // pinned to 0
    map.coefficients[d][target_rank - source_rank + d] = 1;
  }
  return map;
}

AffineMap AffineMap::After(const AffineMap& inner) const {
  AffineMap result;
  result.num_variables = inner.num_variables;
  result.coefficients.assign(num_coordinates(), std::vector<int64_t>(inner.num_variables, 0));
  result.offsets = offsets;
  for (int r = 0; r < num_coordinates(); ++r) {
    for (int k = 0; k < num_variables; ++k) {
      const int64_t scale = coefficients[r][k];
      if (scale == 0) continue;
      result.offsets[r] += scale * inner.offsets[k];
      for (int c = 0; c < inner.num_variables; ++c) {
        result.coefficients[r][c] += scale * inner.coefficients[k][c];
      }
    }
  }
  return result;
}

bool AffineMap::IsIdentity() const { return *this == Identity(num_variables); }

AffineMap AffineMap::WithGatheredCoordinate(int coordinate) const {
  AffineMap result = *this;
  ++result.num_variables;
  for (std::vector<int64_t>& row : result.coefficients) row.push_back(0);
  result.coefficients[coordinate].assign(result.num_variables, 0);
  result.coefficients[coordinate].back() = 1;
  result.offsets[coordinate] = 0;
  return result;
}

AffineMap LoadCoordinates(const Expr& load, const AffineMap& at) {
  AffineMap coordinates = load.index.After(at);
  if (load.gathered < 0) return coordinates;
  return coordinates.WithGatheredCoordinate(load.gathered);
}

std::string AffineMap::ToString() const {
  std::vector<std::string> variables;
  for (int c = 0; c < num_variables; ++c) variables.push_back(absl::StrCat("i", c));
  std::vector<std::string> coordinates;
  for (int r = 0; r < num_coordinates(); ++r) {
    std::vector<std::string> terms;
    for (int c = 0; c < num_variables; ++c) {
      const int64_t k = coefficients[r][c];
      if (k == 0) continue;
      terms.push_back(k == 1 ? variables[c] : absl::StrCat(k, "*", variables[c]));
    }
    if (offsets[r] != 0 || terms.empty()) terms.push_back(absl::StrCat(offsets[r]));
    coordinates.push_back(absl::StrJoin(terms, " + "));
  }
  return absl::StrCat("(", absl::StrJoin(variables, ", "), ") -> (",
                      absl::StrJoin(coordinates, ", "), ")");
}

namespace {

// Recursive over one definition's own expressions only (loads end it), so
// its depth is that of one op's lowering, not the graph's.
std::string ExprString(const Definition& definition, int index) {
  const Expr& expr = definition.exprs[index];
  switch (expr.kind) {
    case Expr::Kind::kLoad:
      if (expr.gathered >= 0) {
        return absl::StrCat("load(%", expr.value, ", ", expr.index.ToString(), ", coordinate ",
                            expr.gathered, " = ", ExprString(definition, expr.operands[0]),
                            ", else ", expr.fill, ")");
      }
      return absl::StrCat("load(%", expr.value, ", ", expr.index.ToString(),
                          expr.bounded ? absl::StrCat(", else ", expr.fill) : "", ")");
    case Expr::Kind::kConstant:
      return absl::StrCat(expr.constant);
    case Expr::Kind::kIndex:
      return absl::StrCat("i", expr.variable);
    case Expr::Kind::kSize:
      return absl::StrCat("size(", ToString(expr.size, Graph()), ")");
    case Expr::Kind::kCall: {
      std::vector<std::string> operands;
      for (int operand : expr.operands) operands.push_back(ExprString(definition, operand));
      return absl::StrCat(expr.function, "(", absl::StrJoin(operands, ", "), ")");
    }
  }
  return "?";
}

}  // namespace

std::string ToString(const LoopProgram& program, const Graph& graph) {
  std::string text;
  for (size_t v = 0; v < program.definitions.size(); ++v) {
    const Definition& definition = program.definitions[v];
    absl::StrAppend(&text, "%", v, " : ", ToString(graph.values[v], graph), " = ");
    switch (definition.kind) {
      case Definition::Kind::kInput:
        absl::StrAppend(&text, "input");
        break;
      case Definition::Kind::kPointwise:
        absl::StrAppend(&text, "pointwise ", ExprString(definition, definition.root));
        break;
      case Definition::Kind::kReduction:
        absl::StrAppend(&text, definition.combiner, " over [",
                        absl::StrJoin(definition.reduction_sizes, ", ",
                                      [&](std::string* out, const Dim& size) {
                                        out->append(ToString(SymExpr::Of(size), graph));
                                      }),
                        "] of ", ExprString(definition, definition.root));
        if (definition.position >= 0) {
          absl::StrAppend(&text, " at ", ExprString(definition, definition.position));
        }
        break;
      case Definition::Kind::kScan:
        absl::StrAppend(&text, definition.combiner, " scan along dim ", definition.axis, " of ",
                        ExprString(definition, definition.root));
        break;
      case Definition::Kind::kScatter:
        absl::StrAppend(
            &text, definition.combiner == "assign" ? "scatter-write onto " : "scatter-add onto ",
            definition.source < 0 ? std::string("0") : absl::StrCat("%", definition.source),
            ", over [",
            absl::StrJoin(
                definition.reduction_sizes, ", ",
                [&](std::string* out, const Dim& size) {
                  out->append(ToString(SymExpr::Of(size), graph));
                }),
            "]: ", ExprString(definition, definition.root), " at ", definition.map.ToString(),
            ", coordinate ", definition.axis, " = ", ExprString(definition, definition.position),
            definition.checked_op.empty() ? "" : ", checked");
        break;
      case Definition::Kind::kAlias:
        absl::StrAppend(&text, "alias %", definition.source, " strides [",
                        absl::StrJoin(definition.strides, ", ",
                                      [&](std::string* out, const SymExpr& stride) {
                                        out->append(ToString(stride, graph));
                                      }),
                        "] offset ", definition.offset);
        break;
      case Definition::Kind::kView:
        absl::StrAppend(&text, "view %", definition.source, " ", definition.map.ToString());
        break;
      case Definition::Kind::kConcat:
        absl::StrAppend(
            &text, "concat along ", definition.axis, " (",
            absl::StrJoin(definition.operands, ", ",
                          [](std::string* out, int v) { absl::StrAppend(out, "%", v); }),
            ")");
        break;
      case Definition::Kind::kExtern:
        absl::StrAppend(
            &text, "extern ", definition.function, "(",
            absl::StrJoin(definition.operands, ", ",
                          [](std::string* out, int v) { absl::StrAppend(out, "%", v); }),
            ")");
        break;
    }
    text += "\n";
  }
  return text;
}

}  // namespace kiln::ir
