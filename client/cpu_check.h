// Whether this CPU can run an artifact's code. An artifact compiled for a
// target whose instructions the CPU lacks would die of SIGILL somewhere in
// kiln_run, so the loader checks first and refuses it.
//
// What an artifact needs: its target's features (x86-64-v3 = AVX2, BMI1/2,
// FMA, F16C, LZCNT, MOVBE; x86-64-v4 = v3 + AVX512F/BW/CD/DQ/VL); for
// native, the features of the CPU it was built on (its toolchain's
// "+feature" list) that CpuFeatureNames() knows.
#ifndef KILN_CLIENT_CPU_CHECK_H_
#define KILN_CLIENT_CPU_CHECK_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/artifact.pb.h"

namespace kiln {

// The features this file can test, by their clang names ("avx512f").
const std::vector<std::string>& CpuFeatureNames();

// Those of CpuFeatureNames() that this CPU has (__builtin_cpu_supports).
const std::set<std::string>& HostCpuFeatures();

// The features `metadata`'s code needs, sorted (see above).
std::vector<std::string> RequiredCpuFeatures(const kiln::v1::ArtifactMetadata& metadata);

// OK when a CPU with `cpu_features` can run `metadata`'s code; else
// FailedPrecondition naming the target and the missing features.
absl::Status CheckCpuCanRun(const kiln::v1::ArtifactMetadata& metadata,
                            const std::set<std::string>& cpu_features);

}  // namespace kiln

#endif  // KILN_CLIENT_CPU_CHECK_H_
