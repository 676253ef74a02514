// bit_flips: random bytes flipped in each kind of file under the cache
// directory while kilnd is stopped; every result must stay correct.
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/stress/main_util.h"

ABSL_FLAG(int, flips_per_kind, 10, "Trials per kind of file (each flips 1-3 bytes of one file).");
ABSL_FLAG(std::string, kinds, "",
          "Comma-separated kinds to damage (default: all of object, sst, wal, manifest, current, "
          "options, identity, index, descriptor).");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bit_flips: damage the cache directory's files and check that Kiln detects or shrugs off\n"
      "each flip, never answers wrongly, never crashes, and heals. Exits 1 on a violation. Usage:\n"
      "  bazel run -c opt //tools/stress:bit_flips -- --flips_per_kind=10 --seed=1 [--json]");
  absl::ParseCommandLine(argc, argv);
  kiln::stress::BitFlipsOptions options;
  options.common = kiln::stress::CommonOptionsFromFlags();
  options.flips_per_kind = absl::GetFlag(FLAGS_flips_per_kind);
  if (!absl::GetFlag(FLAGS_kinds).empty()) {
    options.kinds = absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',');
    for (const std::string& kind : options.kinds) {
      const auto known = kiln::stress::FileKinds();
      if (std::find(known.begin(), known.end(), kind) == known.end()) {
        std::cerr << "bit_flips: --kinds: unknown kind '" << kind << "'; use some of "
                  << absl::StrJoin(known, ",") << "\n";
        return 2;
      }
    }
  }
  return kiln::stress::Finish("bit_flips", kiln::stress::RunBitFlips(options),
                              absl::GetFlag(FLAGS_json));
}
