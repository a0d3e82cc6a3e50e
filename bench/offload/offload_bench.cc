// offload_bench: how close a TileStream pass over disk arrays comes to the disk's own rate.
//
// (a) The disk alone: one scratch file written then read sequentially, in blocks of
//     --block_kib with --queue_depth blocks in flight, through the same IoEngine.
// (b) A read-write pass of a TileStream over --arrays disk arrays of --array_mib each, with a
//     trivial fn, repeated --passes times. Its I/O rate is (bytes read + bytes written) / time; the
//     fraction is the time (a)'s rates would take for the same bytes over the time it took.
// Files are opened with O_DIRECT where the filesystem allows it (buffered reads come from the page
// cache and overstate the disk); the output says which mode ran, and which engine.
//
//   offload_bench [--dir=/var/tmp/weft-offload-bench] [--array_mib=256] [--arrays=3]
//                 [--block_kib=1024] [--tile_blocks=4] [--queue_depth=16] [--passes=2]
//                 [--engine=auto|io_uring|threads]
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "weft/offload/aligned_buffer.h"
#include "weft/offload/io_engine.h"
#include "weft/offload/io_file.h"
#include "weft/offload/tiered_store.h"
#include "weft/offload/tile_stream.h"

namespace weft::offload {
namespace {

struct Flags {
  std::string dir = "/var/tmp/weft-offload-bench";
  size_t array_mib = 256;
  size_t arrays = 3;
  size_t block_kib = 1024;
  size_t tile_blocks = 4;
  int queue_depth = 16;
  int passes = 2;
  std::string engine = "auto";
};

absl::Status ParseFlags(int argc, char** argv, Flags* flags) {
  std::map<std::string, size_t*> sizes = {{"array_mib", &flags->array_mib},
                                          {"arrays", &flags->arrays},
                                          {"block_kib", &flags->block_kib},
                                          {"tile_blocks", &flags->tile_blocks}};
  std::map<std::string, int*> ints = {{"queue_depth", &flags->queue_depth},
                                      {"passes", &flags->passes}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("expected --name=value, got '", arg, "'"));
    }
    const std::string name = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    bool ok = true;
    if (name == "dir") {
      flags->dir = value;
    } else if (name == "engine") {
      flags->engine = value;
    } else if (sizes.contains(name)) {
      ok = absl::SimpleAtoi(value, sizes[name]);
    } else if (ints.contains(name)) {
      ok = absl::SimpleAtoi(value, ints[name]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value in ", arg));
  }
  if (flags->engine != "auto" && flags->engine != "io_uring" && flags->engine != "threads") {
    return absl::InvalidArgumentError("--engine is auto, io_uring or threads");
  }
  return absl::OkStatus();
}

IoEngineKind EngineKind(const std::string& name) {
  if (name == "io_uring") return IoEngineKind::kIoUring;
  if (name == "threads") return IoEngineKind::kThreads;
  return IoEngineKind::kAuto;
}

// Seconds to move `bytes` of `file` sequentially as `op`, `depth` blocks of `block` in flight.
absl::StatusOr<double> Sequential(IoEngine& engine, const IoFile& file, IoOp op, size_t bytes,
                                  size_t block, int depth) {
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < depth; ++i) buffers.emplace_back(block);
  uint64_t next = 0;
  const auto issue = [&](size_t buffer) {
    IoRequest r{op, &file, next, buffers[buffer].data(), block, buffer};
    next += block;
    return engine.Submit({r});
  };
  const absl::Time start = absl::Now();
  for (size_t b = 0; b < buffers.size() && next < bytes; ++b) {
    if (absl::Status s = issue(b); !s.ok()) return s;
  }
  std::vector<IoCompletion> done;
  while (engine.outstanding() > 0) {
    done.clear();
    if (absl::Status s = engine.Reap(absl::Seconds(60), &done); !s.ok()) return s;
    for (const IoCompletion& c : done) {
      if (!c.status.ok()) return c.status;
      if (next < bytes) {
        if (absl::Status s = issue(c.tag); !s.ok()) return s;
      }
    }
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

double MBps(double bytes, double seconds) { return bytes / seconds / 1e6; }

absl::Status Run(const Flags& flags) {
  const size_t block = flags.block_kib << 10;
  const size_t array_bytes = flags.array_mib << 20;
  const size_t total = flags.arrays * array_bytes;
  absl::StatusOr<std::unique_ptr<IoEngine>> engine =
      MakeIoEngine({.kind = EngineKind(flags.engine), .queue_depth = flags.queue_depth});
  if (!engine.ok()) return engine.status();

  TieredStoreOptions options;
  options.dir = flags.dir;
  options.block_bytes = block;
  options.tile_blocks = flags.tile_blocks;
  options.io = {.kind = EngineKind(flags.engine), .queue_depth = flags.queue_depth};
  absl::StatusOr<std::unique_ptr<TieredStore>> store = TieredStore::Create(options);
  if (!store.ok()) return store.status();

  // (a) The disk alone, over as many bytes as the arrays hold together.
  double write_s, read_s;
  {
    absl::StatusOr<std::unique_ptr<IoFile>> file =
        IoFile::Create(flags.dir + "/raw.bench", /*direct=*/true);
    if (!file.ok()) return file.status();
    if (absl::Status s = (*file)->Reserve(total); !s.ok()) return s;
    absl::StatusOr<double> w =
        Sequential(**engine, **file, IoOp::kWrite, total, block, flags.queue_depth);
    if (!w.ok()) return w.status();
    absl::StatusOr<double> r =
        Sequential(**engine, **file, IoOp::kRead, total, block, flags.queue_depth);
    if (!r.ok()) return r.status();
    write_s = *w;
    read_s = *r;
    std::printf("engine   %s\nmode     %s\ndir      %s\n", (*engine)->description().c_str(),
                (*file)->mode().c_str(), flags.dir.c_str());
    std::printf("(a) disk sequential, %zu KiB blocks, queue depth %d, %.0f MiB:\n", flags.block_kib,
                flags.queue_depth, total / 1048576.0);
    std::printf("    write %8.1f MB/s   read %8.1f MB/s\n", MBps(total, write_s),
                MBps(total, read_s));
  }

  // (b) Read-write passes over the arrays with a trivial fn.
  std::vector<StreamArray> arrays;
  for (size_t a = 0; a < flags.arrays; ++a) {
    const std::string name = absl::StrCat("array", a);
    if (absl::Status s = (*store)->Add(name, Tier::kDisk, array_bytes / sizeof(float)); !s.ok()) {
      return s;
    }
    arrays.push_back({name, StreamAccess::kReadWrite});
  }
  std::printf("(b) stream pass, engine %s, mode %s, %zu x %zu MiB read-write, tiles of %zu KiB:\n",
              std::string((*store)->engine().name()).c_str(), (*store)->io_mode().c_str(),
              flags.arrays, flags.array_mib, (flags.block_kib * flags.tile_blocks));
  TileStream stream(store->get(), arrays);
  for (int pass = 0; pass < flags.passes; ++pass) {
    const IoCounters before = (*store)->counters();
    const absl::Time start = absl::Now();
    absl::Status s = stream.Run([](const StreamTile& tile) {
      for (float* data : tile.data) data[0] += 1.0f;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const IoCounters& after = (*store)->counters();
    const double read = static_cast<double>(after.bytes_read - before.bytes_read);
    const double written = static_cast<double>(after.bytes_written - before.bytes_written);
    // What the disk alone would take for these bytes, at (a)'s rates.
    const double disk_s = read / (total / read_s) + written / (total / write_s);
    std::printf(
        "    pass %d: %.2f s, read %.0f MiB + written %.0f MiB = %8.1f MB/s, %.0f%% of the disk; "
        "blocked on I/O %.2f s\n",
        pass, seconds, read / 1048576, written / 1048576, MBps(read + written, seconds),
        100 * disk_s / seconds, absl::ToDoubleSeconds(after.blocked - before.blocked));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace weft::offload

int main(int argc, char** argv) {
  weft::offload::Flags flags;
  absl::Status s = weft::offload::ParseFlags(argc, argv, &flags);
  if (s.ok()) s = weft::offload::Run(flags);
  if (!s.ok()) {
    std::fprintf(stderr, "offload_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
