// Surviving fork() in pre-fork servers (gunicorn, uvicorn workers): a model
// prepared in the parent must work in every child.
//
// Threads do not survive fork, and a gRPC channel must not be used on both
// sides of one. Objects that own either derive from ForkAware: around each
// fork() the registry calls BeforeFork on every live one — stop and join
// its threads (one left waiting on a mutex would stay queued on it in the
// child, where it does not exist), then take its locks so the child sees
// consistent state — and then AfterForkInParent or AfterForkInChild:
// release the locks and start the threads again. A child also drops the
// parent's channels unused and connects afresh. Registered through
// pthread_atfork, so Python's os.fork() runs it too. BeforeFork runs newest
// object first (a CompiledGraph's thread may need its Client to finish).
//
// Fork while other threads of the program are inside Kiln is not
// supported: a thread blocked on one of these locks at the fork would stay
// queued on it in the child. Pre-fork servers fork from one thread.
#ifndef KILN_CLIENT_FORK_AWARE_H_
#define KILN_CLIENT_FORK_AWARE_H_

namespace kiln {

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
