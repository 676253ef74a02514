// Whether this binary is built with ASan or TSan. Under them some behaviour
// differs on purpose: their shadow memory needs terabytes of address space
// (no RLIMIT_AS), and their runtimes catch SIGBUS and exit instead of dying
// of it.
#ifndef KILN_COMMON_SANITIZERS_H_
#define KILN_COMMON_SANITIZERS_H_

namespace kiln {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_SANITIZED 1
#endif
#endif

#ifdef KILN_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace kiln

#endif  // KILN_COMMON_SANITIZERS_H_
