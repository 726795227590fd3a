// The subcommands of the `libreyolo` binary; main.cpp only dispatches to these.
#pragma once

#include <string>
#include <vector>

namespace libreyolo::cli {

using Arguments = std::vector<std::string>;

// True when any argument asks for help (--help, -h, help).
inline bool wants_help(const Arguments& arguments) {
  for (const auto& argument : arguments) {
    if (argument == "--help" || argument == "-h" || argument == "help") return true;
  }
  return false;
}

int run_checks(const Arguments& arguments);   // checks / version
int run_cfg(const Arguments& arguments);      // print the resolved option table
int run_train(const Arguments& arguments);
int run_val(const Arguments& arguments);      // COCO metrics of a model on a split
int run_predict(const Arguments& arguments);  // detections on images, drawn + YOLO txt
int run_data(const Arguments& arguments);        // data check|preview|bench|synth
int run_data_bench(const Arguments& arguments);  // data bench
int run_info(const Arguments& arguments);        // model summary
int run_profile(const Arguments& arguments);     // profile run|summary|phases|kernels|ops|get|compare
int run_man_options(const Arguments& arguments);  // troff OPTIONS section, for maintainers

}  // namespace libreyolo::cli
