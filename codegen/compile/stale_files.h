// Sweeping the scratch directories of compiles that died with their daemon.
// Compilers remove their own directories, and workers die with kilnd
// (PR_SET_PDEATHSIG), but a SIGKILLed kilnd removes nothing: its workers'
// directories would pile up in <cache>/tmp on every such death.
#ifndef KILN_CODEGEN_COMPILE_STALE_FILES_H_
#define KILN_CODEGEN_COMPILE_STALE_FILES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// Removes every entry of `root` whose name starts with `prefix` (rm -rf);
// returns how many it removed. Only for a root no live process writes in
// with that prefix: kilnd calls it at start, holding the lock that keeps a
// second kilnd out. Failures are logged, not returned: a leftover directory
// costs disk, never correctness.
int RemoveStaleEntries(const std::string& root, absl::string_view prefix);

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_STALE_FILES_H_
