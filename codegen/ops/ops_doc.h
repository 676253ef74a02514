// docs/OPS.md, generated from the op table so that it cannot drift
// (ops_doc_test compares the two). Regenerate with:
//   bazel run //tools/kiln -- ops > docs/OPS.md
#ifndef KILN_CODEGEN_OPS_OPS_DOC_H_
#define KILN_CODEGEN_OPS_OPS_DOC_H_

#include <string>

namespace kiln::ops {

std::string OpsMarkdown();

// docs/OPS.md's "Special functions" section (codegen/ops/special.cc).
std::string SpecialFunctionsMarkdown();

}  // namespace kiln::ops

#endif  // KILN_CODEGEN_OPS_OPS_DOC_H_
