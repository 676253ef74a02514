// Minimal logging to stderr (Debian's Abseil has no absl/log yet).
//
//   KILN_LOG(INFO) << "compiled " << key;
//   KILN_CHECK(fd >= 0) << "open failed";   // aborts: internal invariants only
//
// Thread-safe: each message is written with one write(2).
#ifndef KILN_COMMON_LOGGING_H_
#define KILN_COMMON_LOGGING_H_

#include <sstream>

namespace kiln {

enum class LogSeverity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Messages below this severity are dropped. Default: kInfo.
void SetMinLogSeverity(LogSeverity severity);
LogSeverity MinLogSeverity();
// Parses "debug", "info", "warning", "error". Returns false if unknown.
bool ParseLogSeverity(const std::string& text, LogSeverity* severity);

class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  ~LogMessage();  // writes the line; aborts after a kFatal message
  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Swallows the stream of a message below the minimum severity.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace kiln

#define KILN_SEVERITY_DEBUG ::kiln::LogSeverity::kDebug
#define KILN_SEVERITY_INFO ::kiln::LogSeverity::kInfo
#define KILN_SEVERITY_WARNING ::kiln::LogSeverity::kWarning
#define KILN_SEVERITY_ERROR ::kiln::LogSeverity::kError
#define KILN_SEVERITY_FATAL ::kiln::LogSeverity::kFatal

#define KILN_LOG(severity)                              \
  (KILN_SEVERITY_##severity < ::kiln::MinLogSeverity()) \
      ? (void)0                                         \
      : ::kiln::LogVoidify() &                          \
            ::kiln::LogMessage(KILN_SEVERITY_##severity, __FILE__, __LINE__).stream()

#define KILN_CHECK(condition)                                                                    \
  (condition) ? (void)0                                                                          \
              : ::kiln::LogVoidify() &                                                           \
                    ::kiln::LogMessage(::kiln::LogSeverity::kFatal, __FILE__, __LINE__).stream() \
                        << "Check failed: " #condition " "

#endif  // KILN_COMMON_LOGGING_H_
