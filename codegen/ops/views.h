// The view family's shared parts: a view's map, the affine views by name
// (views.cc), and the reshapes that follow them to storage (reshapes.cc).
#ifndef KILN_CODEGEN_OPS_VIEWS_H_
#define KILN_CODEGEN_OPS_VIEWS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/ops/op_table.h"

namespace kiln::ops {

// A view: its result type, and the map from its coordinates to the source's.
struct View {
  ir::TensorType type;
  ir::AffineMap map;
};
using ViewFn = std::function<absl::StatusOr<View>(const ir::Node&, const ir::TensorType&)>;
// The views of every result of a view op (split has several).
using ViewsFn =
    std::function<absl::StatusOr<std::vector<View>>(const ir::Node&, const ir::TensorType&)>;

// Every affine view op by name: as_strided follows them to the storage
// they share (filled while the table is built, read-only after).
inline std::map<std::string, ViewsFn>& AffineViews() {
  static auto* const views = new std::map<std::string, ViewsFn>();
  return *views;
}

// Registers view, reshape, _unsafe_view, _reshape_alias, as_strided and
// kiln.alias (reshapes.cc).
void RegisterReshapeOps(OpTable& table);

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_VIEWS_H_
