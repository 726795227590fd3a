// `libreyolo profile run`: trial training runs with profile=true, profile_then_stop=true.
#pragma once

#include <string>

namespace libreyolo::cli {

struct ProfileRunOptions {
  std::string data;
  std::string model;  // weights or name; empty: yolo9-<size>
  std::string size = "t";
  int batch = 16;
  int image_size = 640;
  int workers = 8;
  bool amp = true;
  int steps = 20;
  int warmup = 5;
  int repeat = 1;
  std::string device = "auto";
  std::string project = "runs/profile";
};

// Trial folders <project>/prof (one trial) or <project>/prof_1..N, and <project>/profile_repeat.json
// for N > 1. Returns 0, or 3 when a trial produced no profile.
int run_profile_trials(const ProfileRunOptions& options, bool json);

}  // namespace libreyolo::cli
