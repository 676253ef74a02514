// The codegen version: part of every cache key (cache/key.cc), apart from
// the pipeline so that keying links no pass.
#ifndef KILN_CODEGEN_VERSION_H_
#define KILN_CODEGEN_VERSION_H_

namespace kiln {

// Incremented whenever generated code changes for the same inputs. Part of
// every cache key.
inline constexpr int kCodegenVersion = 31;

}  // namespace kiln

#endif  // KILN_CODEGEN_VERSION_H_
