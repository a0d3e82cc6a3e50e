#include "signal_channel.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace weft::launcher {
namespace {

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, signo);
  return set;
}

}  // namespace

SignalChannel::~SignalChannel() {
  if (fd_ >= 0) close(fd_);
}

absl::Status SignalChannel::Open() {
  const sigset_t set = HandledSignals();
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    return absl::InternalError(absl::StrCat("blocking signals for the signalfd: ", strerror(rc)));
  }
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) return absl::InternalError(absl::StrCat("signalfd: ", strerror(errno)));
  struct sigaction action = {};
  action.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &action, nullptr);
  // An inherited SIG_IGN for SIGCHLD would have the kernel reap the ranks before we learn how
  // they ended.
  action.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &action, nullptr);
  return absl::OkStatus();
}

std::vector<int> SignalChannel::ReadPending() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (read(fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    signals.push_back(static_cast<int>(info.ssi_signo));
  }
  return signals;
}

void SignalChannel::DieBy(int signo) {
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigaction(signo, &default_action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  // Raise before unblocking: the pending signal is delivered the moment the mask allows it.
  raise(signo);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace weft::launcher
