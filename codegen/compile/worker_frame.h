// Length-prefixed framing of the compile-worker protocol (grammar at the top
// of worker.proto), and the worker's out-of-memory exit code. Header-only and free of LLVM: both
// the worker and WorkerCompiler (in kilnd) use it. Thread-safe (pure functions).
#ifndef KILN_CODEGEN_COMPILE_WORKER_FRAME_H_
#define KILN_CODEGEN_COMPILE_WORKER_FRAME_H_

#include <cstdint>
#include <string>

namespace kiln {

inline constexpr int kFrameHeaderBytes = 4;

// Larger frames are refused rather than allocated: a corrupt length must not
// make either side allocate gigabytes. Kernels' .so files are tens of KB.
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

// The exit code of a worker that could not allocate memory (its
// --memory_limit_bytes, RLIMIT_AS, is reached): kilnd reports the limit
// instead of a crash. Not 1 (flag and start-up errors) or 127 (exec).
inline constexpr int kWorkerOutOfMemoryExitCode = 3;

// The 4-byte little-endian length that precedes a payload.
inline std::string FrameHeader(uint32_t payload_bytes) {
  std::string header(kFrameHeaderBytes, '\0');
  for (int i = 0; i < kFrameHeaderBytes; ++i) {
    header[i] = static_cast<char>((payload_bytes >> (8 * i)) & 0xff);
  }
  return header;
}

// The payload length stored in `header` (kFrameHeaderBytes bytes).
inline uint32_t ParseFrameHeader(const char* header) {
  uint32_t length = 0;
  for (int i = 0; i < kFrameHeaderBytes; ++i) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(header[i])) << (8 * i);
  }
  return length;
}

}  // namespace kiln

#endif  // KILN_CODEGEN_COMPILE_WORKER_FRAME_H_
