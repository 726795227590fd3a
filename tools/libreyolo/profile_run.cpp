#include "profile_run.h"

#include "commands.h"
#include "eval/task.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "data/dataset_yaml.h"
#include "dist/launch_env.h"
#include "profile/trials.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace libreyolo::cli {

namespace fs = std::filesystem;

int run_profile_trials(const ProfileRunOptions& o, bool json) {
  // Under torchrun or srun every rank runs this command; only rank 0 reads and prints the profile.
  const bool main_process = dist::resolve_launch_env(dist::process_environment()).rank == 0;
  const std::string model =
      o.model.empty() ? fmt::format("{}-{}", profile_family().name(), o.size.empty() ? profile_family().sizes().front() : o.size) : o.model;
  // a wrong data= fails before any folder is made
  const models::ModelName named = models::identify_model(model);
  (void)eval::task_named(named.family.empty() ? "detect" : models::family(named.family).task()).load_spec(o.data);
  std::vector<nlohmann::ordered_json> trials;
  std::vector<std::string> paths;
  for (int trial = 1; trial <= o.repeat; ++trial) {
    const std::string name = o.repeat == 1 ? "prof" : fmt::format("prof_{}", trial);
    std::vector<std::string> arguments{
        "model=" + model, "data=" + o.data, fmt::format("batch={}", o.batch), fmt::format("imgsz={}", o.image_size),
        fmt::format("workers={}", o.workers), fmt::format("amp={}", o.amp), "device=" + o.device, "profile=true",
        "profile_then_stop=true", fmt::format("profile_steps={}", o.steps), fmt::format("profile_warmup={}", o.warmup),
        // enough epochs that a tiny dataset still fills the window
        fmt::format("epochs={}", o.warmup + o.steps + 5), "no_aug_epochs=0", "val=false", "profile_open=false",
        "project=" + o.project, "name=" + name, "exist_ok=true", fmt::format("quiet={}", json)};
    if (o.nproc_per_node > 1 || o.nnodes > 1) {
      for (const auto& key : {fmt::format("nproc_per_node={}", o.nproc_per_node), fmt::format("nnodes={}", o.nnodes),
                              fmt::format("node_rank={}", o.node_rank), "master_addr=" + o.master_addr,
                              fmt::format("master_port={}", o.master_port), "dist_backend=" + o.dist_backend}) {
        arguments.push_back(key);
      }
    }
    if (!o.sync_bn.empty()) arguments.push_back("sync_bn=" + o.sync_bn);
    if (!o.amp_dtype.empty()) arguments.push_back("amp_dtype=" + o.amp_dtype);
    if (o.cuda_graph) arguments.emplace_back("cuda_graph=true");
    // passed even without --cuda_graph: training then says in one line that it is ignored
    if (o.cuda_graph || o.cuda_graph_scope != "network") arguments.push_back("cuda_graph_scope=" + o.cuda_graph_scope);
    log::set_quiet(json);
    const fs::path run_dir = fs::path(o.project) / name;
    std::error_code ignored;
    fs::remove(run_dir / "profile.json", ignored);  // never read a previous run's profile
    if (o.repeat > 1 && !json) log::info("profile run: trial {}/{} in {}", trial, o.repeat, run_dir.string());
    // The train command itself: it starts the data-parallel ranks (nproc_per_node, nnodes) or joins
    // them (under torchrun or srun), and rank 0 writes the profile.
    if (const int code = run_train(arguments)) return code;
    if (!main_process) continue;
    const fs::path profile = run_dir / "profile.json";
    if (!fs::exists(profile)) {
      fmt::print(stderr,
                 "libreyolo: error: no profile produced for run {}: the window (warmup {} + steps {}) never filled; lower "
                 "--steps/--warmup or use a larger dataset\n",
                 trial, o.warmup, o.steps);
      return 3;
    }
    std::ifstream in(profile);
    trials.push_back(nlohmann::ordered_json::parse(in));
    paths.push_back(profile.string());
  }
  if (!main_process) return 0;
  nlohmann::ordered_json result = trials.back();
  fs::path result_path = paths.back();
  if (o.repeat > 1) {
    result = profile::aggregate_trials(trials, paths);
    result_path = fs::path(o.project) / "profile_repeat.json";
    write_file_atomically(result_path, result.dump(2));
  }
  if (json) {
    fmt::print("{}\n", result.dump(2));
    return 0;
  }
  fmt::print("img/s: {:.2f} +/- {:.2f} (n={})  |  {}\n", result.value("img_per_s", 0.0), result.value("img_per_s_std", 0.0), o.repeat,
             result.value("bound", ""));
  fmt::print("profile: {}\n", result_path.string());
  fmt::print("next: libreyolo profile summary {}\n", result_path.string());
  return 0;
}

}  // namespace libreyolo::cli
