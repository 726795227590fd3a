// `libreyolo train key=value ...`: resolve the configuration, prepare the run folder, train.
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config.h"
#include "models/family.h"
#include "models/checkpoint.h"
#include "eval/task.h"
#include "core/error.h"
#include "core/log.h"
#include "core/option_help.h"
#include "core/run_dir.h"
#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/training_data.h"
#include "core/system_info.h"
#include "cuda/cuda_info.h"
#include "dist/collectives.h"
#include "dist/gradient_sync.h"
#include "dist/launch_env.h"
#include "dist/process_group.h"
#include "dist/spawn.h"
#include "profile/profiler_hook.h"
#include "train/run_files.h"
#include "train/setup.h"
#include "train/trainer.h"

#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

namespace libreyolo::cli {

namespace {

void require_data_argument(const std::string& data) {
  if (data.empty()) {
    throw UsageError("data= is required for train: give a data YAML (data=my_data.yaml) or a built-in dataset "
                     "(data=coco8, coco128, coco)");
  }
}

constexpr const char* kRunDirKey = "libreyolo/run_dir";
constexpr const char* kRunDirReportVariable = "LIBREYOLO_RUN_DIR_REPORT";
// How long a rank that lost contact waits for rank 0 to write its own failure into status.json.
constexpr auto kRankZeroGrace = std::chrono::seconds(3);

// The processes per machine a command line asks libreyolo to start: nproc_per_node=, or one per
// device of a list (device=0,1).
int local_processes(const config::Config& config) {
  const auto devices = train::device_list(config.get_text("device"));
  const int nproc = static_cast<int>(config.get_int("nproc_per_node"));
  if (devices.size() > 1 && nproc > 1 && nproc != static_cast<int>(devices.size())) {
    throw UsageError(fmt::format("device={} names {} devices but nproc_per_node={}: give one of them, or as many devices as "
                                 "processes", config.get_text("device"), devices.size(), nproc));
  }
  return devices.size() > 1 ? static_cast<int>(devices.size()) : nproc;
}

// dist_backend=auto: NCCL for CUDA devices (Gloo when this build has no NCCL), Gloo on the CPU.
// An explicit nccl needs CUDA devices and a build with NCCL: exit 2 otherwise.
std::string backend_for(const config::Config& config, const c10::Device& device) {
  const std::string backend = config.get_text("dist_backend");
  if (backend == "auto") return device.is_cuda() && dist::nccl_compiled() ? "nccl" : "gloo";
  if (backend == "nccl" && !device.is_cuda()) {
    throw UsageError(fmt::format("dist_backend=nccl carries CUDA tensors only, and device={} is the CPU: use dist_backend=gloo "
                                 "(or auto), or GPUs (device=0,1)", config.get_text("device")));
  }
  if (backend == "nccl" && !dist::nccl_compiled()) {
    throw UsageError("dist_backend=nccl: this libreyolo was built without NCCL (a CPU-only build, or no nccl.h found); use "
                     "dist_backend=gloo, which also carries CUDA tensors");
  }
  return backend;
}

// `libreyolo train device=0,1` / `nproc_per_node=2` / `nnodes=2 node_rank=..`: this process
// starts the ranks of this machine with torchrun's variables and waits for them.
int launch_ranks(const Arguments& arguments, const config::Config& config, int nproc) {
  const int nnodes = static_cast<int>(config.get_int("nnodes"));
  const int node_rank = static_cast<int>(config.get_int("node_rank"));
  if (node_rank >= nnodes) {
    throw UsageError(fmt::format("node_rank={} with nnodes={}: node_rank counts from 0 to nnodes-1", node_rank, nnodes));
  }
  const int world = nproc * nnodes;
  (void)train::per_rank_batch(static_cast<int>(config.get_int("batch")), world);  // indivisible: exit 2 before any start
  // every rank's device must exist: exit 2 here, not N failures later
  for (int local = 0; local < nproc; ++local) {
    (void)backend_for(config, train::resolve_device(config.get_text("device"), local));
  }
  dist::SpawnOptions options;
  options.nproc = nproc;
  options.nnodes = nnodes;
  options.node_rank = node_rank;
  options.master_addr = config.get_text("master_addr");
  options.master_port = static_cast<int>(config.get_int("master_port"));
  if (options.master_port == 0 && nnodes > 1) options.master_port = 29500;  // the other machines must know it
  std::vector<std::string> argv{std::filesystem::read_symlink("/proc/self/exe").string(), "train"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  log::info("Starting {} data-parallel process{} on this machine (world size {}{})", nproc, nproc > 1 ? "es" : "", world,
            nnodes > 1 ? fmt::format(", node {} of {}", node_rank, nnodes) : "");
  // Rank 0 names its run folder in this file, so that the launcher can set status.json right when
  // rank 0 itself cannot (killed): otherwise it would say "running" for ever.
  const std::filesystem::path report = std::filesystem::temp_directory_path() / fmt::format("libreyolo-run-{}", ::getpid());
  ::setenv(kRunDirReportVariable, report.c_str(), 1);
  options.on_failure = [&report](const std::string& message, int failed_rank) {
    std::ifstream in(report);
    std::string run_dir;
    if (std::getline(in, run_dir) && !run_dir.empty()) train::mark_run_failed(run_dir, message, failed_rank);
  };
  const int code = dist::spawn_ranks(argv, options);
  ::unsetenv(kRunDirReportVariable);
  std::error_code ignored;
  std::filesystem::remove(report, ignored);
  return code;
}

// A data-parallel rank's CPU threads: the machine's cores shared by its ranks (torchrun sets
// OMP_NUM_THREADS=1 instead; a user's OMP_NUM_THREADS wins).
void share_cpu_threads(const dist::LaunchEnv& env) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  at::set_num_threads(std::max(1, usable_cpus() / std::max(1, env.local_world_size)));
}

// A collective that failed because a peer went away (killed, crashed, or its machine lost) says so
// in a line a user reads, instead of the transport's "Read error ... Connection reset by peer".
[[noreturn]] void rethrow_lost_peer(const dist::LaunchEnv& env) {
  try {
    throw;
  } catch (const std::exception& error) {
    if (const auto message = dist::lost_peer_message(error.what(), env.rank, env.world_size)) throw RuntimeError(*message);
    throw;
  }
}

// A key the ranks of this run share and no other run has (rank 0 draws it), with the machine's
// first rank: cache=ram's shared-memory copy is named from it.
std::string run_nonce(dist::Group& group, const dist::LaunchEnv& env) {
  constexpr const char* kKey = "libreyolo/run_nonce";
  if (env.rank == 0) {
    std::random_device random;
    const std::string nonce = fmt::format("{:08x}{:08x}", random(), random());
    group.store().set(kKey, std::vector<std::uint8_t>(nonce.begin(), nonce.end()));
  }
  const auto value = group.store().get(kKey);
  return fmt::format("{}-{}", std::string(value.begin(), value.end()), env.rank - env.local_rank);
}

// Rank 0 tells the others which run folder it chose ("" when it failed before training).
void publish_run_dir(dist::Group& group, const std::string& run_dir) {
  group.store().set(kRunDirKey, std::vector<std::uint8_t>(run_dir.begin(), run_dir.end()));
}

// A model that cannot take imgsz (a DETR's queries outnumber its encoder's positions), refused
// before the data scan and the run folder; a checkpoint whose name does not say its family is
// checked at its first forward.
void check_input_size(const config::Config& config) {
  const models::ModelName name = models::parse_model_name(config.get_text("model"));
  if (name.family.empty()) return;
  const models::Family& family = models::family(name.family);
  const auto size = config.get_image_size("imgsz");
  const int image_size = std::max(size.height, size.width);
  if (std::string obstacle = family.input_size_obstacle(name.size, image_size); !obstacle.empty()) throw UsageError(obstacle);
  if (!config.get_bool("multi_scale")) return;
  if (const auto scales = family.batch_scales(name.size, image_size); scales && !scales->sizes.empty()) {
    const int smallest = *std::min_element(scales->sizes.begin(), scales->sizes.end());
    if (std::string obstacle = family.input_size_obstacle(name.size, smallest); !obstacle.empty()) {
      throw UsageError(fmt::format("multi_scale=true draws batches down to {} px at imgsz={}, and there {} (or multi_scale=false)",
                                   smallest, image_size, obstacle));
    }
  }
}

// The run folder of this command: the checkpoint's for resume, else a new runs/train/<name>.
// `created`: made by this command (removed again when training never starts).
std::filesystem::path prepare_run_dir(const config::Config& config, bool resume, bool& created) {
  std::filesystem::path run_dir;
  created = false;
  if (resume) {  // continue in the checkpoint's run folder: runs/train/exp/weights/last.pt -> runs/train/exp
    run_dir = std::filesystem::path(config.get_text("model")).parent_path().parent_path();
    if (run_dir.empty() || !std::filesystem::is_directory(run_dir)) {
      run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), false);
      created = true;
    }
  } else {
    const bool existed = config.get_bool("exist_ok") &&
                         std::filesystem::exists(std::filesystem::path(config.get_text("project")) / config.get_text("name"));
    run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), config.get_bool("exist_ok"));
    created = !existed;
  }
  return run_dir;
}

// A resume's command-line overrides (epochs=3 ...) go into the run's train_config.yaml, so that a
// later resume keeps them; the run's own model= and resume= stay as they were.
void keep_overrides(const std::filesystem::path& run_config, const config::Config& config) {
  config::Config saved = config;
  try {
    const YAML::Node before = YAML::LoadFile(run_config.string());
    for (const char* key : {"model", "resume"}) {
      if (before[key] && before[key].IsScalar()) saved.set(key, before[key].as<std::string>(), config::Source::cfg_file);
    }
  } catch (const YAML::Exception& error) {
    log::warn("{}: not updated with this resume's settings ({})", run_config.string(), error.what());
    return;
  }
  write_file_atomically(run_config, saved.to_yaml());
}

// The training of rank 0 (or of the only process): the run folder, its lock and its files.
int train_in_run_dir(const config::Config& config, dist::Group* group, dist::GroupCollectives* collectives) {
  const bool resume = config.get_text("resume") == "true";
  bool created = false;
  const std::filesystem::path run_dir = prepare_run_dir(config, resume, created);
  const RunLock lock(run_dir);
  for (const auto& folder : {run_dir, run_dir / "weights"}) {
    if (const int stale = remove_stale_temporaries(folder)) log::info("Removed {} temporary file(s) a killed run left in {}", stale, folder.string());
  }
  if (!resume) write_file_atomically(run_dir / "train_config.yaml", config.to_yaml());
  else keep_overrides(run_dir / "train_config.yaml", config);
  log::info("Logging results to {}", run_dir.string());
  if (group) publish_run_dir(*group, run_dir.string());
  if (const char* report = std::getenv(kRunDirReportVariable); report != nullptr && group) {
    write_file_atomically(report, std::filesystem::absolute(run_dir).string() + "\n");  // for our launcher (launch_ranks)
  }
  train::HookList hooks;
  if (auto profiler = profile::make_profiler_hook(config, collectives)) hooks.add(std::move(profiler));
  if (group) hooks.add(std::make_unique<dist::GradientSync>(*group));
  train::TrainOutcome outcome;
  try {
    outcome = train::run_training(config, run_dir, hooks, collectives);
  } catch (...) {
    // A command that fails before training starts (no GPU, batch=0, an empty image folder)
    // leaves no run folder behind.
    std::error_code ignored;
    if (created && !std::filesystem::exists(run_dir / "weights")) std::filesystem::remove_all(run_dir, ignored);
    throw;
  }
  if (config.get_bool("json")) fmt::print("{}\n", outcome.result.dump());
  return outcome.exit_code;
}

// Ranks other than 0 train in rank 0's run folder and write nothing there.
int train_as_other_rank(const config::Config& config, dist::Group& group, dist::GroupCollectives& collectives) {
  const auto value = group.store().get(kRunDirKey);  // waits up to dist_timeout
  const std::string run_dir(value.begin(), value.end());
  if (run_dir.empty()) throw RuntimeError("rank 0 failed before training started (its message says why); this rank stops too");
  train::HookList hooks;
  if (auto profiler = profile::make_profiler_hook(config, &collectives)) hooks.add(std::move(profiler));
  hooks.add(std::make_unique<dist::GradientSync>(group));
  try {
    return train::run_training(config, run_dir, hooks, &collectives).exit_code;
  } catch (const std::exception& error) {
    // Rank 0 killed under a launcher other than ours (torchrun, srun): nobody else would end
    // status.json's "running". A live rank 0 records its own failure within the grace period.
    if (const auto lost = dist::lost_peer_message(error.what(), collectives.rank(), collectives.world_size())) {
      std::this_thread::sleep_for(kRankZeroGrace);
      train::mark_run_lost(run_dir, *lost + "; rank 0 recorded no failure of its own: it probably was killed",
                           collectives.rank());
    }
    throw;
  }
}

// What a resume's command line changes against the run's train_config.yaml. The data, the image
// size, the batch and single_cls fix what an epoch and its batches are: a resume continues at a
// batch of an epoch, so a change there is refused (exit 2). Any other change is taken from here on,
// and said.
void check_resume_changes(const config::Config& run, const config::Config& resumed, const std::filesystem::path& run_config) {
  static constexpr std::array<std::string_view, 4> kFixed{"data", "imgsz", "batch", "single_cls"};
  for (const auto& spec : resumed.table()) {
    if (!(spec.commands & config::command_train) || resumed.source(spec.name) != config::Source::command_line) continue;
    if (spec.name == "model" || spec.name == "resume") continue;
    const std::string before = config::format_value(run.value(spec.name)), after = config::format_value(resumed.value(spec.name));
    if (before == after) continue;
    if (std::find(kFixed.begin(), kFixed.end(), spec.name) != kFixed.end()) {
      throw UsageError(fmt::format("resume=true continues the run as it was, and {}={} differs from its {}={} ({}): leave {}= "
                                   "out to resume, or start a new training from its weights (model={} without resume=true)",
                                   spec.name, after, spec.name, before, run_config.string(), spec.name,
                                   resumed.get_text("model")));
    }
    log::warn("resume=true: {}={} replaces the run's {} from here on", spec.name, after, before);
  }
}

}  // namespace

int run_train(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", models::command_help(config::command_train));
    return 0;
  }
  // Started as one rank of several (torchrun, srun, or our own launcher): then this process trains
  // its share; otherwise it may start the ranks itself.
  const dist::LaunchEnv env = dist::resolve_launch_env(dist::process_environment());
  Arguments given(arguments);
  auto config = models::parse_arguments(config::command_train, given);
  log::set_quiet(config.get_bool("quiet") || (env.distributed() && env.rank != 0));  // rank 0 speaks for the run
  if (const std::string resume = config.get_text("resume"); resume != "true" && resume != "false") {
    // resume=runs/train/exp/weights/last.pt (Ultralytics): model= that checkpoint, resume=true
    given.insert(given.end(), {"model=" + resume, "resume=true"});
    config = models::parse_arguments(config::command_train, given);
  }
  if (config.get_text("resume") == "true") {
    // The run's own train_config.yaml first, then what this command line says.
    const auto run_config = std::filesystem::path(config.get_text("model")).parent_path().parent_path() / "train_config.yaml";
    if (!std::filesystem::exists(run_config)) {
      throw UsageError(fmt::format("resume=true: {} not found; give model=runs/train/<run>/weights/last.pt",
                                   run_config.string()));
    }
    Arguments with_run{"cfg=" + run_config.string()};
    with_run.insert(with_run.end(), given.begin(), given.end());
    config = models::parse_arguments(config::command_train, with_run);
    check_resume_changes(models::parse_arguments(config::command_train, Arguments{"cfg=" + run_config.string()}), config,
                         run_config);
  }
  for (const auto& note : config.notes()) log::warn("{}", note);  // shown under quiet=true too
  require_data_argument(config.get_text("data"));
  if (config.get_bool("dry_run")) {  // LibreYOLO: print the resolved configuration, load nothing
    fmt::print("{}", config.to_yaml());
    return 0;
  }
  // A wrong data=, batch= or device= fails here, before a run folder is made or a process started.
  (void)eval::task_of(config).load_spec(config.get_text("data"));
  (void)train::per_rank_batch(static_cast<int>(config.get_int("batch")), 1);
  check_input_size(config);
  if (!env.distributed() && local_processes(config) <= 1) (void)train::resolve_device(config.get_text("device"), std::nullopt);
  if (!env.distributed()) {
    if (const int nproc = local_processes(config); nproc * config.get_int("nnodes") > 1) return launch_ranks(arguments, config, nproc);
  }
  std::unique_ptr<dist::Group> group;
  std::unique_ptr<dist::GroupCollectives> collectives;
  if (env.distributed()) {
    (void)train::per_rank_batch(static_cast<int>(config.get_int("batch")), env.world_size);
    const c10::Device device = train::resolve_device(config.get_text("device"), env.local_rank);
    if (device.is_cpu()) share_cpu_threads(env);
    if (device.is_cuda()) cuda::set_current_device(device.index());
    const std::string backend = backend_for(config, device);
    group = std::make_unique<dist::Group>(env, dist::GroupOptions{.backend = backend,
                                                                  .timeout = std::chrono::seconds(config.get_int("dist_timeout"))});
    data::set_ram_cache_peers({.copies = env.local_world_size, .reports = env.local_rank == 0,
                               .shared_key = run_nonce(*group, env)});
    collectives = std::make_unique<dist::GroupCollectives>(*group, c10::Device(c10::kCPU));
    if (env.rank != 0) {
      try {
        return train_as_other_rank(config, *group, *collectives);
      } catch (...) {
        rethrow_lost_peer(env);
      }
    }
    log::info("Data-parallel training: {} processes ({}), {} backend, {} images per process", env.world_size, env.launcher,
              backend, config.get_int("batch") / env.world_size);
  }
  if (!group) return train_in_run_dir(config, nullptr, nullptr);
  try {
    return train_in_run_dir(config, group.get(), collectives.get());
  } catch (...) {
    publish_run_dir(*group, "");  // the others stop instead of waiting for a folder that never comes
    rethrow_lost_peer(env);
  }
}

}  // namespace libreyolo::cli
