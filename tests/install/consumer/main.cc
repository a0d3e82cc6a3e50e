// Creates a one-rank communicator through the installed headers and library.
#include <weft/comm/communicator.h>

#include <cstdio>

int main() {
  auto comm = weft::Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  float x[3] = {1, 2, 3};
  absl::Status s =
      (*comm)->AllReduce(x, x, 3, weft::DataType::kFloat32, weft::ReduceOp::kSum).Wait();
  std::printf("%s %g %g %g\n", s.ok() ? "ok" : s.ToString().c_str(), x[0], x[1], x[2]);
  return s.ok() && x[2] == 3 ? 0 : 1;
}
