#include "client/fork_aware.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kiln {
namespace {

struct Registry {
  absl::Mutex mutex;  // held from BeforeFork until after the fork
  std::vector<ForkAware*> objects ABSL_GUARDED_BY(mutex);
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed: forks may come late
  return *instance;
}

// The calls in flight, as a counter that entering and leaving change
// without a lock, and a flag a fork raises. Entering increments, then
// checks the flag; a fork raises the flag, then waits for the count to
// fall: with sequentially consistent operations one of the two always sees
// the other. The mutex and condition variable are only for the waits, and
// the child makes them anew (threads of the parent may have been queued on
// them).
struct Gate {
  std::atomic<int> calls{0};
  std::atomic<bool> forking{false};
  std::mutex mutex;
  std::condition_variable changed;
  int forker_calls = 0;  // the forking thread's own guard (0 or 1), during a fork
};

Gate& gate() {
  static Gate* const instance = new Gate;
  return *instance;
}

thread_local int guard_depth = 0;  // this thread's nested ForkGuards

void Leave() {
  Gate& gate = kiln::gate();
  gate.calls.fetch_sub(1);
  if (gate.forking.load()) {  // the fork may be waiting for this call
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.changed.notify_all();
  }
}

void Enter() {
  Gate& gate = kiln::gate();
  while (true) {
    gate.calls.fetch_add(1);
    if (!gate.forking.load()) return;
    // A fork is being prepared: step back until it is done.
    Leave();
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.changed.wait(lock, [&gate] { return !gate.forking.load(); });
  }
}

// Calls drain first, then the objects stop their threads and take their
// locks, newest first: an object registers after what it uses (a
// CompiledGraph after its Client), and its threads may need that to stop.
void Prepare() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Gate& gate = kiln::gate();
  {
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.forker_calls = guard_depth > 0 ? 1 : 0;
    gate.forking.store(true);
    gate.changed.wait(lock, [&gate] { return gate.calls.load() == gate.forker_calls; });
  }
  registry().mutex.Lock();
  auto& objects = registry().objects;
  for (auto it = objects.rbegin(); it != objects.rend(); ++it) (*it)->BeforeFork();
}

void InParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (ForkAware* object : registry().objects) object->AfterForkInParent();
  registry().mutex.Unlock();
  Gate& gate = kiln::gate();
  {
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.forking.store(false);
  }
  gate.changed.notify_all();
}

void InChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (ForkAware* object : registry().objects) object->AfterForkInChild();
  registry().mutex.Unlock();
  // This thread is the child's only one: the calls in flight are its own.
  Gate& gate = kiln::gate();
  new (&gate.mutex) std::mutex;
  new (&gate.changed) std::condition_variable;
  gate.calls.store(gate.forker_calls);
  gate.forking.store(false);
}

// At load, so that a guard's path holds no check of its own.
const bool registered_at_fork = pthread_atfork(Prepare, InParent, InChild) == 0;

}  // namespace

ForkGuard::ForkGuard() {
  if (guard_depth++ == 0) Enter();
}

ForkGuard::~ForkGuard() {
  if (--guard_depth == 0) Leave();
}

ForkGuard::Released::Released() : depth_(guard_depth) {
  if (depth_ == 0) return;
  guard_depth = 0;
  Leave();
}

ForkGuard::Released::~Released() {
  if (depth_ == 0) return;
  Enter();
  guard_depth = depth_;
}

void ForkAware::RegisterForFork() {
  absl::MutexLock lock(&registry().mutex);
  registry().objects.push_back(this);
}

void ForkAware::UnregisterForFork() {
  absl::MutexLock lock(&registry().mutex);
  auto& objects = registry().objects;
  objects.erase(std::find(objects.begin(), objects.end(), this));
}

}  // namespace kiln
