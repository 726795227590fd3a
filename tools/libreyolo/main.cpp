// libreyolo: one binary, many subcommands. This file only dispatches.
#include "commands.h"
#include "core/error.h"
#include "core/system_info.h"
#include "models/family.h"

#include <fmt/format.h>

#include <unistd.h>

#include <csignal>

#include <array>
#include <cstdlib>
#include <exception>
#include <string_view>

#ifndef LIBREYOLO_GOMP_SPINCOUNT
#define LIBREYOLO_GOMP_SPINCOUNT "777"
#endif

namespace {

using Handler = int (*)(const libreyolo::cli::Arguments&);

struct Subcommand {
  std::string_view name;
  Handler handler;
  std::string_view summary;
};

constexpr std::array<Subcommand, 10> kSubcommands{{
    {"train", libreyolo::cli::run_train, "train a detector: libreyolo train model={model} data=coco8 epochs=10"},
    {"val", libreyolo::cli::run_val, "COCO mAP of a model: libreyolo val model=runs/train/exp/weights/best.pt data=coco8"},
    {"predict", libreyolo::cli::run_predict, "detect on images: libreyolo predict model=best.pt source=images/"},
    {"profile", libreyolo::cli::run_profile, "where the step time goes: libreyolo profile run coco8 --batch 8 --imgsz 320"},
    {"data", libreyolo::cli::run_data, "inspect a dataset: libreyolo data check data=coco128"},
    {"info", libreyolo::cli::run_info, "layers, parameters and GFLOPs: libreyolo info model={model} imgsz=640"},
    {"cfg", libreyolo::cli::run_cfg, "print every key with its resolved value: libreyolo cfg model={model}"},
    {"checks", libreyolo::cli::run_checks, "versions, CUDA stack, GPUs and CPU threads of this build"},
    {"version", libreyolo::cli::run_checks, "same as checks"},
    {"man-options", libreyolo::cli::run_man_options, "(maintainers) troff OPTIONS section for a command"},
}};

// The OpenMP wait policy of the commands that compute (train, val, predict, profile): libgomp's
// threads spin GOMP_SPINCOUNT times at each barrier before they sleep (default 300000). Alone that
// saves a wake-up per parallel region; when another process wants the same cores, a spinning
// thread burns the slice its descheduled partner needs (bench/contention.py). libgomp reads its
// environment once, in its constructor, before main() and even before .preinit_array can change
// the environment; so the process starts itself again with the variable set. A user's
// OMP_WAIT_POLICY or GOMP_SPINCOUNT always wins.
void choose_openmp_wait_policy(char** argv, std::string_view command) {
  if (command != "train" && command != "val" && command != "predict" && command != "profile") return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  ::setenv("GOMP_SPINCOUNT", LIBREYOLO_GOMP_SPINCOUNT, 0);
  ::execv("/proc/self/exe", argv);  // returns only on failure: go on with libgomp's default
  ::unsetenv("GOMP_SPINCOUNT");
}

void print_usage() {
  fmt::print("usage: libreyolo <command> [key=value ...]\n\ncommands:\n");
  // The examples' model comes from the registry ({model} in a summary).
  const std::string model = libreyolo::models::example_model();
  for (const auto& command : kSubcommands) {
    fmt::print("  {:<12} {}\n", command.name, fmt::format(fmt::runtime(command.summary), fmt::arg("model", model)));
  }
  fmt::print("\n'libreyolo <command> --help' lists a command's keys.\n");
}

}  // namespace

int main(int argc, char** argv) {
  libreyolo::cli::Arguments arguments(argv + 1, argv + argc);
  // LibreYOLO and Ultralytics accept a leading task word: `libreyolo detect train ...`.
  if (!arguments.empty() && arguments.front() == "detect") arguments.erase(arguments.begin());
  if (arguments.empty() || arguments.front() == "help" || arguments.front() == "--help" || arguments.front() == "-h") {
    print_usage();
    return arguments.empty() ? 2 : 0;
  }
  if (arguments.front() == "--version") arguments.front() = "version";

  const std::string name = arguments.front();
  arguments.erase(arguments.begin());
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which the writers report as they
  // do a full disk (temporary file removed, status.json "failed", exit 1), instead of SIGXFSZ killing
  // the process mid-write. Inherited by the re-exec below and by the ranks a launcher starts.
  ::signal(SIGXFSZ, SIG_IGN);
  libreyolo::choose_intra_op_threads();
  choose_openmp_wait_policy(argv, name);
  for (const auto& command : kSubcommands) {
    if (command.name != name) continue;
    try {
      return command.handler(arguments);
    } catch (...) {
      return libreyolo::report_error(std::current_exception());
    }
  }
  fmt::print(stderr, "libreyolo: error: unknown command '{}'. Commands: ", name);
  for (std::size_t i = 0; i < kSubcommands.size(); ++i) {
    fmt::print(stderr, "{}{}", i ? ", " : "", kSubcommands[i].name);
  }
  fmt::print(stderr, ". See 'libreyolo --help'.\n");
  return static_cast<int>(libreyolo::ExitCode::usage);
}
