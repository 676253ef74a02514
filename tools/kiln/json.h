// The one way the CLI prints a protobuf message as JSON: indented, with the
// .proto field names (snake_case), so that every `--json` output and every
// file the CLI writes spells fields as graph.proto, service.proto and
// warmup.proto do (PrintJsonMessage, proto/graph_file.h, which the other
// writers of JSON use too).
#ifndef KILN_TOOLS_KILN_JSON_H_
#define KILN_TOOLS_KILN_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace kiln {

std::string ToJson(const google::protobuf::Message& message);

}  // namespace kiln

#endif  // KILN_TOOLS_KILN_JSON_H_
