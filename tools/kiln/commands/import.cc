// kiln import FILE: store every entry of a bundle, or none
// (tools/kiln/bundle.h).
#include <iostream>

#include "absl/flags/flag.h"
#include "common/status_macros.h"
#include "tools/kiln/bundle.h"
#include "tools/kiln/commands/command.h"

ABSL_FLAG(bool, force, false,
          "Store entries built for another toolchain, codegen version or target too (they can "
          "never be a hit here).");

namespace kiln {
namespace {

absl::Status Import(const Args& args) {
  RETURN_IF_ERROR(NeedArgs(args, 1, "kiln import FILE"));
  ASSIGN_OR_RETURN(auto client, ConnectFromFlags());
  return RunImport(args[0], absl::GetFlag(FLAGS_force), *client, std::cout);
}

}  // namespace

const Command kImportCommand = {
    "import",
    "FILE",
    "store every entry of a bundle, or none: digests are checked, and entries for another "
    "toolchain or CPU refused",
    {{"force"}, kSocketFlag, kCacheDirFlag, kStartFlag},
    "kiln import warm.kb",
    Import};

}  // namespace kiln
