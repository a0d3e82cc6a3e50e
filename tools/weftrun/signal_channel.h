// SignalChannel: the signals the launcher acts on, read in its poll loop instead of handled
// asynchronously.
//
// SIGCHLD says a rank ended; SIGINT, SIGTERM and SIGHUP are passed on to the ranks. They are
// blocked and read from a signalfd, so they wake poll() like any other event and no handler runs
// in the middle of the launcher's bookkeeping. Open() must run before the process starts any
// thread: threads inherit the mask, and a thread that left them unblocked would take the default
// action (death) in place of the launcher's.
//
// SIGPIPE is ignored, so a reader that went away shows up as EPIPE from write(). Ranks start
// with an empty mask and SIGPIPE at its default (spawn.cc restores both).
#pragma once

#include <vector>

#include "absl/status/status.h"

namespace weft::launcher {

class SignalChannel {
 public:
  SignalChannel() = default;
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;
  ~SignalChannel();

  absl::Status Open();

  // Readable (POLLIN) while signals are pending.
  int fd() const { return fd_; }

  // The pending signals in arrival order; several SIGCHLDs may arrive as one.
  std::vector<int> ReadPending();

  // Terminates the process by `signo` with its default action, so that the launcher's parent (a
  // shell running a loop, a batch system) sees the same cause of death as if it had not been
  // caught. Returns only if the signal's action does not terminate the process.
  void DieBy(int signo);

 private:
  int fd_ = -1;
};

}  // namespace weft::launcher
