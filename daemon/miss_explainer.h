// Why a request missed (`kiln why`): what its key is made of, and how that
// differs, part by part, from the stored entries nearest to it.
//
// Every entry stores its key's components (cache/key.h), with short
// digests of its canonical graph's inputs and of each node, so the parts
// compare without the stored graph: the graph (which node), the guards
// (which input, which dim), the options, the toolchain (compiler, CPU),
// the codegen version and the key format.
#ifndef KILN_DAEMON_MISS_EXPLAINER_H_
#define KILN_DAEMON_MISS_EXPLAINER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cache/key.h"
#include "codegen/codegen_inputs.h"
#include "proto/artifact.pb.h"
#include "proto/service.pb.h"

namespace kiln {

// A request as kilnd keyed it, kept to explain its miss.
struct KeyedRequestSummary {
  absl::Time when;
  std::string key;
  std::string graph_name;
  kiln::v1::KeyComponents components;
  kiln::v1::Guards guards;               // canonical (ResolveGuards)
  std::vector<std::string> node_labels;  // canonical order: "3 'relu' (aten.relu.default)"
  kiln::v1::Target target;
  kiln::v1::Toolchain toolchain;  // what it would be compiled with
};

KeyedRequestSummary SummarizeRequest(const CodegenInputs& inputs, const CacheKey& key,
                                     const kiln::v1::Toolchain& toolchain, absl::Time when);

// One line per part of the key that differs ("graph: node 3 'relu'
// (aten.relu.default) differs"). Empty when the keys are equal.
std::vector<std::string> KeyDifferences(const KeyedRequestSummary& request,
                                        const kiln::v1::ArtifactMetadata& stored);

// `request` explained against `entries`: whether it is stored, and the
// `limit` other entries with the fewest differing parts (ties: the same
// graph name first, then the newest), each with its differences. A past
// miss is usually stored now (its compile stored it): what explains it is
// the other entries.
kiln::v1::WhyResponse::Request Explain(const KeyedRequestSummary& request,
                                       const std::vector<kiln::v1::ArtifactMetadata>& entries,
                                       int limit);

}  // namespace kiln

#endif  // KILN_DAEMON_MISS_EXPLAINER_H_
