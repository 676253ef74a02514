#include "client/fork_aware.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
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

// Newest first: an object registers after what it uses (a CompiledGraph
// after its Client), and its threads may need that to stop.
void Prepare() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  registry().mutex.Lock();
  auto& objects = registry().objects;
  for (auto it = objects.rbegin(); it != objects.rend(); ++it) (*it)->BeforeFork();
}

void InParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (ForkAware* object : registry().objects) object->AfterForkInParent();
  registry().mutex.Unlock();
}

void InChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (ForkAware* object : registry().objects) object->AfterForkInChild();
  registry().mutex.Unlock();
}

}  // namespace

void ForkAware::RegisterForFork() {
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(Prepare, InParent, InChild); });
  absl::MutexLock lock(&registry().mutex);
  registry().objects.push_back(this);
}

void ForkAware::UnregisterForFork() {
  absl::MutexLock lock(&registry().mutex);
  auto& objects = registry().objects;
  objects.erase(std::find(objects.begin(), objects.end(), this));
}

}  // namespace kiln
