// The connection a Client talks to kilnd over, as bytes.
//
// The Client (client/client.h) serializes each request and parses each
// response; a Transport only carries them. Kiln's one transport is gRPC's
// (client/grpc_transport.cc), kept in a library of its own so that a
// process that never needs kilnd — a serving worker that finds everything
// in the local index — never loads gRPC: C++ programs link it (//client),
// and the Python extension loads it on first need (libkiln_grpc.so, next
// to the extension; docs/PYTHON.md).
#ifndef KILN_CLIENT_TRANSPORT_H_
#define KILN_CLIENT_TRANSPORT_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln {

inline constexpr char kUnansweredPayload[] = "kiln.dev/unanswered";

class Transport {
 public:
  virtual ~Transport() = default;

  // Calls `method` of the kiln.v1.Kiln service ("Compile") with the
  // serialized `request`: the serialized response, or the call's status
  // (gRPC's codes are absl's). Carries the version metadata
  // (common/version.h) and a deadline `timeout` away. While it waits,
  // asks `interrupted` (when set) every 50 ms; once that says yes, the
  // call is cancelled and fails with Cancelled. A call that gets no answer
  // by its deadline fails with DeadlineExceeded carrying
  // kUnansweredPayload (a DeadlineExceeded that kilnd sends, a compile
  // past its --compile_timeout, carries none). Thread-safe.
  virtual absl::StatusOr<std::string> Call(const char* method, const std::string& request,
                                           absl::Duration timeout,
                                           const std::function<bool()>& interrupted) = 0;
};

// Makes a Transport over `fd`, a Unix socket connected to kilnd; the
// Transport owns `fd`. A C function, so that it can be found with dlsym.
extern "C" {
typedef Transport* (*MakeTransportFn)(int fd);
}

// The transport maker linked into this program; else the one in
// libkiln_grpc.so, loaded now from $KILN_GRPC_LIBRARY or next to the
// module this code is in. Unavailable, naming what was tried, when there
// is none.
absl::StatusOr<MakeTransportFn> TransportMaker();

// Called at static initialization by a linked-in transport.
bool RegisterTransportMaker(MakeTransportFn make);

}  // namespace kiln

#endif  // KILN_CLIENT_TRANSPORT_H_
