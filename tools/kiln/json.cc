#include "tools/kiln/json.h"

#include "proto/graph_file.h"

namespace kiln {

std::string ToJson(const google::protobuf::Message& message) { return PrintJsonMessage(message); }

}  // namespace kiln
