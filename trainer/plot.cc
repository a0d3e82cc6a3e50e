#include "plot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace weft::trainer {

absl::StatusOr<std::string> PlotLoss(const std::string& dir,
                                     const std::vector<std::pair<int, double>>& train,
                                     const std::vector<std::pair<int, double>>& val) {
  const std::string data = dir + "/loss.dat";
  const std::string script = dir + "/loss.gp";
  const std::string png = dir + "/loss.png";
  {
    std::ofstream out(data);
    out << "# step train_loss\n";
    for (const auto& [step, loss] : train) out << step << " " << loss << "\n";
    // gnuplot's second data set, after two blank lines.
    out << "\n\n# step val_loss\n";
    for (const auto& [step, loss] : val) out << step << " " << loss << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", data));
  }
  {
    std::ofstream out(script);
    out << "set terminal pngcairo size 900,540\n"
        << "set output '" << png << "'\n"
        << "set xlabel 'step'\nset ylabel 'cross-entropy (nats/byte)'\nset grid\n"
        << "set title 'weft-train loss'\n"
        << "plot '" << data << "' index 0 with lines title 'train', "
        << "'' index 1 with linespoints pt 7 title 'validation'\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", script));
  }
  std::string program = "gnuplot";
  char* argv[] = {program.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid;
  const int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot run gnuplot (", std::strerror(rc),
                                               "): install gnuplot-nox; data in ", data));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid(gnuplot) failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("gnuplot ", script, " failed (status ", status, "); data in ", data));
  }
  return png;
}

}  // namespace weft::trainer
