// Surviving fork() in pre-fork servers (gunicorn, uvicorn workers,
// multiprocessing): a model prepared in the parent works in every child,
// even when other threads of the parent were running it at the fork.
//
// Two mechanisms, both run by one pthread_atfork registration (so Python's
// os.fork() runs them too):
//
// - Calls in flight. Running an artifact takes locks and changes counts
//   that a child must never see half-changed: OpenBLAS's thread count held
//   at one while a GEMM runs, the pool's current loop, the GEMM and
//   convolution ways being timed, oneDNN's primitive caches, OpenBLAS's and
//   oneDNN's own internals. Every such call holds a ForkGuard; before a
//   fork the registry waits until no call is in flight and holds new ones
//   back until the fork is done. The child therefore starts with every one
//   of those locks free and every count at rest. A call that waits on
//   something outside the process (an RPC to kilnd) steps out of its guard
//   for the wait (ForkGuard::Released), holding no Kiln lock meanwhile.
//
// - Objects that own threads or a gRPC channel derive from ForkAware:
//   after the calls have drained, the registry calls BeforeFork on every
//   live one (newest first: a CompiledGraph's thread may need its Client to
//   finish) — stop and join its threads, then take its locks so the child
//   sees consistent state — and then AfterForkInParent or AfterForkInChild:
//   release the locks and start the threads again. A child also drops the
//   parent's channels unused and connects afresh (or, once its parent used
//   gRPC, says that it cannot).
//
// What else the client holds is safe by construction: the Python package's
// write-back pool is taken only with the GIL held (which the forking thread
// holds), per-thread scratch belongs to the threads that survive, and the
// traffic recorder's counts are relaxed atomics written inside calls.
#ifndef KILN_CLIENT_FORK_AWARE_H_
#define KILN_CLIENT_FORK_AWARE_H_

namespace kiln {

// Held while a thread runs Kiln code that a fork must not cut in two (see
// above). Cheap: two atomic operations when no fork is under way; nested
// guards on one thread are free. Blocks while a fork is being prepared.
class ForkGuard {
 public:
  ForkGuard();
  ~ForkGuard();
  ForkGuard(const ForkGuard&) = delete;
  ForkGuard& operator=(const ForkGuard&) = delete;

  // Inside a guard: a wait on something outside the process, during which
  // a fork may go ahead. The thread must hold no Kiln lock while in it.
  // Does nothing on a thread that holds no guard.
  class Released {
   public:
    Released();
    ~Released();
    Released(const Released&) = delete;
    Released& operator=(const Released&) = delete;

   private:
    const int depth_;
  };
};

class ForkAware {
 public:
  virtual void BeforeFork() = 0;
  virtual void AfterForkInParent() = 0;
  virtual void AfterForkInChild() = 0;

 protected:
  ForkAware() = default;
  ForkAware(const ForkAware&) = delete;
  ForkAware& operator=(const ForkAware&) = delete;
  virtual ~ForkAware() = default;

  // The derived class calls these last in its constructor and first in its
  // destructor: forks in between see a whole object.
  void RegisterForFork();
  void UnregisterForFork();
};

}  // namespace kiln

#endif  // KILN_CLIENT_FORK_AWARE_H_
