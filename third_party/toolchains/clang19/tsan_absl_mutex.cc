// TSan annotations for Debian's absl::Mutex and absl::CondVar.
//
// Debian's libabsl_synchronization.so is not built with TSan, so TSan sees
// neither its locks nor its atomics: every member that an absl::Mutex
// guards would look raced. Linked into every binary of --config=tsan (as
// its --custom_malloc, the one dependency Bazel adds to every cc_binary
// and cc_test), this file defines the public locking members itself — the
// executable's definitions take precedence over the shared library's —
// and around the real ones (dlsym RTLD_NEXT) tells TSan what each does
// with the __tsan_mutex_* interface, as Abseil's own source does when it
// is compiled with TSan. Memory accesses inside the real call (a
// Condition evaluated by whichever thread unlocks) are ignored by TSan,
// as with an instrumented Abseil.
//
// A call that releases the mutex and takes it back (Await, CondVar::Wait)
// is an unlock before and a lock around the real call. Readers' locks are
// announced as such; a CondVar waited on under a reader lock would be
// mis-announced as a writer's (Kiln waits only under writer locks).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace {

template <typename Function>
Function Real(const char* mangled) {
  void* symbol = dlsym(RTLD_NEXT, mangled);
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Function>(symbol);
}

// The mangled names below are Debian 12's (inline namespace debian3).
#define KILN_REAL(type, mangled)             \
  static const auto real = Real<type>(mangled)

constexpr unsigned kRead = __tsan_mutex_read_lock;

void Unlocked(void* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

}  // namespace

namespace absl {
inline namespace debian3 {

void Mutex::Lock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, kRead);
  real(this);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::TryLock() {
  KILN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  KILN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const unsigned flags = kRead | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::Unlock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&),
            "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, kRead);
  real(this, cond);
  __tsan_mutex_post_lock(this, kRead, 0);
}

// The ...WithTimeout members forward to this file's ...WithDeadline ones,
// not to the real ones: Abseil's call its own ...WithDeadline, which would
// then be this file's too, announcing the lock or unlock twice.
bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  return LockWhenWithDeadline(cond, absl::Now() + timeout);
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
            "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

void Mutex::Await(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Unlocked(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  return AwaitWithDeadline(cond, absl::Now() + timeout);
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
            "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Unlocked(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  KILN_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Unlocked(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  real(this, mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  return WaitWithDeadline(mu, absl::Now() + timeout);
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  KILN_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
            "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Unlocked(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  const bool timed_out = real(this, mu, deadline);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

}  // namespace debian3
}  // namespace absl

// The config's suppressions, compiled in (TSan asks every binary for them).
// Each is narrow and says why it cannot be a real race.
//
// absl::Status's reference count is decremented in Debian's uninstrumented
// libabsl_status (Status::UnrefNonInlined, called from the inline
// Status::Unref in status.h): TSan sees the last holder's delete but not the
// release that orders it after another thread's copy (an instrumented
// atomic increment in Status::Ref), and reports a race between the two.
// Where the inline Unref leaves no status.h frame, the delete is named by
// the library function that does it; a status with payloads (kilnd marks
// compiler failures with one, daemon/failure_kind.h) frees them there too.
extern "C" const char* __tsan_default_suppressions() {
  return "race:absl/status/status.h\n"
         "race:Status::UnrefNonInlined\n"
         "race:status_internal::Payload\n";
}
