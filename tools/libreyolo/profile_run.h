// `libreyolo profile run`: trial training runs with profile=true, profile_then_stop=true.
#pragma once

#include "models/family.h"

#include <string>

namespace libreyolo::cli {

// The family `profile run` trains where no model is given: the first registered (the examples').
inline const models::Family& profile_family() { return *models::families().front(); }

struct ProfileRunOptions {
  std::string data;
  std::string model;  // weights or name; empty: a fresh model of profile_family() at `size`
  std::string size;   // empty: that family's first (smallest) size
  int batch = 16;
  int image_size = 640;
  int workers = 8;
  bool amp = true;
  std::string amp_dtype;  // empty: train's default
  int steps = 20;
  int warmup = 5;
  int repeat = 1;
  std::string device = "auto";
  std::string project = "runs/profile";
  // Data-parallel trials (the train keys of the same names); every rank's step time reaches the profile.
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string dist_backend = "auto";
  std::string sync_bn;  // empty: the model's default
  bool cuda_graph = false;  // profile the graphed step (its pool counts in the peak memory)
  std::string cuda_graph_scope = "network";
};

// Trial folders <project>/prof (one trial) or <project>/prof_1..N, and <project>/profile_repeat.json
// for N > 1. Returns 0, or 3 when a trial produced no profile.
int run_profile_trials(const ProfileRunOptions& options, bool json);

}  // namespace libreyolo::cli
